/**
 * `/openapi.json`, generated from the same zod schemas that validate requests (and from each
 * task type's input and output schemas), so the reference cannot drift from the code.
 */
import { z } from 'zod';
import { predictionStatuses } from '../db/schema';
import { tasks, taskNames } from '../tasks';
import { tokenBody } from './routes/account';
import { createDeploymentBody, updateDeploymentBody } from './routes/deployments';
import { createModelBody, createVersionBody } from './routes/models';
import { chatBody, completionBody, embeddingsBody } from './routes/openai';
import { createBody, modelCreateBody } from './routes/predictions';
import { createBatchBody } from './routes/batches';
import { batchStatuses } from '../db/schema';

const schema = (s: z.ZodType) => {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
};

const prediction = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    model: { type: 'string', description: 'owner/name' },
    version: { type: 'string' },
    input: { type: 'object' },
    output: { description: "The task's output; file outputs are signed URLs that expire" },
    logs: { type: 'string' },
    error: { type: ['string', 'null'] },
    status: { enum: [...predictionStatuses] },
    created_at: { type: 'string', format: 'date-time' },
    started_at: { type: ['string', 'null'], format: 'date-time' },
    completed_at: { type: ['string', 'null'], format: 'date-time' },
    metrics: { type: 'object', additionalProperties: { type: 'number' } },
    urls: {
      type: 'object',
      properties: {
        get: { type: 'string' },
        cancel: { type: 'string' },
        stream: { type: 'string', description: 'SSE: output, logs, error, done; reset (the output so far came from a failed attempt: drop it). Signed; expires an hour after the read that returned it' },
      },
    },
  },
};

const batch = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    status: { enum: [...batchStatuses] },
    model: { type: 'string', description: 'owner/name' },
    version: { type: 'string' },
    total: { type: 'integer' },
    completed: { type: 'integer', description: 'Inputs with an output line' },
    failed: { type: 'integer', description: 'Inputs with an error line' },
    chunk_size: { type: 'integer' },
    source: { type: 'string', description: 'inline, file:<id> or the input URL' },
    error: { type: ['string', 'null'], description: 'Which chunk failed, on which node, and why' },
    logs: { type: 'string' },
    created_at: { type: 'string', format: 'date-time' },
    started_at: { type: ['string', 'null'], format: 'date-time' },
    completed_at: { type: ['string', 'null'], format: 'date-time' },
    output_file: {
      type: ['object', 'null'],
      description: 'JSONL, one line per input in input order: {index, output} or {index, error}',
      properties: { id: { type: 'string' }, size: { type: 'integer' }, content_type: { type: 'string' }, urls: { type: 'object', properties: { get: { type: 'string' } } } },
    },
    urls: { type: 'object', properties: { get: { type: 'string' }, cancel: { type: 'string' }, output: { type: ['string', 'null'] } } },
  },
};

const error = {
  type: 'object',
  properties: { title: { type: 'string' }, detail: { type: 'string' }, status: { type: 'integer' }, invalid_fields: { type: 'array' } },
};

const json = (s: object) => ({ content: { 'application/json': { schema: s } } });
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const errors = {
  '401': { description: 'No valid token', ...json(ref('Error')) },
  '404': { description: 'Not found (or not yours)', ...json(ref('Error')) },
  '422': { description: 'A field is wrong; invalid_fields names it', ...json(ref('Error')) },
  '429': { description: 'Rate limit or cap; see Retry-After', ...json(ref('Error')) },
};
const pathParam = (name: string) => ({ name, in: 'path', required: true, schema: { type: 'string' } });
/** A capability URL's query: unix seconds it expires at, and the signature over what it grants and until when. */
const signedQuery = [
  { name: 'expires', in: 'query', schema: { type: 'integer' } },
  { name: 'sig', in: 'query', schema: { type: 'string' } },
];
const headers = [
  { name: 'Prefer', in: 'header', schema: { type: 'string', example: 'wait=30' }, description: 'wait[=N]: hold the response up to N s (60 max)' },
  { name: 'Cancel-After', in: 'header', schema: { type: 'string', example: '5m' }, description: 'cancel if not done by then (aborted if never started)' },
  { name: 'Idempotency-Key', in: 'header', schema: { type: 'string' }, description: 'a retried create returns the same prediction' },
  { name: 'Kiln-Priority', in: 'header', schema: { enum: ['interactive', 'default', 'batch'] } },
];

