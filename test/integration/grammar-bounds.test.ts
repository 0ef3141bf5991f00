/**
 * Schemas at every bound the API lets through build a grammar llama.cpp's parser accepts (issue
 * 37, finding 3): what validation accepts never fails on the engine. Lengths, item counts and a
 * pattern's repetitions at 1000, nested repetitions, 15-digit ranges, formats in arrays.
 */
import type { Llama } from 'node-llama-cpp';
import { jsonSchemaDocument } from '../../domain/tasks/json-schema';
import { loadNodeLlamaCpp } from '../../engines/llama/engine';
import { jsonSchemaGrammar } from '../../engines/llama/grammar';

jest.setTimeout(120_000);

let llama: Llama;
let Text: Awaited<ReturnType<typeof loadNodeLlamaCpp>>['LlamaText'];
beforeAll(async () => {
  const nlc = await loadNodeLlamaCpp();
  llama = await nlc.getLlama({ gpu: false, build: 'never' });
  Text = nlc.LlamaText;
});
afterAll(() => llama?.dispose());

test.each([
  { type: 'string', maxLength: 1000 },
  { type: 'string', minLength: 1000 },
  { type: 'object', additionalProperties: { type: 'string' }, minProperties: 1000 },
  { type: 'string', pattern: '^a{1000}b{0,1000}$' },
  { type: 'string', pattern: '^(a{0,1000}){0,1000}$' },
  { type: 'string', pattern: '^((ab|cd)[0-9]{2,1000}x?){1000}$' },
  { type: 'integer', minimum: -999999999999999, maximum: 999999999999999 },
  { type: 'number', exclusiveMinimum: -1e20, multipleOf: 0.001 },
  { type: 'array', items: { type: 'string', format: 'email' }, maxItems: 1000 },
  {
    type: 'array',
    items: {
      type: 'object',
      properties: { a: { type: 'integer', minimum: 3, maximum: 700 }, b: { type: 'string', pattern: '^x{1,1000}$' } },
    },
    minItems: 1000,
  },
])('%j builds', async (schema) => {
  const valid = jsonSchemaDocument.parse(schema);
  await expect(jsonSchemaGrammar(llama, valid, Text)).resolves.toBeDefined();
});

test('one past the bound is refused before it reaches the engine', () => {
  for (const schema of [
    { type: 'string', maxLength: 1001 },
    { type: 'string', pattern: '^a{1001}$' },
  ])
    expect(jsonSchemaDocument.safeParse(schema).success).toBe(false);
});
