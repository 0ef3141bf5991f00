/**
 * A greedy answer does not depend on how much of its prompt was found evaluated: the trained chat
 * model answers a long chat the same whether it evaluates the whole prompt or finds all but its
 * last token kept in the sequence. A random-weight model cannot show it (its near-equal tokens are
 * few); the trained one's choice between two near-equal tokens (a comma or a full stop) followed
 * the rounding of the batch its last prompt token was evaluated in. The model is fetched by npm
 * test's install step (infra/fetch-trained-models.py); without it this fails.
 */
import { existsSync } from 'node:fs';
import { textGenerationInput } from '../../domain/tasks/text-generation';
import { LlamaEngine } from '../../engines/llama/engine';
import { trainedModelPath, trainedModels } from '../../infra/trained-models';
import { newId } from '../../lib/ids';

jest.setTimeout(240_000);

const file = trainedModelPath(trainedModels().find((m) => m.name === 'smollm2-135m-instruct')!);
// One thread, as the suite's engines run (infra/test.sh): beside the other lanes a second one waits
// for the first at every step, spinning (59 against 51 CPU-s for this file on a busy two-core box).
const engine = new LlamaEngine({ gpu: 'false', contextSize: 4096, sequences: 4, threads: 1 });

const chat = (system: string) =>
  textGenerationInput.parse({
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: 'How hot is it?' },
    ],
    max_tokens: 16,
    temperature: 0,
  });

beforeAll(async () => {
  if (!existsSync(file)) throw new Error(`${file} is missing: run python3 infra/fetch-trained-models.py (npm test's install does)`);
  await engine.load('smol', file, { contextSize: 4096, sequences: 4 });
});
afterAll(() => engine.dispose());

test('six long chats each answer the same cold and with all but the last prompt token cached', async () => {
  const answers: Array<{ cold: string; cached: string; cachedTokens: number; inputTokens: number }> = [];
  for (let i = 0; i < 6; i++) {
    const system = `Session ${newId()}. ${'You keep the kiln at an even heat and answer in few words. '.repeat(60)}`;
    const cold = await engine.generate('smol', chat(system));
    const cached = await engine.generate('smol', chat(system));
    answers.push({
      cold: cold.chunks.join(''),
      cached: cached.chunks.join(''),
      cachedTokens: cached.cachedTokens,
      inputTokens: cached.inputTokens,
    });
  }
  for (const a of answers) expect(a.cachedTokens).toBe(a.inputTokens - 1);
  expect(answers.map((a) => a.cached)).toEqual(answers.map((a) => a.cold));
});