export function openApiDocument(baseUrl: string) {
  const created = { '201': { description: 'Created', ...json(ref('Prediction')) }, ...errors };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Kiln',
      version: '0.1.0',
      description: "Serverless inference on Temporal. Replicate's prediction API, plus OpenAI's under /openai/v1.",
    },
    servers: [{ url: baseUrl }],
    security: [{ bearer: [] }],
    paths: {
      '/v1/predictions': {
        post: { summary: 'Create a prediction', parameters: headers, requestBody: json(schema(createBody)), responses: created },
        get: {
          summary: 'Your predictions, newest first',
          parameters: [{ name: 'cursor', in: 'query', schema: { type: 'string' } }, { name: 'page_size', in: 'query', schema: { type: 'integer' } }],
          responses: { '200': { description: 'A page', ...json({ type: 'object', properties: { next: {}, previous: {}, results: { type: 'array', items: ref('Prediction') } } }) } },
        },
      },
      '/v1/models/{owner}/{name}/predictions': {
        post: {
          summary: "Create a prediction on a model's latest version",
          parameters: [pathParam('owner'), pathParam('name'), ...headers],
          requestBody: json(schema(modelCreateBody)),
          responses: created,
        },
      },
      '/v1/predictions/{id}': { get: { summary: 'A prediction', parameters: [pathParam('id')], responses: { '200': json(ref('Prediction')), ...errors } } },
      '/v1/predictions/{id}/setup': {
        get: {
          summary: "A starting prediction's warm-up: phase (queued, download, load, or null once started), file, bytes, total",
          parameters: [pathParam('id')],
          responses: { '200': { description: 'Warm-up progress', content: { 'application/json': { schema: { type: 'object' } } } }, ...errors },
        },
      },
      '/v1/predictions/{id}/cancel': { post: { summary: 'Cancel', parameters: [pathParam('id')], responses: { '200': json(ref('Prediction')), ...errors } } },
      '/v1/predictions/{id}/stream': {
        get: {
          summary: 'Server-sent events of a prediction (use urls.stream: its signature is the permission, until it expires)',
          security: [{}, { bearer: [] }],
          parameters: [pathParam('id'), ...signedQuery],
          responses: { '200': { description: 'text/event-stream' }, '401': { description: 'Expired or unsigned, and no token', ...json(ref('Error')) }, '404': errors['404'] },
        },
      },
      '/v1/predictions/{id}/webhooks': { get: { summary: 'Webhook delivery log', parameters: [pathParam('id')], responses: { '200': { description: 'Attempts' } } } },
      '/v1/predictions/{id}/webhooks/redeliver': { post: { summary: 'Send the completed event again', parameters: [pathParam('id')], responses: { '202': { description: 'Started' } } } },
      '/v1/batches': {
        post: { summary: 'Run many inputs on one model (inline, an uploaded JSONL file, or a JSONL URL)', requestBody: json(schema(createBatchBody)), responses: { '201': { description: 'Created', ...json(ref('Batch')) }, ...errors } },
        get: {
          summary: 'Your batches, newest first',
          parameters: [{ name: 'cursor', in: 'query', schema: { type: 'string' } }, { name: 'page_size', in: 'query', schema: { type: 'integer' } }],
          responses: { '200': { description: 'A page', ...json({ type: 'object', properties: { next: {}, previous: {}, results: { type: 'array', items: ref('Batch') } } }) } },
        },
      },
      '/v1/batches/{id}': { get: { summary: 'A batch and its progress', parameters: [pathParam('id')], responses: { '200': json(ref('Batch')), ...errors } } },
      '/v1/batches/{id}/cancel': { post: { summary: 'Cancel; the output keeps the inputs finished before', parameters: [pathParam('id')], responses: { '200': json(ref('Batch')), ...errors } } },
      '/v1/models': {
        get: { summary: 'Models you can use', responses: { '200': { description: 'A page' } } },
        post: { summary: 'Create a model', requestBody: json(schema(createModelBody)), responses: { '201': { description: 'Created' }, ...errors } },
      },
      '/v1/models/{owner}/{name}': { get: { summary: 'A model', parameters: [pathParam('owner'), pathParam('name')], responses: { '200': { description: 'The model' } } } },
      '/v1/models/{owner}/{name}/versions': {
        get: { summary: 'Versions', parameters: [pathParam('owner'), pathParam('name')], responses: { '200': { description: 'A page' } } },
        post: {
          summary:
            "Create a version from blobs you uploaded (or that a model you own, or a public one, uses). memory_bytes is the server's figure from the weights (GGUF metadata × context × sequences; ONNX file size × 3), or yours if larger",
          parameters: [pathParam('owner'), pathParam('name')],
          requestBody: json(schema(createVersionBody)),
          responses: { '201': { description: 'Created' }, ...errors },
        },
      },
      '/v1/models/{owner}/{name}/versions/{id}': { get: { summary: 'A version', parameters: [pathParam('owner'), pathParam('name'), pathParam('id')], responses: { '200': { description: 'The version' }, ...errors } } },
      '/v1/blobs/sha256/{digest}': {
        head: {
          summary: 'Is this blob stored for you? Yes only if you uploaded it or a model you own, or a public one, uses it; others’ weights read as absent',
          parameters: [pathParam('digest')],
          responses: { '200': { description: 'Yes: Content-Length is its size' }, '404': { description: 'Not stored, or not yours to use' } },
        },
        put: {
          summary: 'Upload weights: streamed to a key of this upload, checked against the digest, then copied into place; verified bytes make you one of the blob’s uploaders',
          parameters: [pathParam('digest')],
          requestBody: { content: { 'application/octet-stream': {} } },
          responses: {
            '201': { description: 'Stored: {sha256, size, created: true}' },
            '200': { description: 'Already stored; now yours to use: {sha256, size, created: false}' },
            '413': { description: 'Over the server’s blob size limit', ...json(ref('Error')) },
            '422': errors['422'],
          },
        },
      },
      '/v1/files': {
        post: { summary: 'Upload a file (multipart, field content)', requestBody: { content: { 'multipart/form-data': { schema: { type: 'object', properties: { content: { type: 'string', format: 'binary' } } } } } }, responses: { '201': { description: 'The file, with a signed urls.get' } } },
        get: { summary: 'Your files', responses: { '200': { description: 'A page' } } },
      },
      '/v1/files/{id}': {
        get: { summary: 'A file', parameters: [pathParam('id')], responses: { '200': { description: 'The file, with a fresh signed urls.get' }, ...errors } },
        delete: { summary: 'Delete a file', parameters: [pathParam('id')], responses: { '204': { description: 'Deleted' }, ...errors } },
      },
      '/v1/files/{id}/content': {
        get: {
          summary: "A file's bytes (use urls.get). Always a download (Content-Disposition: attachment) under a sandboxing CSP; types a browser could run are sent as application/octet-stream",
          security: [{}, { bearer: [] }],
          parameters: [pathParam('id'), ...signedQuery],
          responses: { '200': { description: 'The bytes', content: { 'application/octet-stream': {} } }, '401': { description: 'Expired or unsigned, and no token', ...json(ref('Error')) }, '404': errors['404'] },
        },
      },
      '/v1/deployments': {
        get: { summary: 'Your deployments', responses: { '200': { description: 'A page' } } },
        post: {
          summary: "Create a deployment. The min_instances of all your deployments count against your account's max_pinned_replicas (422 naming min_instances past it)",
          requestBody: json(schema(createDeploymentBody)),
          responses: { '201': { description: 'Created' }, ...errors },
        },
      },
      '/v1/deployments/{owner}/{name}': {
        get: { summary: 'A deployment', parameters: [pathParam('owner'), pathParam('name')], responses: { '200': { description: 'The deployment' } } },
        patch: {
          summary: 'A new release (min_instances within your max_pinned_replicas)',
          parameters: [pathParam('owner'), pathParam('name')],
          requestBody: json(schema(updateDeploymentBody)),
          responses: { '200': { description: 'The deployment' }, ...errors },
        },
      },
      '/v1/deployments/{owner}/{name}/predictions': {
        post: { summary: "Create a prediction on a deployment's current release", parameters: [pathParam('owner'), pathParam('name'), ...headers], requestBody: json(schema(modelCreateBody)), responses: created },
      },
      '/v1/hardware': { get: { summary: 'What the live engine nodes offer', responses: { '200': { description: 'Hardware' } } } },
      '/v1/account': { get: { summary: 'Your account, limits and load', responses: { '200': { description: 'The account' } } } },
      '/v1/account/usage': {
        get: {
          summary: 'Usage by day and model',
          parameters: [
            { name: 'start', in: 'query', schema: { type: 'string', format: 'date' }, description: 'First day (default: 30 days ago)' },
            { name: 'end', in: 'query', schema: { type: 'string', format: 'date' }, description: 'Last day, included (default: today)' },
          ],
          responses: { '200': { description: 'Usage' } },
        },
      },
      '/v1/account/tokens': {
        get: { summary: 'Your tokens (never their secret)', responses: { '200': { description: 'Tokens' } } },
        post: { summary: 'A new token, shown once', requestBody: json(schema(tokenBody)), responses: { '201': { description: 'The token' } } },
      },
      '/v1/account/tokens/{id}': { delete: { summary: 'Revoke a token', parameters: [pathParam('id')], responses: { '200': { description: 'Revoked' }, ...errors } } },
      '/v1/webhooks/default/secret': { get: { summary: 'The webhook signing secret', responses: { '200': { description: '{key}' } } } },
      '/v1/webhooks/default/secret/rotate': { post: { summary: 'A new signing secret; the previous one signs too for a while', responses: { '200': { description: '{key, previous_key_expires_at}' } } } },
      '/openai/v1/chat/completions': { post: { summary: 'OpenAI chat completions', requestBody: json(schema(chatBody)), responses: { '200': { description: 'chat.completion, or SSE chunks ending in [DONE]' } } } },
      '/openai/v1/completions': { post: { summary: 'OpenAI completions', requestBody: json(schema(completionBody)), responses: { '200': { description: 'text_completion' } } } },
      '/openai/v1/embeddings': { post: { summary: 'OpenAI embeddings', requestBody: json(schema(embeddingsBody)), responses: { '200': { description: 'A list of embeddings' } } } },
      '/openai/v1/models': { get: { summary: 'Models, OpenAI style', responses: { '200': { description: 'A list' } } } },
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        Prediction: prediction,
        Batch: batch,
        Error: error,
        ...Object.fromEntries(
          taskNames.flatMap((t) => [
            [`${t}-input`, schema(tasks[t].input)],
            [`${t}-output`, schema(tasks[t].output)],
          ]),
        ),
      },
    },
  };
}

