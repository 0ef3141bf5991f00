/**
 * The API reference lists every route the app serves, and nothing it does not: a route added
 * without a contract (api/route-contract.ts) fails here, naming it.
 */
import type { Client } from '@temporalio/client';
import { type AppDeps, createApp } from '../../api/app';
import { openApiDocument } from '../../api/openapi';
import type { Db } from '../../db/client';
import { createLogger } from '../../lib/logger';
import { servedRoutes } from '../express-routes';

/** Building the app wires routes only: no dependency is called until a request comes. */
function appWithoutServices() {
  const unused = new Proxy({}, { get: () => () => undefined });
  return createApp({
    db: unused as Db,
    temporal: unused as Client,
    logger: createLogger('route-coverage', 'silent'),
    hub: unused as AppDeps['hub'],
    signer: unused as AppDeps['signer'],
    secrets: unused as AppDeps['secrets'],
    storage: unused as AppDeps['storage'],
    controlQueue: 'control',
    allowPrivateWebhooks: false,
    publicUrl: 'http://127.0.0.1:8080',
  });
}

const key = (method: string, path: string) => `${method.toUpperCase()} ${path}`;

test('every route the app serves is in /openapi.json, and every operation there is served', () => {
  const served = servedRoutes(appWithoutServices()).map((r) => key(r.method, r.path));
  const doc = openApiDocument('http://127.0.0.1:8080');
  const documented = Object.entries(doc.paths ?? {}).flatMap(([path, item]) =>
    Object.keys(item)
      .filter((m) => ['get', 'post', 'put', 'patch', 'delete', 'head'].includes(m))
      .map((m) => key(m, path)),
  );
  // Sanity: the walk finds the routers mounted under /v1 and /openai/v1.
  expect(served).toEqual(expect.arrayContaining(['GET /v1/predictions/{id}', 'POST /openai/v1/chat/completions', 'GET /healthz']));
  expect({ missingFromSpec: served.filter((r) => !documented.includes(r)).sort() }).toEqual({ missingFromSpec: [] });
  expect({ notServed: documented.filter((r) => !served.includes(r)).sort() }).toEqual({ notServed: [] });
});

test('each operation answers its success and errors with a schema', () => {
  const doc = openApiDocument('http://127.0.0.1:8080');
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(item as Record<string, { responses?: Record<string, unknown> }>)) {
      expect([key(method, path), Object.keys(op.responses ?? {}).some((s) => s.startsWith('2'))]).toEqual([key(method, path), true]);
    }
  }
});
