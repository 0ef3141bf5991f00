/**
 * The bad-input sweep (issue 15): every route and method that /openapi.json lists gets malformed
 * ids, bodies and headers, with and without a token, drawn by fast-check from a fixed seed. No
 * answer may be a 5xx; every error is JSON in the API's shape (OpenAI's under /openai/v1), and a
 * 400 or 422 names the field it is about. Nothing the sweep sends can start work that outlives
 * it: predictions and batches it happens to create are cancelled at the end. JSON schemas nested
 * past the bound, or with reserved property names, go to every route that takes one (issue 37).
 */
import fc from 'fast-check';
import type { Db } from '../../db/client';
import { closeDb } from '../../db/client';
import { API_URL, api, newAccount, TERMINAL, testDb } from '../helpers';

jest.setTimeout(300_000);

const SEED = 1515;
/** Draws per route and method, with a token and without. */
const RUNS_AUTHENTICATED = 20;
const RUNS_ANONYMOUS = 6;
/** Requests in flight at once. */
const CONCURRENCY = 4;

interface Operation {
  method: string;
  template: string;
  params: string[];
  /** Query parameters it documents. */
  query: string[];
  /** The JSON body's schema, where the operation takes one. */
  bodySchema?: { properties?: Record<string, unknown> };
  multipart: boolean;
  binary: boolean;
}

interface Case {
  op: Operation;
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** The names a 400 or 422 about this request may name. */
  fields: string[];
  what: string;
}

const HEADER_NAMES = ['Prefer', 'Cancel-After', 'Idempotency-Key', 'Kiln-Priority', 'Authorization', 'Content-Type'];

/** Whether a client could percent-encode it (a lone surrogate cannot be). */
function encodable(s: string): boolean {
  try {
    encodeURIComponent(s);
    return true;
  } catch {
    return false;
  }
}

// Malformed ids: NUL and control characters, broken percent-encoding, very long, non-ASCII,
// dot segments, SQL, and strings from the generator percent-encoded as a client would.
const badId = fc.oneof(
  fc.constantFrom(
    '%00',
    'abc%00def',
    '%01',
    '%0A',
    '%7F',
    '%E0%A4%A',
    '%C0%AF',
    '%ED%A0%80',
    '%FF',
    '%',
    'x'.repeat(4000),
    '%F0%9F%94%A5',
    'ünï🔥',
    '..',
    '%2e%2e',
    '%2F..%2Fetc%2Fpasswd',
    "'%20OR%201=1--",
    '%25',
    '-1',
    'null',
    'aaaaaaaaaaaaaaaaaaaaaaaaaa',
  ),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 60 }).filter(encodable).map(encodeURIComponent),
);

// Header values fetch can carry: Latin-1 without control characters.
const headerText = fc.string({
  unit: fc
    .integer({ min: 0x20, max: 0xff })
    .filter((c) => c !== 0x7f)
    .map((c) => String.fromCharCode(c)),
  maxLength: 80,
});
const badHeaders = fc.record(
  {
    Prefer: fc.oneof(
      fc.constantFrom('wait=999999999999999999999999', 'wait=-1', 'wait=abc', 'wait=', 'wait=1.5', 'respond-async, wait=0', 'wait=0x10'),
      headerText,
    ),
    'Cancel-After': fc.oneof(
      fc.constantFrom('0', '-5', '1e400', 'NaN', '5m5m5m5m5m5m5m5m5m5m', '99999999999999999999h', '1.5.5s', ''),
      headerText,
    ),
    'Idempotency-Key': fc.oneof(fc.constantFrom('', ' ', 'x'.repeat(5000)), headerText),
    'Kiln-Priority': fc.oneof(fc.constantFrom('', 'urgent', 'INTERACTIVE', 'batch,default'), headerText),
  },
  { requiredKeys: [] },
);
const badAuthorization = fc.oneof(
  fc.constantFrom(
    '',
    'Bearer',
    'Bearer ',
    'Bearer a b',
    'Basic dXNlcjpwYXNz',
    `Bearer ${'a'.repeat(8000)}`,
    'Token kiln_nope',
    'Bearer kiln_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz',
    'bearer\tx',
  ),
  headerText,
);

const anyJson = fc.jsonValue({ maxDepth: 3 });
const hugeString = 'x'.repeat(1_100_000);
const deep = (depth: number, open: string, close: string, inner = '1') => `${open.repeat(depth)}${inner}${close.repeat(depth)}`;
/** Over the 10 MB JSON limit. */
const OVERSIZED = `{"input":{"prompt":"${'y'.repeat(10.5 * 2 ** 20)}"}}`;

