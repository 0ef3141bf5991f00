import { z } from 'zod';
import { jsonSchemaDocument, toGrammarSchema } from '../../domain/tasks/json-schema';
import { textGenerationInput } from '../../domain/tasks/text-generation';
import { boundNumbers, closingOf } from '../../engines/llama/grammar';

describe('json_schema input', () => {
  test.each([
    [{ type: 'object', properties: { a: { type: 'number', minimum: 0.1, maximum: 0.9 } } }, 'json_schema.properties.a.minimum'],
    [{ type: 'object', properties: { a: { type: 'string', pattern: '(?<=x)y' } } }, 'json_schema.properties.a.pattern'],
    [{ type: 'strin' }, 'json_schema.type'],
    [{ type: 'string', format: 'color' }, 'json_schema.format'],
    [{ allOf: [{ type: 'string' }] }, 'json_schema.allOf'],
    [{ $ref: 'http://elsewhere/schema' }, 'json_schema.$ref'],
    [{ type: 'array', items: { type: 'string', minLength: 5, maxLength: 2 } }, 'json_schema.items.minLength'],
    [{ type: 'object', propertie: {} }, 'json_schema'],
  ])('%j is refused at %s', (schema, field) => {
    const r = textGenerationInput.safeParse({ prompt: 'x', json_schema: schema });
    expect(r.success).toBe(false);
    expect(r.error!.issues[0].path.join('.')).toBe(field);
  });

  test('min_tokens does not go with json_schema', () => {
    const r = textGenerationInput.safeParse({ prompt: 'x', json_schema: { type: 'object' }, min_tokens: 5 });
    expect(r.error?.issues[0].path).toEqual(['min_tokens']);
  });

  test('what clients send is accepted: zod-generated schemas with $schema, anyOf nullables, definitions', () => {
    const schema = {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      properties: {
        name: { type: 'string', description: 'who' },
        nick: { anyOf: [{ type: 'string' }, { type: 'null' }] },
        home: { $ref: '#/definitions/place' },
      },
      required: ['name', 'nick', 'home'],
      additionalProperties: false,
      definitions: { place: { type: 'object', properties: { city: { type: 'string' } } } },
    };
    expect(jsonSchemaDocument.safeParse(schema).success).toBe(true);
  });

  test('z.toJSONSchema output of zod 4 (ints carry the safe-integer range) is accepted', () => {
    const schema = z.toJSONSchema(
      z.object({ name: z.string(), age: z.number().int(), pet: z.enum(['cat', 'dog']), nick: z.string().nullable() }),
    );
    expect(jsonSchemaDocument.safeParse(schema).error?.issues).toBeUndefined();
    // A bound past the 15 digits the grammar writes holds already.
    expect(jsonSchemaDocument.safeParse({ type: 'number', maximum: 1e300 }).success).toBe(true);
  });

  test('a schema over 64 KiB is refused', () => {
    const properties = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`property_number_${i}`, { type: 'string' }]));
    expect(jsonSchemaDocument.safeParse({ type: 'object', properties }).success).toBe(false);
  });
});

describe('the grammar form of a schema', () => {
  test('anyOf is a choice, a type list too, annotations go, refs point at $defs', () => {
    expect(
      toGrammarSchema({
        title: 'T',
        type: 'object',
        properties: {
          a: { anyOf: [{ type: 'string' }, { type: 'null' }] },
          b: { type: ['integer', 'boolean'] },
          c: { $ref: '#/definitions/d' },
        },
        definitions: { d: { const: 1 } },
      }),
    ).toEqual({
      type: 'object',
      properties: {
        a: { oneOf: [{ type: 'string' }, { type: 'null' }] },
        b: { oneOf: [{ type: 'integer' }, { type: 'boolean' }] },
        c: { $ref: '#/$defs/d' },
      },
      $defs: { d: { const: 1 } },
    });
  });

  test('an object with no properties takes any keys (json_object); one with properties only those', () => {
    expect(toGrammarSchema({ type: 'object' })).toEqual({ type: 'object', properties: {}, additionalProperties: true });
    expect(toGrammarSchema({ type: 'object', properties: { a: { type: 'string' } } })).toEqual({
      type: 'object',
      properties: { a: { type: 'string' } },
    });
  });

  test('the closing reserve covers keys, punctuation and shortest values', () => {
    const closing = closingOf({ type: 'object', properties: { name: { type: 'string' }, pet: { enum: ['cat', 'dog'] } } });
    const reserve = closing.text.length + closing.valueChars;
    // {"name":"","pet":"cat"} is 23 characters
    expect(reserve).toBeGreaterThanOrEqual(23);
    expect(reserve).toBeLessThan(40);
  });
});

test('numbers in the grammar stay within what a double holds: no exponent for integers, 15 digits', () => {
  const gbnf = [
    'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
    'fractional-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
  ].join('\n');
  expect(boundNumbers(gbnf).split('\n')).toEqual([
    'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,14})',
    'fractional-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,14}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]?))?',
  ]);
});
