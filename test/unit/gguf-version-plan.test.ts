/** What a pulled GGUF becomes, from its own metadata: task, context and chat template. */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ggufVersionPlan } from '../../cli/gguf-version-plan';
import { ggufFileMetadata } from '../../lib/gguf-file-metadata';
import { type LlamaSpecInput, writeLlamaGguf } from '../../tools/gguf/gguf-writer';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-gguf-plan-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const TEMPLATE =
  '{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}';

async function planOf(name: string, spec: Partial<LlamaSpecInput>, maxContext = 8192) {
  const file = path.join(dir, `${name}.gguf`);
  await writeLlamaGguf(file, { embedding: 32, layers: 1, heads: 2, feedForward: 32, vocabWords: 20, ...spec });
  return ggufVersionPlan(await ggufFileMetadata(file), maxContext);
}

test('a causal model with a chat template generates text, with its trained context', async () => {
  expect(await planOf('chat', { chatTemplate: TEMPLATE, contextLength: 2048 })).toMatchObject({
    task: 'text-generation',
    architecture: 'llama',
    contextSize: 2048,
    trainedContext: 2048,
    chatTemplate: true,
  });
});

test('without a template it still generates, and says chats get a wrapper', async () => {
  const plan = await planOf('plain', { contextLength: 1024 });
  expect(plan).toMatchObject({ task: 'text-generation', chatTemplate: false, contextSize: 1024 });
  expect(plan.because).toMatch(/without a chat template/);
});

test('a model that pools its token states embeds, template or not', async () => {
  expect(await planOf('mean', { pooling: 'mean' })).toMatchObject({ task: 'embeddings', because: 'it pools its token states (mean)' });
  expect(await planOf('last', { pooling: 'last', chatTemplate: TEMPLATE })).toMatchObject({ task: 'embeddings', chatTemplate: true });
});

test('the context is capped by the setting, and a context under the smallest a version takes is left to the server', async () => {
  expect(await planOf('long', { contextLength: 131072 }, 4096)).toMatchObject({ contextSize: 4096, trainedContext: 131072 });
  const short = await planOf('short', { contextLength: 128 });
  expect(short.contextSize).toBeUndefined();
  expect(short.trainedContext).toBe(128);
});

test('encoders embed; rerankers, adapters and files without an architecture are refused', () => {
  const meta = (entries: Array<[string, string | number]>) => new Map<string, string | number>(entries);
  expect(
    ggufVersionPlan(
      meta([
        ['general.architecture', 'bert'],
        ['bert.context_length', 512],
      ]),
      8192,
    ),
  ).toMatchObject({
    task: 'embeddings',
    contextSize: 512,
    because: 'bert is an encoder',
  });
  expect(() =>
    ggufVersionPlan(
      meta([
        ['general.architecture', 'qwen3'],
        ['qwen3.pooling_type', 4],
      ]),
      8192,
    ),
  ).toThrow(/reranker/);
  expect(() =>
    ggufVersionPlan(
      meta([
        ['general.architecture', 'llama'],
        ['adapter.type', 'lora'],
      ]),
      8192,
    ),
  ).toThrow(/--lora-for/);
  expect(() => ggufVersionPlan(meta([]), 8192)).toThrow(/general.architecture/);
});

test('a file that is not a GGUF is refused by its reader', async () => {
  const file = path.join(dir, 'not.gguf');
  await writeFile(file, 'PK\u0003\u0004 a zip, not a model');
  await expect(ggufFileMetadata(file)).rejects.toThrow(/not a readable GGUF file: not a GGUF file/);
});