/** Bodies for an operation that takes JSON: wrong types, missing and unknown fields, invalid JSON, huge and deep values. */
function badJsonBody(op: Operation): fc.Arbitrary<string> {
  const names = Object.keys(op.bodySchema?.properties ?? {});
  const wrongTypes =
    names.length > 0
      ? fc
          .record(Object.fromEntries(names.map((n) => [n, fc.oneof(anyJson, fc.string({ unit: 'binary' }))])), { requiredKeys: [] })
          .map((o) => JSON.stringify(o))
      : anyJson.map((v) => JSON.stringify(v));
  const field = names[0] ?? 'value';
  return fc.oneof(
    wrongTypes,
    anyJson.map((v) => JSON.stringify(v)),
    fc.constantFrom(
      '{',
      '{"a":',
      'nul',
      '{"a":1,}',
      "{'a':1}",
      '[1,2',
      '"just a string"',
      '{"version":"x","input":{}}}',
      '\u0000',
      `{"${field}":"a\\u0000b"}`,
      `{"${field}":"\\ud800"}`,
      '{"input":{"prompt":"\\u0000","text":"\\u0000"}}',
      `{"${field}":${deep(5000, '[', ']')}}`,
      `{"${field}":${deep(5000, '{"a":', '}')}}`,
      deep(20000, '[', ']'),
      `{"${field}":"${hugeString}"}`,
      `{"${field}":1e999,"input":{"max_tokens":1e999}}`,
      `{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}`,
    ),
    fc.string({ maxLength: 40 }),
  );
}

/** One level of a schema around an inner one: the keywords that nest schemas. */
const wrappers: Array<(inner: string) => string> = [
  (inner) => `{"items":${inner}}`,
  (inner) => `{"type":"object","properties":{"a":${inner}},"required":["a"]}`,
  (inner) => `{"anyOf":[${inner},{"type":"null"}]}`,
  (inner) => `{"additionalProperties":${inner}}`,
  (inner) => `{"$defs":{"d":${inner}},"$ref":"#/$defs/d"}`,
  (inner) => `{"prefixItems":[${inner}]}`,
];
const wrapped = (kinds: number[], inner: string) => kinds.reduceRight((s, k) => wrappers[k](s), inner);
const reservedName = fc.constantFrom('__proto__', 'constructor', 'prototype');
/** Reserved names as a property, a required name or a definition, which JSON.parse keeps as own keys. */
const reservedPlacements: Array<(name: string) => string> = [
  (name) => `{"type":"object","properties":{"${name}":{"type":"boolean"}},"required":["${name}"]}`,
  (name) => `{"type":"object","properties":{"a":{"type":"string"}},"required":["a","${name}"]}`,
  (name) => `{"$defs":{"${name}":{"type":"string"}},"$ref":"#/$defs/${name}"}`,
];
/** A schema as JSON text (built as text: JSON.stringify itself overflows past ~4000 levels), and what is wrong with it. */
const badSchema: fc.Arbitrary<[string, string]> = fc.oneof(
  fc
    .tuple(fc.array(fc.nat(wrappers.length - 1), { minLength: 64, maxLength: 6000 }))
    .map(([kinds]): [string, string] => [wrapped(kinds, '{"type":"string"}'), `${kinds.length} levels deep`]),
  fc
    .tuple(fc.array(fc.nat(wrappers.length - 1), { maxLength: 5 }), reservedName, fc.nat(reservedPlacements.length - 1))
    .map(([kinds, name, at]): [string, string] => [
      wrapped(kinds, reservedPlacements[at](name)),
      `with ${name} as a name, ${kinds.length} levels in`,
    ]),
);
/** Each route that takes a JSON schema, with a body carrying `schema` where that route reads it. */
function schemaRoutes(schema: string): Array<[string, string]> {
  const input = `{"prompt":"x","max_tokens":4,"json_schema":${schema}}`;
  const chat = '"model":"kiln/tiny-llama","messages":[{"role":"user","content":"x"}],"max_tokens":4';
  return [
    ['/v1/models/kiln/tiny-llama/predictions', `{"input":${input}}`],
    ['/v1/predictions', `{"version":"kiln/tiny-llama","input":${input}}`],
    ['/v1/batches', `{"version":"kiln/tiny-llama","inputs":[${input}]}`],
    ['/openai/v1/chat/completions', `{${chat},"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":${schema}}}}`],
    ['/openai/v1/chat/completions', `{${chat},"tools":[{"type":"function","function":{"name":"f","parameters":${schema}}}]}`],
  ];
}

