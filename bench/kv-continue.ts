/**
 * Issue 34's exact continuation, measured. Through the bench stack: a 1,500-token greedy
 * kiln/tiny-llama generation whose engine process is killed (kill -9; the supervisor restarts
 * it, and the restart reports the lost attempt) once a quarter of its text has reached the
 * client, against an uninterrupted run of the same prompt by another account: whether the output
 * is identical, whether the client's stream had a `reset` or repeated text, and the time from the
 * kill to `done` ÷ the uninterrupted run's time for the same remaining text. Then, on the engine
 * directly: what saving KV checkpoints while generating costs N streams decoding at once.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createAccount, createApiToken } from '../db/accounts';
import { closeDb, createDb } from '../db/client';
import { textGenerationInput } from '../domain/tasks/text-generation';
import { LlamaEngine } from '../engines/llama/engine';
import { KvSnapshotStore } from '../engines/llama/kv-snapshots';
import { TINY_LLAMA } from '../infra/seed';
import { newId } from '../lib/ids';
import { writeLlamaGguf } from '../tools/gguf/gguf-writer';
import { API_URL, call, DATA_DIR, saveResult, table } from './lib';

export interface KvContinueOptions {
  tokens: number;
  /** Concurrent streams for the checkpoint-cost rows. */
  streams: number;
  threads: number;
  skipApi: boolean;
}

interface Timed {
  event: string;
  data: string;
  at: number;
}

/** Reads a prediction's SSE stream to `done`, each event with its arrival time. */
async function readStream(url: string, token: string, events: Timed[]): Promise<void> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      events.push({ event, data: data.join('\n'), at: performance.now() });
      if (event === 'done') {
        await reader.cancel();
        return;
      }
    }
  }
}

const textOf = (events: Timed[]) =>
  events
    .filter((e) => e.event === 'output')
    .map((e) => e.data)
    .join('');

/** When the stream's text first reached `chars` characters. */
const reachedAt = (events: Timed[], chars: number) => {
  let n = 0;
  for (const e of events) if (e.event === 'output' && (n += e.data.length) >= chars) return e.at;
  return NaN;
};

