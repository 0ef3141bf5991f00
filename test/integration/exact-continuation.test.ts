/**
 * A generation continued by a second engine (another process, as after a crash) equals the
 * uninterrupted one token for token: from a KV checkpoint the first engine saved while it
 * generated, and, with no checkpoint, from the prompt prefilled again. Greedy and seeded, a
 * completion on the random-weight test model and a chat on the trained chat model (fetched by npm
 * test's install step, infra/fetch-trained-models.py); a chat with a JSON schema is still answered
 * by LlamaChat and continued from its text.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { textGenerationInput } from '../../domain/tasks/text-generation';
import { LlamaEngine } from '../../engines/llama/engine';
import { KvSnapshotStore } from '../../engines/llama/kv-snapshots';
import { TINY_LLAMA } from '../../infra/seed';
import { trainedModelPath, trainedModels } from '../../infra/trained-models';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';

jest.setTimeout(240_000);

const TOKENS = 600;
/** A chat's answer: past two chunk boundaries, so that a checkpoint is saved before it dies. */
const CHAT_TOKENS = 200;
const chatFile = trainedModelPath(trainedModels().find((m) => m.name === 'smollm2-135m-instruct')!);
const chat = {
  messages: [
    { role: 'system', content: 'You are a potter who explains things plainly.' },
    { role: 'user', content: 'How do I fire a kiln for stoneware, step by step?' },
  ],
};
let dir: string;
let file: string;
const engines: LlamaEngine[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-exact-'));
  file = path.join(dir, 'tiny.gguf');
  await writeLlamaGguf(file, TINY_LLAMA);
  if (!existsSync(chatFile)) throw new Error(`${chatFile} is missing: run python3 infra/fetch-trained-models.py (npm test's install does)`);
});

afterAll(async () => {
  for (const engine of engines) await engine.dispose();
  await rm(dir, { recursive: true, force: true });
});

/** An engine on the test model (or the trained chat model), with its own KV snapshot folder (or none). */
async function engineWith(snapshots?: string, model = file): Promise<LlamaEngine> {
  const store = snapshots ? new KvSnapshotStore({ dir: snapshots, budgetBytes: 2 ** 30, minTokens: 32 }) : undefined;
  const engine = new LlamaEngine({ gpu: 'false', contextSize: 2048, sequences: 2, threads: 1, snapshots: store });
  await engine.load('v1', model);
  engines.push(engine);
  return engine;
}

/**
 * The chunks as streamed, with the output's length in tokens after each (what the stream records);
 * `dieAt`: aborted once that many tokens were streamed, as a killed engine stops.
 */
async function generate(
  engine: LlamaEngine,
  ask: Record<string, unknown>,
  opts: { continues?: string; continuedTokens?: number; dieAt?: number } = {},
) {
  const counts: number[] = [];
  const dies = new AbortController();
  const input = textGenerationInput.parse('messages' in ask ? ask : { prompt: 'The kiln was', ...ask });
  const r = await engine.generate('v1', input, {
    continues: opts.continues,
    continuedTokens: opts.continuedTokens,
    owner: 'exact',
    signal: dies.signal,
    onChunk: (_c, tokens) => {
      counts.push(tokens);
      if (opts.dieAt !== undefined && tokens >= opts.dieAt) dies.abort();
    },
  });
  return { ...r, counts, text: r.chunks.join('') };
}

/** What a failed attempt had streamed when it died: the text and its token count. */
function streamed(failed: { chunks: string[]; counts: number[] }) {
  return { continues: failed.chunks.join(''), continuedTokens: failed.counts.at(-1)! };
}

for (const [name, ask] of [
  ['greedy', { max_tokens: TOKENS, min_tokens: TOKENS, temperature: 0 }],
  ['seeded', { max_tokens: TOKENS, min_tokens: TOKENS, temperature: 0.8, seed: 77 }],
] as const) {
  test(`${name}: continued from the checkpoint another engine saved, the output equals an uninterrupted run`, async () => {
    const whole = await generate(await engineWith(), ask);
    const shared = path.join(dir, `snapshots-${name}`);
    const failed = await generate(await engineWith(shared), ask, { dieAt: TOKENS / 4 });
    expect(failed.checkpoints?.saved ?? 0).toBeGreaterThan(0);
    const cut = streamed(failed);
    expect(whole.text.startsWith(cut.continues)).toBe(true);
    const continued = await generate(await engineWith(shared), ask, cut);
    expect(continued.resumed).toMatchObject({ from: 'checkpoint', tier: 'disk', matched: true });
    expect(continued.resumed!.atToken).toBeLessThanOrEqual(cut.continuedTokens);
    expect(cut.continues + continued.text).toBe(whole.text);
    expect(continued.outputTokens).toBe(TOKENS);
  });

  test(`${name}: with no checkpoint the prompt is prefilled again, and the output still equals an uninterrupted run`, async () => {
    const whole = await generate(await engineWith(), ask);
    const cut = streamed(await generate(await engineWith(), ask, { dieAt: TOKENS / 4 }));
    const continued = await generate(await engineWith(), ask, cut);
    expect(continued.resumed).toMatchObject({ from: 'prefill', atToken: 0, redrawn: cut.continuedTokens, matched: true });
    expect(cut.continues + continued.text).toBe(whole.text);
  });
}

for (const [name, ask] of [
  ['greedy', { ...chat, max_tokens: CHAT_TOKENS, min_tokens: CHAT_TOKENS, temperature: 0 }],
  ['seeded', { ...chat, max_tokens: CHAT_TOKENS, min_tokens: CHAT_TOKENS, temperature: 0.8, seed: 77 }],
] as const) {
  test(`${name} chat: continued from the checkpoint another engine saved, the answer equals an uninterrupted run`, async () => {
    const whole = await generate(await engineWith(undefined, chatFile), ask);
    const shared = path.join(dir, `snapshots-chat-${name}`);
    const failed = await generate(await engineWith(shared, chatFile), ask, { dieAt: CHAT_TOKENS / 2 });
    expect(failed.checkpoints?.saved ?? 0).toBeGreaterThan(0);
    const cut = streamed(failed);
    expect(whole.text.startsWith(cut.continues)).toBe(true);
    const continued = await generate(await engineWith(shared, chatFile), ask, cut);
    expect(continued.resumed).toMatchObject({ from: 'checkpoint', tier: 'disk', matched: true });
    expect(continued.resumed!.atToken).toBeGreaterThan(0);
    expect(continued.resumed!.atToken).toBeLessThanOrEqual(cut.continuedTokens);
    expect(cut.continues + continued.text).toBe(whole.text);
    expect(continued.outputTokens).toBe(CHAT_TOKENS);
  });
}

test('a chat with a JSON schema is answered by LlamaChat: it saves no checkpoint and continues from its text', async () => {
  const ask = {
    ...chat,
    max_tokens: 48,
    temperature: 0,
    json_schema: { type: 'object', properties: { steps: { type: 'array', items: { type: 'string' } } }, required: ['steps'] },
  };
  const failed = await generate(await engineWith(path.join(dir, 'snapshots-schema'), chatFile), ask, { dieAt: 8 });
  expect(failed.checkpoints).toBeUndefined();
  const continued = await generate(await engineWith(path.join(dir, 'snapshots-schema'), chatFile), ask, streamed(failed));
  expect(continued.resumed).toBeUndefined();
  expect(continued.checkpoints).toBeUndefined();
});