const contentTypes = fc.constantFrom(
  'application/json',
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=latin1',
  'application/json; charset=utf-16',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data',
  'multipart/form-data; boundary=zzz',
  'application/octet-stream',
);

function operations(doc: { paths: Record<string, Record<string, any>> }): Operation[] {
  const ops: Operation[] = [];
  for (const [template, methods] of Object.entries(doc.paths)) {
    for (const [method, spec] of Object.entries(methods)) {
      const content = spec.requestBody?.content ?? {};
      ops.push({
        method: method.toUpperCase(),
        template,
        params: [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]),
        query: ((spec.parameters ?? []) as Array<{ name: string; in: string }>).filter((p) => p.in === 'query').map((p) => p.name),
        bodySchema: content['application/json']?.schema,
        multipart: 'multipart/form-data' in content,
        binary: 'application/octet-stream' in content,
      });
    }
  }
  return ops;
}

function caseFor(op: Operation, token: string | undefined): fc.Arbitrary<Case> {
  const takesBody = !['GET', 'HEAD', 'DELETE'].includes(op.method);
  const ids = fc.tuple(...op.params.map(() => badId));
  const body = takesBody
    ? op.bodySchema
      ? badJsonBody(op)
      : fc.oneof(
          fc.string({ maxLength: 200 }),
          anyJson.map((v) => JSON.stringify(v)),
        )
    : fc.constant(undefined);
  const query = fc.tuple(...op.query.map(() => fc.option(badId, { nil: undefined })));
  return fc
    .record({ ids, query, headers: badHeaders, body, contentType: contentTypes, authorization: badAuthorization })
    .map(({ ids, query, headers, body, contentType, authorization }) => {
      let path = op.template;
      op.params.forEach((p, i) => (path = path.replace(`{${p}}`, ids[i])));
      const search = op.query.flatMap((name, i) => (query[i] === undefined ? [] : [`${name}=${query[i]}`])).join('&');
      if (search) path += `?${search}`;
      const all: Record<string, string> = { ...headers, authorization: token ? `Bearer ${token}` : authorization };
      if (body !== undefined) all['content-type'] = contentType;
      const keys = [...Object.keys(op.bodySchema?.properties ?? {}), ...topLevelKeys(body)];
      return {
        op,
        path,
        headers: all,
        body,
        fields: ['path', 'body', 'content', ...op.query, ...op.params, ...keys, ...HEADER_NAMES],
        what: `${op.method} ${path.slice(0, 120)} ${body === undefined ? '' : `(${all['content-type']}) ${body.slice(0, 100)}`} headers ${JSON.stringify(headers).slice(0, 200)}`,
      };
    });
}

/** The keys of a body that parses as a JSON object: a 422 may name any of them. */
function topLevelKeys(body: string | undefined): string[] {
  try {
    const value = JSON.parse(body ?? '');
    return value && typeof value === 'object' && !Array.isArray(value) ? Object.keys(value) : [];
  } catch {
    return [];
  }
}

/** Why this answer breaks the rules, or undefined if it keeps them. */
function problem(c: Case, status: number, text: string): string | undefined {
  if (status >= 500) return `${status}: ${text.slice(0, 300)}`;
  if (c.op.method === 'HEAD' || status < 400) return undefined;
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    return `${status} is not JSON: ${text.slice(0, 200)}`;
  }
  let detail: unknown;
  if (c.op.template.startsWith('/openai/')) {
    detail = body?.error?.message;
    if (typeof detail !== 'string' || typeof body.error.type !== 'string') return `${status} is not an OpenAI error: ${text.slice(0, 200)}`;
  } else {
    detail = body?.detail;
    if (typeof detail !== 'string' || body.status !== status) return `${status} is not {detail, status}: ${text.slice(0, 200)}`;
  }
  if (status === 400 || status === 422) {
    const lower = (detail as string).toLowerCase();
    if (!c.fields.some((f) => lower.includes(f.toLowerCase()))) return `${status} names no field: ${detail}`;
    for (const f of body.invalid_fields ?? [])
      if (!(detail as string).includes(f.field)) return `${status} invalid_fields ${f.field} is not in the detail`;
  }
  return undefined;
}

async function send(c: Case): Promise<{ status: number; text: string }> {
  const res = await fetch(`${API_URL}${c.path}`, {
    method: c.op.method,
    headers: c.headers,
    body: c.body,
    redirect: 'manual',
    signal: AbortSignal.timeout(60_000),
  });
  return { status: res.status, text: await res.text() };
}

