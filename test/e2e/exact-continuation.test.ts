/**
 * A greedy kiln/tiny-llama generation whose engine node is killed (kill -9, no restart) a quarter
 * of the way through: the next attempt, on another node, restores the failed attempt's latest KV
 * checkpoint from object storage (or prefills the prompt again) and decodes on exactly. The
 * output equals an uninterrupted run's, and the client's SSE stream goes on with no `reset`, no
 * repeated text and one `done`. Prints the time from the kill to `done` against the uninterrupted
 * run's time for the same remaining tokens.
 */
import type { ChildProcess } from 'node:child_process';
import { closeDb, type Db } from '../../db/client';
import { removeNode } from '../../db/nodes';
import { TINY_LLAMA } from '../../infra/seed';
import { expectContinuedExactly, finishedPrediction, startGreedyGeneration, untilQuarterStreamed } from '../exact-generation';
import { ensureTestModel } from '../fixtures/models';
import { newAccount, testDb } from '../helpers';
import { startEngineNode } from '../processes';
import { streamedText } from '../sse-follow';

jest.setTimeout(240_000);

const TOKENS = 1500;
/** Every decode held this long: the kill lands at a quarter however fast the machine is. */
const TOKEN_DELAY_MS = 3;
const NODE = `test-exact-continuation-${process.pid}`;

let db: Db;
let node: ChildProcess | undefined;

beforeAll(() => {
  db = testDb();
});
afterAll(async () => {
  node?.kill('SIGKILL');
  await removeNode(db, NODE).catch(() => undefined);
  await closeDb(db);
});

test('kill -9 of the engine node at a quarter of a greedy generation: the output equals an uninterrupted run, and the stream goes on', async () => {
  node = await startEngineNode(NODE);
  // A fresh version, placed anew on the started node (the smaller one).
  const version = await ensureTestModel(db, `exact-continuation-${Date.now()}`, TINY_LLAMA, { tokenDelayMs: TOKEN_DELAY_MS });
  const reference = (await newAccount(db, 'exact-reference')).token;
  const crashed = (await newAccount(db, 'exact-crashed')).token;

  const whole = await startGreedyGeneration(db, version, reference, TOKENS);
  const uninterrupted = await finishedPrediction(reference, whole.id, 180_000);
  expect(uninterrupted.status).toBe('succeeded');
  expect(uninterrupted.logs).toContain(`on node ${NODE}`);
  await whole.stream.finished;

  const run = await startGreedyGeneration(db, version, crashed, TOKENS);
  // Killed once a quarter of the tokens reached the client.
  await untilQuarterStreamed(run.stream, uninterrupted);
  node.kill('SIGKILL');
  const killedAt = Date.now();
  const streamedAtKill = streamedText(run.stream.events).length;
  await run.stream.finished;
  const doneAt = Date.now();
  const p = await finishedPrediction(crashed, run.id, 180_000);

  expectContinuedExactly(p, { reference: uninterrupted, tokens: TOKENS, failedNode: NODE, stream: run.stream });
  expect(p.logs).not.toContain('differed from the streamed text');
  const text = (p.output as string[]).join('');

  const remaining = 1 - streamedAtKill / text.length;
  const ratio = (doneAt - killedAt) / 1000 / (uninterrupted.metrics.predict_time * remaining);
  const resumed = (p.logs as string).split('\n').find((l) => /KV checkpoint/.test(l));
  console.log(
    `kill at ${((1 - remaining) * 100).toFixed(0)} % of the text; kill → done ${(doneAt - killedAt) / 1000} s; ` +
      `uninterrupted remaining ${(uninterrupted.metrics.predict_time * remaining).toFixed(2)} s; ratio ${ratio.toFixed(2)}×\n${resumed}`,
  );
});
