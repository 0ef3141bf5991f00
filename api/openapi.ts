/**
 * `/openapi.json`, generated from the contracts each route module declares beside its handlers
 * (api/routes/*.ts, api/openai/contracts.ts: request and response zod schemas, the same ones the
 * handlers parse with), plus each task type's input and output schemas.
 * test/unit/route-coverage.test.ts fails on an Express route without a contract, so the
 * reference cannot leave one out.
 */
import { OpenAPIRegistry, OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { taskNames, taskType } from '../domain/tasks';
import { openaiContracts } from './openai/contracts';
import { errorBody } from './response-schemas';
import { jsonResponse, type RouteContract } from './route-contract';
import { accountContracts } from './routes/account';
import { batchContracts } from './routes/batches';
import { deploymentContracts } from './routes/deployments';
import { fileContracts } from './routes/files';
import { modelContracts } from './routes/models';
import { predictionContracts } from './routes/predictions';
import { streamContracts } from './routes/streams';
import { webhookContracts } from './routes/webhooks';

const open = [{}];
const html = (description: string) => ({ description, content: { 'text/html': { schema: z.string() } } });

/** The routes api/app.ts declares itself: health, metrics, this document and the pages. */
const serviceContracts: RouteContract[] = [
  {
    method: 'get',
    path: '/healthz',
    summary: 'Up, and the database answers',
    security: open,
    responses: { '200': jsonResponse('Healthy', z.object({ status: z.literal('ok') })) },
  },
  {
    method: 'get',
    path: '/metrics',
    summary: "Prometheus metrics, for the operator's scraper (KILN_METRICS_TOKEN as bearer token; not served without it)",
    responses: {
      '200': { description: 'Prometheus text format', content: { 'text/plain': { schema: z.string() } } },
      '401': jsonResponse('Not the metrics token', errorBody),
    },
  },
  {
    method: 'get',
    path: '/openapi.json',
    summary: 'This document',
    security: open,
    responses: { '200': jsonResponse('OpenAPI 3.1', z.record(z.string(), z.unknown())) },
  },
  {
    method: 'get',
    path: '/docs',
    summary: 'The API reference, rendered from /openapi.json',
    security: open,
    responses: { '200': html('A page') },
  },
  { method: 'get', path: '/', summary: 'The playground', security: open, responses: { '200': html('A page') } },
  {
    method: 'get',
    path: '/playground/config.json',
    summary: "Where the playground links each run: the Temporal UI and the predictions' namespace",
    security: open,
    responses: { '200': jsonResponse('Links', z.object({ temporal_ui_url: z.string(), temporal_namespace: z.string() })) },
  },
];

/** Every operation the API serves, as its route files declare it. */
export const routeContracts: RouteContract[] = [
  ...serviceContracts,
  ...predictionContracts,
  ...streamContracts,
  ...webhookContracts,
  ...batchContracts,
  ...modelContracts,
  ...fileContracts,
  ...deploymentContracts,
  ...accountContracts,
  ...openaiContracts,
];

function buildDocument() {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer' });
  for (const contract of routeContracts) registry.registerPath(contract);
  // Each task type's schemas, as components of their own (a version's input names one of them).
  // (Wrapped as definitions: the generator mistakes a bare zod 4 schema, which has a `type`, for one.)
  const taskSchemas = taskNames().flatMap((t) =>
    (['input', 'output'] as const).map((io) => ({ type: 'schema' as const, schema: taskType(t)![io].meta({ id: `${t}-${io}` }) })),
  );
  return new OpenApiGeneratorV31([...registry.definitions, ...taskSchemas]).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Kiln',
      version: '0.1.0',
      description: "Serverless inference on Temporal. Replicate's prediction API, plus OpenAI's under /openai/v1.",
    },
    security: [{ bearer: [] }],
  });
}

let document: ReturnType<typeof buildDocument> | undefined;

/** The document with this server's base URL (built once: the contracts do not change at run time). */
export function openApiDocument(baseUrl: string) {
  document ??= buildDocument();
  return { ...document, servers: [{ url: baseUrl }] };
}