/** Runs the cases a few at a time; returns what broke the rules. */
async function sweep(cases: Case[]): Promise<string[]> {
  const found: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < cases.length) {
      const c = cases[next++];
      try {
        const { status, text } = await send(c);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        const why = problem(c, status, text);
        if (why) found.push(`${c.what}\n    → ${why}`);
      } catch (err) {
        found.push(`${c.what}\n    → no answer: ${(err as Error).message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return found;
}

let db: Db;
let token: string;
let sent = 0;
const statuses = new Map<number, number>();

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'sweep')).token;
});

afterAll(async () => {
  // Whatever a lucky draw created is cancelled, so no work outlives the sweep.
  for (const kind of ['predictions', 'batches']) {
    const list = await api(`/v1/${kind}`, { token });
    for (const item of list.body.results ?? []) {
      if (!TERMINAL.includes(item.status)) await api(`/v1/${kind}/${item.id}/cancel`, { token, method: 'POST' });
    }
  }
  await closeDb(db);
  const counts = [...statuses].sort(([a], [b]) => a - b).map(([status, n]) => `${status}×${n}`);
  console.log(`bad-input sweep: ${sent} requests (${counts.join(', ')})`);
});

test('every route of /openapi.json answers malformed ids, bodies and headers with a 4xx naming the field', async () => {
  const doc = await api('/openapi.json');
  const ops = operations(doc.body);
  expect(ops.length).toBeGreaterThan(30);
  const cases: Case[] = [];
  ops.forEach((op, i) => {
    cases.push(...fc.sample(caseFor(op, token), { seed: SEED + i, numRuns: RUNS_AUTHENTICATED }));
    cases.push(...fc.sample(caseFor(op, undefined), { seed: SEED + 1000 + i, numRuns: RUNS_ANONYMOUS }));
    // Over the body limit, with a token (parsed, refused) and without (never parsed); and NUL,
    // which Postgres text cannot hold, in each field in turn.
    if (op.bodySchema) {
      for (const name of Object.keys(op.bodySchema.properties ?? {})) {
        const path = op.template.replace(/\{\w+\}/g, 'x');
        const body = JSON.stringify({ [name]: 'a\u0000b' });
        cases.push({
          op,
          path,
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body,
          fields: Object.keys(op.bodySchema.properties ?? {}),
          what: `${op.method} ${path} ${body}`,
        });
      }
      for (const auth of [token, undefined]) {
        cases.push({
          op,
          path: op.template.replace(/\{\w+\}/g, 'x'),
          headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
          body: OVERSIZED,
          fields: ['body'],
          what: `${op.method} ${op.template} with a body over 10 MB${auth ? '' : ', no token'}`,
        });
      }
    }
  });
  // A real model's routes, with inputs that cannot be valid (an unknown key) so nothing runs.
  const real: Operation = {
    method: 'POST',
    template: '/v1/models/kiln/echo-fixture/predictions',
    params: [],
    query: [],
    multipart: false,
    binary: false,
  };
  const realInput = fc
    .dictionary(fc.string({ maxLength: 10 }), anyJson, { maxKeys: 4 })
    .map((input) => JSON.stringify({ input: { ...input, __sweep: true } }));
  for (const body of fc.sample(realInput, { seed: SEED, numRuns: 20 })) {
    cases.push({
      op: real,
      path: real.template,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body,
      fields: ['input'],
      what: `POST ${real.template} ${body.slice(0, 100)}`,
    });
  }
  // JSON schemas nested past the bound or with reserved property names, where each route takes one.
  for (const [schema, where] of fc.sample(badSchema, { seed: SEED, numRuns: 24 })) {
    for (const [template, body] of schemaRoutes(schema)) {
      cases.push({
        op: { ...real, template },
        path: template,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body,
        fields: ['input', 'inputs', 'response_format', 'tools'],
        what: `POST ${template} with a schema ${where}`,
      });
    }
  }
  for (const path of [
    '/v1/models/kiln/echo-fixture',
    '/v1/models/kiln/echo-fixture/versions',
    '/v1/models/kiln/echo-fixture/versions/%00',
  ]) {
    cases.push({
      op: { ...real, method: 'GET', template: path },
      path,
      headers: { authorization: `Bearer ${token}` },
      fields: ['path', 'id'],
      what: `GET ${path}`,
    });
  }
  sent = cases.length;
  const found = await sweep(cases);
  expect(found).toEqual([]);
});