async function throughApi(o: KvContinueOptions) {
  const db = createDb(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/kiln', { max: 2 });
  const run = newId().slice(-6).toLowerCase();
  const tokenOf = async (name: string) => (await createApiToken(db, (await createAccount(db, `bench-${name}-${run}`)).id, 'bench')).token;
  const reference = await tokenOf('continue-reference');
  const crashed = await tokenOf('continue-crashed');
  await closeDb(db);
  const input = { prompt: `The kiln was ${run}`, max_tokens: o.tokens, min_tokens: o.tokens, temperature: 0 };
  const start = async (token: string) => {
    const p = await call(token, '/v1/models/kiln/tiny-llama/predictions', { input });
    const events: Timed[] = [];
    return { id: p.id as string, events, read: readStream(p.urls.stream, token, events) };
  };
  // Warm: the model loaded, so that both runs start alike.
  await call(reference, '/v1/models/kiln/tiny-llama/predictions', { input: { prompt: 'warm', max_tokens: 4 } }, { prefer: 'wait' });

  const whole = await start(reference);
  await whole.read;
  const wholeText = textOf(whole.events);

  const pidfile = path.join(process.env.KILN_RUN_DIR ?? DATA_DIR, 'pids', 'engine-worker.pid');
  const victim = await start(crashed);
  const quarter = wholeText.length / 4;
  while (textOf(victim.events).length < quarter) await new Promise((r) => setTimeout(r, 2));
  process.kill(Number(readFileSync(pidfile, 'utf8').trim()), 'SIGKILL');
  const killedAt = performance.now();
  const killedChars = textOf(victim.events).length;
  await victim.read;
  const doneAt = victim.events.at(-1)!.at;
  const p = await call(crashed, `/v1/predictions/${victim.id}`);
  const text = (p.output as string[]).join('');
  const streamed = textOf(victim.events);
  // The uninterrupted run's time for the same remaining text: from where its stream had as much, to its done.
  const remainingMs = whole.events.at(-1)!.at - reachedAt(whole.events, killedChars);
  const logs = (p.logs as string).split('\n');
  const rows = [
    {
      commit: process.env.KILN_COMMIT ?? '',
      prediction: victim.id,
      tokens: o.tokens,
      'killed at (share of text)': (killedChars / wholeText.length).toFixed(2),
      'output identical': text === wholeText ? 'yes' : 'no',
      'stream: resets': victim.events.filter((e) => e.event === 'reset').length,
      'stream: text once': streamed === text ? 'yes' : 'no',
      'stream: done events': victim.events.filter((e) => e.event === 'done').length,
      'kill → done': `${((doneAt - killedAt) / 1000).toFixed(2)} s`,
      'uninterrupted, same remaining text': `${(remainingMs / 1000).toFixed(2)} s`,
      ratio: `${((doneAt - killedAt) / remainingMs).toFixed(2)}× (target ≤ 2×)`,
    },
  ];
  table('kill -9 of the engine at a quarter of a greedy generation (supervisor restarts it)', rows);
  console.log(logs.filter((l) => /Attempt|Warming|Loaded|KV checkpoint|Continued|Generated/.test(l)).join('\n'));
  return rows;
}

/** N streams at once on the engine directly, with and without checkpoints: tokens/s and the longest gap between two tokens of a stream. */
async function checkpointCost(o: KvContinueOptions) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-kv-continue-'));
  const file = path.join(dir, 'tiny.gguf');
  await writeLlamaGguf(file, TINY_LLAMA);
  const rows = [];
  try {
    for (const checkpoints of [false, true, false, true]) {
      const snapshots = checkpoints ? new KvSnapshotStore({ dir: path.join(dir, 'kv'), budgetBytes: 2 ** 32, minTokens: 512 }) : undefined;
      const engine = new LlamaEngine({ gpu: 'false', contextSize: 4096, sequences: o.streams, threads: o.threads, snapshots });
      await engine.load('v', file);
      const gaps: number[] = [];
      const started = performance.now();
      const results = await Promise.all(
        Array.from({ length: o.streams }, async (_, i) => {
          let last = performance.now();
          return engine.generate(
            'v',
            textGenerationInput.parse({ prompt: `stream ${i} ${started}`, max_tokens: o.tokens, min_tokens: o.tokens, temperature: 0 }),
            {
              owner: `o${i}`,
              onChunk: () => {
                const now = performance.now();
                gaps.push(now - last);
                last = now;
              },
            },
          );
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      const saved = results.reduce((n, r) => n + (r.checkpoints?.saved ?? 0), 0);
      const saveSeconds = results.reduce((n, r) => n + (r.checkpoints?.seconds ?? 0), 0);
      gaps.sort((a, b) => a - b);
      rows.push({
        checkpoints: checkpoints ? 'on' : 'off',
        streams: o.streams,
        'tokens/s (all streams)': ((o.streams * o.tokens) / seconds).toFixed(0),
        'p99 gap between tokens': `${gaps[Math.floor(gaps.length * 0.99)].toFixed(1)} ms`,
        'longest gap': `${gaps.at(-1)!.toFixed(1)} ms`,
        'checkpoints saved': saved,
        'mean save': saved ? `${((saveSeconds / saved) * 1000).toFixed(1)} ms` : '-',
      });
      await engine.dispose();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  table(`KV checkpoints while ${o.streams} streams generate ${o.tokens} tokens each (the engine directly, runs alternate)`, rows);
  return rows;
}

export async function kvContinue(o: KvContinueOptions): Promise<void> {
  const api = o.skipApi ? [] : await throughApi(o);
  const cost = await checkpointCost(o);
  console.log(`\nresult: ${await saveResult('kv-continue', { options: o, api, cost, url: API_URL })}`);
}
