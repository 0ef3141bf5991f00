/** /openapi.json comes from the zod schemas the API validates with; /docs renders it. */
import { API_URL, api } from '../helpers';

test('the document describes the routes with the request schemas in force', async () => {
  const r = await api('/openapi.json');
  expect(r.status).toBe(200);
  const doc = r.body;
  expect(doc.openapi).toBe('3.1.0');
  expect(doc.servers[0].url).toBe(API_URL);
  for (const path of [
    '/v1/predictions',
    '/v1/predictions/{id}/cancel',
    '/v1/models/{owner}/{name}/versions',
    '/v1/files',
    '/v1/batches',
    '/v1/batches/{id}/cancel',
    '/openai/v1/chat/completions',
  ]) {
    expect(Object.keys(doc.paths)).toContain(path);
  }
  const create = doc.paths['/v1/predictions'].post.requestBody.content['application/json'].schema;
  expect(create.required).toEqual(expect.arrayContaining(['version', 'input']));
  expect(Object.keys(create.properties)).toEqual(expect.arrayContaining(['version', 'input', 'webhook', 'webhook_events_filter']));
  expect(create.properties.webhook_events_filter.items.enum).toEqual(['start', 'output', 'logs', 'completed']);
  expect(create.additionalProperties).toBe(false);
  const input = doc.components.schemas['text-generation-input'];
  expect(input.properties.max_tokens).toMatchObject({ type: 'integer', maximum: 8192, default: 128 });
  expect(doc.components.schemas['remove-background-input'].properties.image.type).toBe('string');
  const batch = doc.paths['/v1/batches'].post.requestBody.content['application/json'].schema;
  expect(Object.keys(batch.properties)).toEqual(expect.arrayContaining(['version', 'inputs', 'input_file', 'input_url', 'chunk_size']));
  const version = doc.paths['/v1/models/{owner}/{name}/versions'].post.requestBody.content['application/json'].schema;
  expect(Object.keys(version.properties.retry.properties)).toEqual(['max_attempts', 'initial_interval_s', 'backoff']);
  expect(doc.paths['/v1/predictions'].post.responses['422'].content['application/json'].schema.$ref).toBe('#/components/schemas/Error');
});

test('/docs is a self-contained reference page', async () => {
  const res = await fetch(`${API_URL}/docs`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/text\/html/);
  const html = await res.text();
  expect(html).toContain('<title>Kiln API reference</title>');
  expect(html).toContain("fetch('/openapi.json')");
  expect(html).not.toMatch(/<script src=|<link [^>]*href="http/);
});
