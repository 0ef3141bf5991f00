/** Grammars for structured output on the llama.cpp engine, built from a version-independent JSON schema. */
import { createHash } from 'node:crypto';
import type { Llama, LlamaGrammar, LlamaModel, LlamaText, Token, TokenBias } from 'node-llama-cpp';
import type { StringFormat } from '../../domain/grammar/formats';
import { type GrammarLeaf, type JsonSchema, toGrammarSchema } from '../../domain/tasks/json-schema';
import { schemaBoundsIssue } from '../../domain/tasks/schema-bounds';
import { messageOf } from '../../lib/kiln-error';
import { EngineError } from '../engine-error';

/** Building a grammar parses it in llama.cpp: the same schema (a client's every call) reuses it. */
const MAX_GRAMMARS = 64;

export function grammarKey(schema: JsonSchema): string {
  return createHash('sha256').update(JSON.stringify(schema)).digest('hex');
}

/**
 * node-llama-cpp's GBNF for a number allows 16 integer digits and a 16-digit exponent: JSON that
 * parses to Infinity (9e999) or to an integer past 2^53, which clients then reject. Numbers here
 * stay within what a double holds: 15 digits, a two-digit exponent, and none for an integer.
 */
export function boundNumbers(gbnf: string): string {
  return gbnf
    .replace(/^integer-number-rule ::= .*$/m, 'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,14})')
    .replaceAll('[eE] [-+]? ("0" | [1-9] [0-9]{0,15})', '[eE] [-+]? ("0" | [1-9] [0-9]?)')
    .replaceAll('("0" | [1-9] [0-9]{0,15})', '("0" | [1-9] [0-9]{0,14})');
}

/**
 * The generator's GBNF with each placeholder const (a JSON string literal in it) replaced by the
 * grammar of the value it stands for, and that grammar's rules added.
 */
export function withLeaves(gbnf: string, leaves: GrammarLeaf[]): string {
  let out = gbnf;
  for (const { placeholder, grammar } of leaves) out = out.replaceAll(`"\\"${placeholder}\\""`, `(${grammar.expr})`);
  return [out, ...leaves.flatMap((l) => l.grammar.rules)].join('\n');
}

/**
 * The grammar of a valid JSON schema (domain/tasks/json-schema.ts), as node-llama-cpp builds it,
 * numbers bounded. The conversion and llama.cpp's parser both recurse, so the schema's bounds are
 * checked again here, whoever called; a schema either step refuses is the caller's input at fault
 * (InvalidInput, never retried), named as `input.json_schema`.
 */
export async function jsonSchemaGrammar(llama: Llama, schema: JsonSchema, Text: typeof LlamaText): Promise<LlamaGrammar> {
  const outOfBounds = schemaBoundsIssue(schema);
  if (outOfBounds) throw new EngineError('InvalidInput', `${['input.json_schema', ...outOfBounds.path].join('.')}: ${outOfBounds.message}`);
  try {
    const leaves: GrammarLeaf[] = [];
    const generated = await llama.createGrammarForJsonSchema(toGrammarSchema(schema, leaves) as never);
    return await llama.createGrammar({
      grammar: withLeaves(boundNumbers(generated.grammar), leaves),
      // What LlamaJsonSchemaGrammar sets: generation ends once the JSON is complete.
      stopGenerationTriggers: [Text(['\n'.repeat(4)])],
      trimWhitespaceSuffix: true,
    });
  } catch (err) {
    throw new EngineError('InvalidInput', `input.json_schema: llama.cpp cannot build a grammar from this schema (${messageOf(err)})`, {
      cause: err,
    });
  }
}

/** Least recently used grammars, per schema. */
export class GrammarCache {
  private entries = new Map<string, Promise<LlamaGrammar>>();

  get(key: string, build: () => Promise<LlamaGrammar>): Promise<LlamaGrammar> {
    let grammar = this.entries.get(key);
    if (grammar) {
      this.entries.delete(key);
    } else {
      grammar = build();
      // A schema the generator refuses is not kept.
      grammar.catch(() => this.entries.delete(key));
    }
    this.entries.set(key, grammar);
    while (this.entries.size > MAX_GRAMMARS) this.entries.delete(this.entries.keys().next().value as string);
    return grammar;
  }
}

