/**
 * The bounds a JSON schema keeps before any recursive work (issue 37): depth, keys, size and
 * reserved property names, checked without recursion, and the same bounds in the engine.
 */
import type { Llama, LlamaText } from 'node-llama-cpp';
import { jsonSchemaDocument } from '../../domain/tasks/json-schema';
import { MAX_SCHEMA_DEPTH, MAX_SCHEMA_KEYS, schemaBoundsIssue } from '../../domain/tasks/schema-bounds';
import { textGenerationInput } from '../../domain/tasks/text-generation';
import { EngineError } from '../../engines/engine-error';
import { jsonSchemaGrammar } from '../../engines/llama/grammar';

/** `depth` levels of items as JSON text: deeper than JSON.stringify itself could write. */
const nestedText = (depth: number) => `${'{"items":'.repeat(depth)}{"type":"string"}${'}'.repeat(depth)}`;

describe('depth', () => {
  test.each([400, 5000, 200_000])('a schema %i levels deep is refused at json_schema, without a stack overflow', (depth) => {
    const r = textGenerationInput.safeParse({ prompt: 'x', json_schema: JSON.parse(nestedText(depth)) });
    expect(r.error?.issues).toEqual([
      expect.objectContaining({ path: ['json_schema'], message: `is nested deeper than ${MAX_SCHEMA_DEPTH} levels` }),
    ]);
  });

  test('the deepest schema allowed passes; one level more does not', () => {
    // Each `items` level is one container; the innermost schema is one more.
    expect(jsonSchemaDocument.safeParse(JSON.parse(nestedText(MAX_SCHEMA_DEPTH - 1))).success).toBe(true);
    expect(schemaBoundsIssue(JSON.parse(nestedText(MAX_SCHEMA_DEPTH)))?.message).toMatch(/nested deeper/);
  });

  test('arrays count as levels too: anyOf inside anyOf', () => {
    let schema: unknown = { type: 'null' };
    for (let i = 0; i < 40; i++) schema = { anyOf: [schema] };
    expect(schemaBoundsIssue(schema)?.message).toMatch(/nested deeper/);
  });
});

test('keys and size are bounded over the whole schema', () => {
  const properties = Object.fromEntries(Array.from({ length: MAX_SCHEMA_KEYS }, (_, i) => [`p${i}`, {}]));
  expect(schemaBoundsIssue({ type: 'object', properties })?.message).toBe(`has more than ${MAX_SCHEMA_KEYS} keys`);
  expect(schemaBoundsIssue({ type: 'string', description: 'd'.repeat(70_000) })?.message).toBe('is larger than 64 KiB');
  expect(schemaBoundsIssue({ enum: Array.from({ length: 20_000 }, (_, i) => i) })?.message).toBe('is larger than 64 KiB');
});

describe('reserved property names', () => {
  test.each(['__proto__', 'constructor', 'prototype'])('%s is refused as a property, a required name and a definition', (name) => {
    // JSON.parse keeps `__proto__` as an own property, as a request body carries it.
    const asProperty = JSON.parse(`{"type":"object","properties":{"${name}":{"type":"string"}}}`);
    const asRequired = { type: 'object', properties: { a: { type: 'string' } }, required: ['a', name] };
    const asDefinition = JSON.parse(`{"$defs":{"${name}":{"type":"string"}},"$ref":"#/$defs/${name}"}`);
    for (const [schema, path] of [
      [asProperty, ['json_schema', 'properties']],
      [asRequired, ['json_schema', 'required', 1]],
      [asDefinition, ['json_schema', '$defs']],
    ] as const) {
      const r = textGenerationInput.safeParse({ prompt: 'x', json_schema: schema });
      expect(r.error?.issues[0]).toMatchObject({ path, message: expect.stringContaining(`"${name}" is reserved`) });
    }
  });

  test('the same words as values or annotations are fine', () => {
    const schema = {
      type: 'object',
      title: 'constructor',
      properties: {
        kind: { enum: ['__proto__', 'prototype'] },
        properties: { type: 'object', properties: { x: { const: 'constructor' } } },
      },
      required: ['kind'],
    };
    expect(jsonSchemaDocument.safeParse(schema).error).toBeUndefined();
  });
});

describe('the engine', () => {
  const Text = ((parts: string[]) => parts.join('')) as unknown as typeof LlamaText;

  test('refuses a schema past the bounds before any conversion, as InvalidInput naming json_schema', async () => {
    const llama = { createGrammarForJsonSchema: jest.fn(), createGrammar: jest.fn() } as unknown as Llama;
    const err = await jsonSchemaGrammar(llama, JSON.parse(nestedText(100_000)), Text).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect(err).toMatchObject({ type: 'InvalidInput', message: expect.stringMatching(/^input\.json_schema: is nested deeper/) });
    expect(llama.createGrammarForJsonSchema).not.toHaveBeenCalled();
  });

  test("a grammar llama.cpp cannot parse is InvalidInput (never retried), keeping llama.cpp's error as its cause", async () => {
    const parseError = new Error('Failed to parse grammar');
    const llama = {
      createGrammarForJsonSchema: async () => ({ grammar: 'root ::= "x"' }),
      createGrammar: async () => {
        throw parseError;
      },
    } as unknown as Llama;
    const err = await jsonSchemaGrammar(llama, { type: 'string' }, Text).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect(err).toMatchObject({
      type: 'InvalidInput',
      message: 'input.json_schema: llama.cpp cannot build a grammar from this schema (Failed to parse grammar)',
      cause: parseError,
    });
  });
});
