/**
 * The JSON Schema that structured output and tool parameters accept: the part of JSON Schema a
 * grammar can enforce token by token, so that whatever the model's weights, the output validates
 * against the schema. That is every keyword of OpenAI's strict structured outputs: node-llama-cpp's
 * GBNF generator writes the structure, and Kiln's own GBNF the values it leaves out (number
 * ranges, multipleOf, patterns, formats: domain/grammar/). A keyword the grammar cannot enforce
 * (allOf, not, a lookahead in a pattern) is refused by name rather than silently ignored.
 */
import { z } from 'zod';
import { STRING_FORMATS, type StringFormat } from '../grammar/formats';
import { type LeafGrammar, leafGrammar } from '../grammar/leaf';
import { GRAMMAR_REPETITION_LIMIT } from '../grammar/limits';
import { schemaBoundsIssue } from './schema-bounds';

const BASIC_TYPES = ['string', 'number', 'integer', 'boolean', 'null'] as const;
const TYPES = [...BASIC_TYPES, 'object', 'array'] as const;
type TypeName = (typeof TYPES)[number];
type Literal = string | number | boolean | null;

export interface JsonSchema {
  type?: TypeName | TypeName[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  minProperties?: number;
  maxProperties?: number;
  items?: JsonSchema;
  prefixItems?: JsonSchema[];
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  format?: StringFormat;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  multipleOf?: number;
  enum?: Literal[];
  const?: Literal;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  $ref?: string;
  $defs?: Record<string, JsonSchema>;
  definitions?: Record<string, JsonSchema>;
  [annotation: string]: unknown;
}

const count = z
  .number()
  .int()
  .min(0)
  .max(GRAMMAR_REPETITION_LIMIT, { message: `must be at most ${GRAMMAR_REPETITION_LIMIT}: the grammar cannot repeat a value more often` });
const literal = z.union([z.string(), z.number(), z.boolean(), z.null()]);

/** Words that describe a value and constrain nothing: accepted and left out of the grammar. */
const annotations = {
  $schema: z.string().optional(),
  $id: z.string().optional(),
  $comment: z.string().optional(),
  title: z.string().optional(),
  description: z.string().optional(),
  default: z.unknown().optional(),
  examples: z.unknown().optional(),
  deprecated: z.boolean().optional(),
  readOnly: z.boolean().optional(),
  writeOnly: z.boolean().optional(),
  // OpenAI's strict mode wants `required` and `additionalProperties: false`; some clients add this too.
  strict: z.boolean().optional(),
};

/** Keywords a grammar cannot enforce, each with the reason a 4xx gives. */
const UNENFORCEABLE: Record<string, string> = {
  patternProperties: 'regular expressions cannot be enforced by the grammar',
  allOf: 'allOf is not supported: merge the schemas into one',
  not: 'not is not supported',
  if: 'if/then/else is not supported',
  then: 'if/then/else is not supported',
  else: 'if/then/else is not supported',
  uniqueItems: 'uniqueItems cannot be enforced by the grammar',
  contains: 'contains is not supported',
  dependentRequired: 'dependentRequired is not supported',
  dependentSchemas: 'dependentSchemas is not supported',
  propertyNames: 'propertyNames is not supported',
  unevaluatedProperties: 'unevaluatedProperties is not supported',
};

const refPattern = /^#\/(\$defs|definitions)\/[^/]+$/;

const NUMBER_KEYWORDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'] as const;

/** The types a schema's value may have. */
function typesOf(s: JsonSchema): TypeName[] {
  return s.type === undefined ? inferTypes(s) : [s.type].flat();
}

/** Refuses, by the keyword at fault, what the value grammars (domain/grammar/leaf.ts) cannot enforce. */
function checkValueKeywords(s: JsonSchema, ctx: z.RefinementCtx): void {
  const numberKey = NUMBER_KEYWORDS.find((k) => s[k] !== undefined);
  const stringKey = s.pattern !== undefined ? 'pattern' : s.format !== undefined ? 'format' : undefined;
  if (stringKey && (s.minLength !== undefined || s.maxLength !== undefined))
    ctx.addIssue({
      code: 'custom',
      path: [s.minLength !== undefined ? 'minLength' : 'maxLength'],
      message: `cannot be enforced together with ${stringKey}: write the length into the pattern ({m,n})`,
    });
  for (const type of typesOf(s)) {
    const leaf = leafGrammar({ ...s, type }, 'check');
    if (typeof leaf !== 'string') continue;
    const key = type === 'string' ? stringKey : s.multipleOf !== undefined && /multipleOf/.test(leaf) ? 'multipleOf' : numberKey;
    ctx.addIssue({ code: 'custom', path: [key ?? 'type'], message: leaf });
  }
}

export const jsonSchema: z.ZodType<JsonSchema> = z
  .lazy(
    () =>
      z
        .strictObject({
          ...annotations,
          type: z.union([z.enum(TYPES), z.array(z.enum(TYPES)).min(1)]).optional(),
          properties: z.record(z.string(), jsonSchema).optional(),
          required: z.array(z.string()).optional(),
          additionalProperties: z.union([z.boolean(), jsonSchema]).optional(),
          minProperties: count.optional(),
          maxProperties: count.optional(),
          items: jsonSchema.optional(),
          prefixItems: z.array(jsonSchema).optional(),
          minItems: count.optional(),
          maxItems: count.optional(),
          minLength: count.optional(),
          maxLength: count.optional(),
          format: z.enum(STRING_FORMATS, { message: `the formats the grammar enforces are ${STRING_FORMATS.join(', ')}` }).optional(),
          pattern: z.string().optional(),
          enum: z.array(literal).min(1).optional(),
          const: literal.optional(),
          anyOf: z.array(jsonSchema).min(1).optional(),
          oneOf: z.array(jsonSchema).min(1).optional(),
          $ref: z.string().regex(refPattern, 'only references to #/$defs/<name> or #/definitions/<name> are supported').optional(),
          $defs: z.record(z.string(), jsonSchema).optional(),
          definitions: z.record(z.string(), jsonSchema).optional(),
          minimum: z.number().optional(),
          maximum: z.number().optional(),
          exclusiveMinimum: z.number().optional(),
          exclusiveMaximum: z.number().optional(),
          multipleOf: z.number().positive().optional(),
          ...Object.fromEntries(
            Object.entries(UNENFORCEABLE).map(([key, why]) => [
              key,
              z
                .unknown()
                .refine((v) => v === undefined, { message: why })
                .optional(),
            ]),
          ),
        })
        .superRefine(checkValueKeywords)
        .refine((s) => s.minLength === undefined || s.maxLength === undefined || s.minLength <= s.maxLength, {
          message: 'minLength must not exceed maxLength',
          path: ['minLength'],
        })
        .refine((s) => s.minItems === undefined || s.maxItems === undefined || s.minItems <= s.maxItems, {
          message: 'minItems must not exceed maxItems',
          path: ['minItems'],
        }),
    // An id makes the OpenAPI generator refer to the schema instead of unfolding its recursion for ever.
  )
  .meta({ id: 'JsonSchema', description: 'A JSON Schema, in the part of it that a grammar can enforce' }) as z.ZodType<JsonSchema>;

/**
 * A schema as the top of a structured output or a tool's parameters: its depth, keys, size and
 * property names checked without recursion (domain/tasks/schema-bounds.ts) before the recursive
 * parse runs at all.
 */
export const jsonSchemaDocument: z.ZodType<JsonSchema> = z.preprocess((value, ctx) => {
  const issue = schemaBoundsIssue(value);
  if (issue) ctx.addIssue({ code: 'custom', path: issue.path, message: issue.message, input: value });
  return value;
}, jsonSchema);

/** node-llama-cpp's GBNF JSON schema subset (GbnfJsonSchema), as plain JSON. */
export type GrammarSchema = Record<string, unknown>;

/** A value Kiln writes the grammar of itself: a placeholder const in the generator's schema, replaced in its GBNF. */
export interface GrammarLeaf {
  /** The const string the generator writes where the value goes. */
  placeholder: string;
  grammar: LeafGrammar;
}

/**
 * The grammar's form of a valid schema. The generator differs from JSON Schema in places, so
 * this says what JSON Schema means: anyOf is its oneOf (either matches), a type list is a choice,
 * an object with no properties takes any keys, `#/definitions/` refs become `#/$defs/`, and
 * annotations go. (The grammar writes every listed property, which a schema always accepts.)
 * Values the generator cannot constrain go into `leaves`, each with the placeholder that stands
 * for it.
 */
export function toGrammarSchema(schema: JsonSchema, leaves: GrammarLeaf[] = []): GrammarSchema {
  const text = JSON.stringify(schema);
  let tag = 'kiln-value';
  // A placeholder must not be a const of the schema's own.
  while (text.includes(tag)) tag += '-x';
  const convert = (s: JsonSchema) =>
    convertSchema(
      s,
      (grammar) => {
        const placeholder = `${tag}-${leaves.length}`;
        leaves.push({ placeholder, grammar });
        return { const: placeholder };
      },
      () => `${tag}-${leaves.length}`,
    );
  const defs = { ...schema.definitions, ...schema.$defs };
  const root = convert(schema);
  if (Object.keys(defs).length > 0 && !('$ref' in root)) {
    root.$defs = Object.fromEntries(Object.entries(defs).map(([k, v]) => [k, convert(v)]));
  }
  if ('$ref' in root && Object.keys(defs).length > 0) {
    // A root that is only a reference: the generator resolves $defs where the ref sits.
    return { oneOf: [root], $defs: Object.fromEntries(Object.entries(defs).map(([k, v]) => [k, convert(v)])) };
  }
  return root;
}

function convertSchema(s: JsonSchema, leaf: (grammar: LeafGrammar) => GrammarSchema, nextLeafName: () => string): GrammarSchema {
  const convert = (inner: JsonSchema) => convertSchema(inner, leaf, nextLeafName);
  if (s.$ref !== undefined) return { $ref: s.$ref.replace('#/definitions/', '#/$defs/') };
  if (s.const !== undefined) return { const: s.const };
  if (s.enum !== undefined) return { enum: s.enum };
  const choices = s.anyOf ?? s.oneOf;
  if (choices) return { oneOf: choices.map(convert) };
  const types = typesOf(s);
  if (types.length !== 1) return { oneOf: types.map((type) => convert({ ...s, type })) };
  const type = types[0];
  switch (type) {
    case 'object': {
      const properties = Object.fromEntries(Object.entries(s.properties ?? {}).map(([k, v]) => [k, convert(v)]));
      const open = s.additionalProperties ?? Object.keys(properties).length === 0;
      return {
        type,
        properties,
        ...(open === false ? {} : { additionalProperties: open === true ? true : convert(open) }),
        ...pick(s, ['minProperties', 'maxProperties']),
      };
    }
    case 'array':
      return {
        type,
        ...(s.items ? { items: convert(s.items) } : {}),
        ...(s.prefixItems ? { prefixItems: s.prefixItems.map(convert) } : {}),
        ...pick(s, ['minItems', 'maxItems']),
      };
    case 'string':
    case 'integer':
    case 'number': {
      const own = leafGrammar({ ...s, type }, nextLeafName());
      if (own !== undefined && typeof own !== 'string') return leaf(own);
      if (type !== 'string') return { type };
      return s.format ? { type, format: s.format } : { type, ...pick(s, ['minLength', 'maxLength']) };
    }
    default:
      return { type };
  }
}

/** A schema with no type and no choice: what its keywords imply, or any JSON value. */
function inferTypes(s: JsonSchema): TypeName[] {
  if (s.properties || s.additionalProperties !== undefined) return ['object'];
  if (s.items || s.prefixItems) return ['array'];
  if (s.minLength !== undefined || s.maxLength !== undefined || s.format || s.pattern !== undefined) return ['string'];
  if (NUMBER_KEYWORDS.some((k) => s[k] !== undefined)) return ['number'];
  return [...TYPES];
}

function pick(s: JsonSchema, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter((k) => s[k] !== undefined).map((k) => [k, s[k]]));
}