/** A reference page with no external assets (the machine may be offline): it reads /openapi.json. */
export const REFERENCE_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Kiln API reference</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2rem auto;padding:0 1rem;color:#222}
h1{margin-bottom:.2rem}.op{border:1px solid #ddd;border-radius:6px;margin:.6rem 0;padding:.5rem .8rem}
.m{display:inline-block;min-width:4.5rem;font-weight:700;text-transform:uppercase}
.get{color:#1a7f37}.post{color:#0550ae}.put{color:#8250df}.head{color:#6e7781}.delete{color:#cf222e}
code{background:#f6f8fa;padding:0 .3rem;border-radius:4px}pre{background:#f6f8fa;padding:.6rem;overflow:auto;font-size:13px}
details summary{cursor:pointer;color:#555}
</style></head><body>
<h1>Kiln API reference</h1><p id="desc"></p><div id="ops">Loading /openapi.json…</div>
<script>
fetch('/openapi.json').then(r => r.json()).then(doc => {
  document.getElementById('desc').textContent = doc.info.description;
  const ops = document.getElementById('ops'); ops.textContent = '';
  for (const [path, item] of Object.entries(doc.paths)) for (const [method, op] of Object.entries(item)) {
    const div = document.createElement('div'); div.className = 'op';
    const head = document.createElement('div');
    head.innerHTML = '<span class="m ' + method + '">' + method + '</span> <code></code> ';
    head.querySelector('code').textContent = path;
    head.append(op.summary || '');
    div.append(head);
    const body = op.requestBody && op.requestBody.content && op.requestBody.content['application/json'];
    if (body) {
      const d = document.createElement('details'); const s = document.createElement('summary');
      s.textContent = 'Request body'; const pre = document.createElement('pre');
      pre.textContent = JSON.stringify(body.schema, null, 2); d.append(s, pre); div.append(d);
    }
    ops.append(div);
  }
  const d = document.createElement('details'); const s = document.createElement('summary');
  s.textContent = 'Schemas (predictions and task types)'; const pre = document.createElement('pre');
  pre.textContent = JSON.stringify(doc.components.schemas, null, 2); d.append(s, pre); ops.append(d);
});
</script></body></html>`;
