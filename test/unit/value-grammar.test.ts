/**
 * The GBNF Kiln writes for values node-llama-cpp's generator leaves out (domain/grammar/): every
 * string it accepts is valid for the schema keyword (checked by translating it to a regular
 * expression), and the values a client expects are among them.
 */
import fc from 'fast-check';
import { z } from 'zod';
import { FORMAT_PATTERNS } from '../../domain/grammar/formats';
import { integerRangeGbnf } from '../../domain/grammar/integer-range';
import { leafGrammar } from '../../domain/grammar/leaf';
import { type NumberBounds, numberRangeGbnf } from '../../domain/grammar/number-range';
import { PatternError, patternGrammar } from '../../domain/grammar/pattern';
import { type GrammarLeaf, jsonSchemaDocument, toGrammarSchema } from '../../domain/tasks/json-schema';
import { withLeaves } from '../../engines/llama/grammar';
import { gbnfToRegex } from '../gbnf-regex';

describe('integer ranges', () => {
  test('accept exactly the integers in the range, written as JSON writes them', () => {
    fc.assert(
      fc.property(fc.integer({ min: -3000, max: 3000 }), fc.integer({ min: 0, max: 3000 }), (lo, width) => {
        const hi = lo + width;
        const re = gbnfToRegex(integerRangeGbnf(lo, hi)!);
        for (let v = lo - 30; v <= hi + 30; v += v < lo + 30 || v > hi - 30 ? 1 : 97)
          expect([v, re.test(String(v))]).toEqual([v, v >= lo && v <= hi]);
        expect(re.test(`0${Math.abs(lo)}`)).toBe(false);
        expect(re.test('-0')).toBe(false);
      }),
      { seed: 37, numRuns: 60 },
    );
  });

  test('a side left open reaches the 15 digits every grammar number keeps to', () => {
    const atLeastOne = gbnfToRegex(integerRangeGbnf(1)!);
    expect(['1', '3', '999999999999999'].map((v) => atLeastOne.test(v))).toEqual([true, true, true]);
    expect(['0', '-1', '1000000000000000', '01'].map((v) => atLeastOne.test(v))).toEqual([false, false, false, false]);
    expect(integerRangeGbnf(5, 4)).toBeUndefined();
  });
});

describe('number ranges', () => {
  const numbers = ['-5', '-4.99', '-4.5', '-1', '-0.5', '0', '0.25', '0.999', '1', '1.5', '4.99', '5', '5.5', '10', '1e3', '00', '.5'];

  test.each([
    [{ minimum: 0, maximum: 1 }, ['0', '0.25', '0.999', '1']],
    // Sound before complete: a fraction only after a whole part whose every fraction is inside.
    [{ exclusiveMinimum: -5, maximum: 5 }, ['-1', '-0.5', '0', '1.5', '4.99', '5']],
    [{ minimum: -0.5, exclusiveMaximum: 5 }, ['0', '0.25', '1', '1.5']],
    [{ minimum: 1 }, ['1', '1.5', '5', '10']],
  ] as Array<[NumberBounds, string[]]>)('%j: every number written lies in the range; these are among them: %j', (bounds, expected) => {
    const re = gbnfToRegex(numberRangeGbnf(bounds)!);
    const accepted = numbers.filter((n) => re.test(n));
    for (const n of accepted) {
      const v = Number(n);
      expect([n, v >= (bounds.minimum ?? -Infinity) && v <= (bounds.maximum ?? Infinity)]).toEqual([n, true]);
      expect([n, v > (bounds.exclusiveMinimum ?? -Infinity) && v < (bounds.exclusiveMaximum ?? Infinity)]).toEqual([n, true]);
    }
    expect(accepted).toEqual(expect.arrayContaining(expected));
  });

  test('multipleOf: powers of ten limit the decimals, other whole steps list their multiples, the rest is refused', () => {
    const cents = leafGrammar({ type: 'number', minimum: 0, maximum: 100, multipleOf: 0.01 }, 'p');
    const re = gbnfToRegex((cents as { expr: string }).expr);
    expect(['0', '12.5', '99.99', '12.345', '100.5'].map((v) => re.test(v))).toEqual([true, true, true, false, false]);
    const fives = leafGrammar({ type: 'integer', minimum: -10, exclusiveMaximum: 10, multipleOf: 5 }, 'p');
    expect(fives).toEqual({ expr: '("-10" | "-5" | "0" | "5")', rules: [] });
    expect(leafGrammar({ type: 'integer', multipleOf: 3 }, 'p')).toMatch(/multipleOf can be enforced only/);
    expect(leafGrammar({ type: 'number', multipleOf: 0.3, maximum: 3, minimum: 0 }, 'p')).toMatch(/multipleOf can be enforced only/);
    expect(leafGrammar({ type: 'number', minimum: 0.2, maximum: 0.8 }, 'p')).toMatch(/no whole number lies within the range/);
  });
});