/** Tokens that only close JSON: quotes, brackets, braces (not commas: they would open more items). */
const CLOSER = /^["}\]]+$/;
const closersOf = new WeakMap<LlamaModel, Token[]>();

/**
 * A bias toward the tokens that end JSON values. The grammar allows only what keeps the JSON
 * valid, so among those it makes strings close and structures end within a few tokens.
 */
export function wrapUpBias(model: LlamaModel, Bias: typeof TokenBias): TokenBias {
  let closers = closersOf.get(model);
  if (!closers) {
    closers = [];
    for (const token of model.iterateAllTokens()) {
      if (CLOSER.test(model.detokenize([token]))) closers.push(token);
    }
    closersOf.set(model, closers);
  }
  const bias = new Bias(model.tokenizer);
  for (const token of closers) bias.set(token, { logit: 10 });
  return bias;
}

/** What a JSON value may still need: text to count in the model's tokens, and forced value characters to count a token each. */
export interface Closing {
  text: string;
  valueChars: number;
}

/** Characters a string of each format may need once begun: the fixed layouts in full, 25 for the rest (as for a pattern). */
const FORMAT_CHARS: Partial<Record<StringFormat, number>> = {
  uuid: 36,
  ipv6: 39,
  'date-time': 29,
  duration: 22,
  time: 18,
  ipv4: 15,
  date: 10,
};
const OTHER_FORMAT_CHARS = 25;

/**
 * What a JSON value of this schema may still need to be written in full, from its first character:
 * `text`, its keys (every property, since one may already be open), punctuation, constants and
 * shortest strings, laid out one property a line as trained models write it, which the caller
 * counts in the model's tokens; and `valueChars`, the characters of the values the grammar forces
 * whatever the bias (a number's digits, a format's or a pattern's text), counted a token each,
 * since digits and hex are where vocabularies split text finest.
 */
export function closingOf(
  schema: JsonSchema,
  defs: Record<string, JsonSchema> = { ...schema.definitions, ...schema.$defs },
  depth = 0,
): Closing {
  const text = (t: string, valueChars = 0): Closing => ({ text: t, valueChars });
  if (depth > 8) return text('null');
  const of = (s: JsonSchema) => closingOf(s, defs, depth + 1);
  const longest = (all: Closing[]) => all.reduce((a, b) => (b.text.length + b.valueChars > a.text.length + a.valueChars ? b : a), text(''));
  /** Each part's text laid out by `layout`, between `open` and `close`; their forced characters summed. */
  const joined = (parts: Closing[], open: string, close: string, layout: (t: string) => string) =>
    text(
      `${open}${parts.map((p) => layout(p.text)).join('')}${close}`,
      parts.reduce((n, p) => n + p.valueChars, 0),
    );
  if (schema.$ref !== undefined) {
    const target = defs[schema.$ref.split('/').pop() ?? ''];
    return target ? of(target) : text('null');
  }
  if (schema.const !== undefined) return text(JSON.stringify(schema.const));
  if (schema.enum !== undefined) return longest(schema.enum.map((v) => text(JSON.stringify(v))));
  const choices = schema.anyOf ?? schema.oneOf;
  if (choices) return longest(choices.map(of));
  const types = schema.type === undefined ? ['object'] : [schema.type].flat();
  return longest(
    types.map((type) => {
      switch (type) {
        case 'object':
          return joined(
            Object.entries(schema.properties ?? {}).map(([key, value]) => {
              const v = of(value);
              return text(`${JSON.stringify(key)}: ${v.text}`, v.valueChars);
            }),
            '{',
            '\n}',
            (t) => `\n    ${t},`,
          );
        case 'array':
          return joined(
            [...(schema.prefixItems ?? []), ...Array.from({ length: schema.minItems ?? 0 }, () => schema.items ?? {})].map(of),
            '[',
            ']',
            (t) => `${t}, `,
          );
        case 'string':
          if (schema.format) return text('""', FORMAT_CHARS[schema.format] ?? OTHER_FORMAT_CHARS);
          return text('""', schema.pattern !== undefined ? OTHER_FORMAT_CHARS : (schema.minLength ?? 0));
        case 'integer':
        case 'number':
          // A range may need the digits of its bounds.
          return text(
            '',
            Math.max(4, ...[schema.minimum, schema.exclusiveMinimum].map((b) => (b === undefined ? 0 : String(Math.ceil(b)).length))),
          );
        case 'boolean':
          return text('false');
        default:
          return text('null');
      }
    }),
  );
}
