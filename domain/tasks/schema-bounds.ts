/**
 * The bounds a JSON schema must keep before anything walks it recursively (zod's parse, the
 * grammar conversion, llama.cpp's grammar parser): nesting depth, keys, size, and property names
 * a JavaScript object cannot hold as its own. Checked with an explicit stack, so a schema nested
 * ten thousand levels deep costs a loop, not the call stack.
 */

/** Containers (objects and arrays) nested inside one another, counting the schema itself. */
export const MAX_SCHEMA_DEPTH = 64;
/** Object keys in the whole schema. */
export const MAX_SCHEMA_KEYS = 5000;
/** The schema as JSON. */
export const MAX_SCHEMA_BYTES = 64 * 1024;

/**
 * Names an object assignment turns into its prototype or that collide with it: zod's record parse
 * and the grammar generators build plain objects, where `__proto__` vanishes (a required property
 * the output then lacks).
 */
export const RESERVED_PROPERTY_NAMES: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** Keywords whose value is a map from names to schemas, and the keyword whose value lists names. */
const NAME_MAPS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas']);
const SCHEMA_KEYWORDS = new Set([
  'items',
  'additionalProperties',
  'not',
  'if',
  'then',
  'else',
  'contains',
  'propertyNames',
  'unevaluatedProperties',
  'additionalItems',
]);
const SCHEMA_LISTS = new Set(['anyOf', 'oneOf', 'allOf', 'prefixItems']);

/** What a value is inside a schema: a schema, a map of names to schemas, a list of schemas, the `required` list, or plain data. */
type Role = 'schema' | 'names' | 'schemas' | 'required' | 'data';

export interface SchemaBoundsIssue {
  /** Where, below the schema itself. */
  path: Array<string | number>;
  message: string;
}

interface Frame {
  value: unknown;
  path: Array<string | number>;
  depth: number;
  role: Role;
}

function childRole(parent: Role, key: string | number): Role {
  if (parent === 'names') return 'schema';
  if (parent === 'schemas') return 'schema';
  if (parent !== 'schema') return 'data';
  if (typeof key === 'number') return 'data';
  if (NAME_MAPS.has(key)) return 'names';
  if (SCHEMA_LISTS.has(key)) return 'schemas';
  if (key === 'required') return 'required';
  return SCHEMA_KEYWORDS.has(key) ? 'schema' : 'data';
}

/** The first bound `schema` breaks, or undefined when it keeps them all. */
export function schemaBoundsIssue(schema: unknown): SchemaBoundsIssue | undefined {
  const stack: Frame[] = [{ value: schema, path: [], depth: 1, role: 'schema' }];
  let keys = 0;
  let bytes = 0;
  while (stack.length > 0) {
    const { value, path, depth, role } = stack.pop()!;
    if (value === null || typeof value !== 'object') {
      bytes += typeof value === 'string' ? JSON.stringify(value).length : String(value).length;
      if (role === 'required' && typeof value === 'string' && RESERVED_PROPERTY_NAMES.has(value)) return reserved(path, value);
    } else {
      // Named at the top: the path of a schema too deep is itself too long to read.
      if (depth > MAX_SCHEMA_DEPTH) return { path: [], message: `is nested deeper than ${MAX_SCHEMA_DEPTH} levels` };
      // Brackets, and a comma or colon per entry, as JSON writes them.
      bytes += 2;
      if (Array.isArray(value)) {
        value.forEach((item, i) =>
          stack.push({ value: item, path: [...path, i], depth: depth + 1, role: role === 'required' ? 'required' : childRole(role, i) }),
        );
        bytes += value.length;
      } else {
        for (const key of Object.keys(value)) {
          if (role === 'names' && RESERVED_PROPERTY_NAMES.has(key)) return reserved(path, key);
          keys++;
          bytes += JSON.stringify(key).length + 2;
          stack.push({
            value: (value as Record<string, unknown>)[key],
            path: [...path, key],
            depth: depth + 1,
            role: childRole(role, key),
          });
        }
        if (keys > MAX_SCHEMA_KEYS) return { path: [], message: `has more than ${MAX_SCHEMA_KEYS} keys` };
      }
    }
    if (bytes > MAX_SCHEMA_BYTES) return { path: [], message: `is larger than ${MAX_SCHEMA_BYTES / 1024} KiB` };
  }
  return undefined;
}

function reserved(path: Array<string | number>, name: string): SchemaBoundsIssue {
  return {
    path,
    message: `the property name ${JSON.stringify(name)} is reserved (${[...RESERVED_PROPERTY_NAMES].join(', ')} cannot be used)`,
  };
}