/** Strings a pattern may or may not match, JSON-encoded as the grammar writes them. */
const samples = [
  '',
  'a',
  'ab',
  'abc',
  'ABC-12',
  'ABC-1234',
  'ABC-12345',
  'abc-12',
  'x"y',
  'x\\y',
  'a\nb',
  'ümlaut',
  'c"d\\',
  'ab"',
  '12:30',
];

describe('patterns', () => {
  test.each([
    ['^[A-Z]{3}-\\d{2,4}$', ['ABC-12', 'ABC-1234']],
    ['ab', ['ab', 'abc']],
    ['^(ab|c"d\\\\)$', ['ab', 'c"d\\']],
    ['^[^a-z]*$', ['', 'ABC-12']],
    ['^.+$', ['a', 'ümlaut', 'x"y'.replace('"', '')]],
    ['^\\w+(?:-\\d+)?$', ['abc', 'ABC-12']],
    ['^(?<h>[0-1]\\d|2[0-3]):[0-5]\\d$', ['12:30']],
  ])('%s: every string written matches, and these are among them: %j', (pattern, expected) => {
    const { expr, rules } = patternGrammar(pattern, 'p');
    const re = gbnfToRegex(expr, rules);
    const js = new RegExp(pattern, 'u');
    for (const s of [...samples, ...expected]) {
      const written = JSON.stringify(s).slice(1, -1);
      if (re.test(written)) expect([s, js.test(s)]).toEqual([s, true]);
    }
    for (const s of expected) expect([s, re.test(JSON.stringify(s).slice(1, -1))]).toEqual([s, true]);
  });

  test.each([
    ['^(?=a)b$', /lookahead/],
    ['^a\\bb$', /word boundaries/],
    ['^(a)\\1$', /back references/],
    ['^a{2000}$', /at most 1000/],
    ['^(a', /not closed/],
    ['^a)$', /unbalanced|unexpected/],
    ['^a$b$', /anchor/],
    [`^${'('.repeat(20)}a${')'.repeat(20)}$`, /nested more than 16/],
    ['x'.repeat(1001), /longer than 1000/],
  ])('%s is refused: %s', (pattern, why) => {
    expect(() => patternGrammar(pattern, 'p')).toThrow(PatternError);
    expect(() => patternGrammar(pattern, 'p')).toThrow(why);
  });

  test('formats: what the grammar writes is valid for the format', () => {
    const valid: Record<keyof typeof FORMAT_PATTERNS, [string[], z.ZodType]> = {
      email: [['a.b+c@example.com', 'x@y.io'], z.email()],
      uuid: [['123e4567-e89b-42d3-a456-426614174000'], z.uuid()],
      hostname: [['example.com', 'a-b.c'], z.hostname()],
      ipv4: [['0.0.0.0', '192.168.1.255'], z.ipv4()],
      ipv6: [['2001:db8:0:0:0:0:0:1'], z.ipv6()],
      duration: [['P3D', 'PT5M', 'P2W', 'P1DT2H'], z.iso.duration()],
    };
    const wrong = ['', 'a@', '@b.c', '256.1.1.1', '1.1.1', 'P', 'PT', '-a.com', 'g23e4567-e89b-42d3-a456-426614174000'];
    for (const [format, [examples, check]] of Object.entries(valid)) {
      const { expr, rules } = patternGrammar(FORMAT_PATTERNS[format as keyof typeof FORMAT_PATTERNS], 'p');
      const re = gbnfToRegex(expr, rules);
      for (const s of examples) {
        expect([format, s, re.test(s)]).toEqual([format, s, true]);
        expect([format, s, check.safeParse(s).success]).toEqual([format, s, true]);
      }
      for (const s of wrong) if (re.test(s)) expect([format, s, check.safeParse(s).success]).toEqual([format, s, true]);
    }
  });
});

describe("OpenAI's strict keywords in a schema", () => {
  test('are accepted: ranges, patterns, formats, lengths, item counts, refs, anyOf', () => {
    const schema = {
      type: 'object',
      properties: {
        city: { type: 'string', pattern: '^[A-Z][a-z]+$' },
        days: { type: 'integer', minimum: 1, maximum: 30 },
        price: { type: 'number', exclusiveMinimum: 0, multipleOf: 0.01 },
        contact: { type: 'string', format: 'email' },
        id: { type: 'string', format: 'uuid' },
        tags: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 20 }, minItems: 1, maxItems: 5 },
        stop: { anyOf: [{ $ref: '#/$defs/place' }, { type: 'null' }] },
      },
      required: ['city', 'days', 'price', 'contact', 'id', 'tags', 'stop'],
      additionalProperties: false,
      $defs: { place: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'], additionalProperties: false } },
    };
    expect(jsonSchemaDocument.safeParse(schema).error?.issues).toBeUndefined();
  });

  test('what zod writes is accepted: .int().min(1), .email(), .uuid(), .ipv4(), .iso.date(), .regex()', () => {
    const schema = z.toJSONSchema(
      z.strictObject({
        days: z.number().int().min(1),
        email: z.email(),
        id: z.uuid(),
        ip: z.ipv4(),
        on: z.iso.date(),
        code: z.string().regex(/^[A-Z]{3}-\d{2,4}$/),
      }),
    );
    expect(jsonSchemaDocument.safeParse(schema).error?.issues).toBeUndefined();
    // Its own pattern, not Kiln's, is what the grammar writes for a format that has one.
    const leaves: GrammarLeaf[] = [];
    toGrammarSchema(jsonSchemaDocument.parse(schema), leaves);
    const email = leaves.find((l) => l.grammar.expr.includes('\\x40'))!;
    const re = gbnfToRegex(email.grammar.expr.slice(5, -5), email.grammar.rules);
    expect(['a.b@example.com', 'x%y@example.com', '.a@example.com'].map((s) => re.test(s))).toEqual([true, false, false]);
  });

  test.each([
    [{ type: 'number', minimum: 0.2, maximum: 0.8 }, 'json_schema.minimum'],
    [{ type: 'integer', multipleOf: 7 }, 'json_schema.multipleOf'],
    [{ type: 'string', pattern: '^(?!x).*$' }, 'json_schema.pattern'],
    [{ type: 'string', format: 'color' }, 'json_schema.format'],
    [{ type: 'string', pattern: '^a+$', maxLength: 3 }, 'json_schema.maxLength'],
    [{ type: 'string', format: 'hostname', pattern: '^(?=.{1,253}$)[a-z]+$' }, 'json_schema.pattern'],
  ])('what the grammar cannot enforce is refused by the keyword: %j at %s', (schema, field) => {
    const r = z.object({ json_schema: jsonSchemaDocument }).safeParse({ json_schema: schema });
    expect(r.error?.issues[0].path.join('.')).toBe(field);
  });

  test('values become placeholders in the generator schema and their own GBNF in the grammar', () => {
    const leaves: GrammarLeaf[] = [];
    const grammarSchema = toGrammarSchema(
      { type: 'object', properties: { n: { type: 'integer', minimum: 1, maximum: 9 }, e: { type: 'string', format: 'email' } } },
      leaves,
    );
    expect(grammarSchema).toEqual({ type: 'object', properties: { n: { const: 'kiln-value-0' }, e: { const: 'kiln-value-1' } } });
    const gbnf = withLeaves('root ::= "{" "\\"kiln-value-0\\"" "," "\\"kiln-value-1\\"" "}"', leaves);
    expect(gbnf.split('\n')[0]).toBe(`root ::= "{" (${leaves[0].grammar.expr}) "," (${leaves[1].grammar.expr}) "}"`);
    expect(gbnf).toContain('kiln-value-1-0 ::= ');
    // A schema whose own const looks like a placeholder gets another one.
    const mine: GrammarLeaf[] = [];
    const own = toGrammarSchema({ anyOf: [{ const: 'kiln-value-0' }, { type: 'integer', minimum: 0 }] }, mine);
    expect(own).toEqual({ oneOf: [{ const: 'kiln-value-0' }, { const: 'kiln-value-x-0' }] });
  });
});
