/** Log lines about a prediction carry its id: Temporal's logs in the workers, requests in the API. */
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import express from 'express';
import pino from 'pino';
import { aboutPrediction, errorHandler } from '../../api/errors';
import { notePrediction, requestLog } from '../../api/request-log';
import { isPostgresSocketRace } from '../../lib/postgres-socket-race';
import { predictionIdOf, subjectOf, temporalLogger } from '../../workers/temporal-logger';

function capture() {
  const lines: any[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  const logger = pino({ level: 'debug', redact: { paths: ['req.headers.authorization'], censor: '[redacted]' } }, stream);
  return { lines, logger };
}

test('workflow ids name the prediction', () => {
  expect(predictionIdOf('prediction-abcdefghijklmnopqrstuvwxyz')).toBe('abcdefghijklmnopqrstuvwxyz');
  expect(predictionIdOf('webhook-abcdefghijklmnopqrstuvwxyz-completed-1')).toBe('abcdefghijklmnopqrstuvwxyz');
  expect(predictionIdOf('warm-dep-3')).toBeUndefined();
  expect(predictionIdOf('batch-abcdefghijklmnopqrstuvwxyz')).toBeUndefined();
  expect(subjectOf('batch-abcdefghijklmnopqrstuvwxyz')).toEqual({ batchId: 'abcdefghijklmnopqrstuvwxyz' });
  expect(predictionIdOf(undefined)).toBeUndefined();
});

test("Temporal's log calls reach pino at their level, with predictionId", () => {
  const { lines, logger } = capture();
  const log = temporalLogger(logger);
  log.warn('attempt failed, placing again', { workflowId: 'prediction-p1aaaaaaaaaaaaaaaaaaaaaaaa', attempt: 1 });
  log.debug('Activity completed', { workflowId: 'webhook-p1aaaaaaaaaaaaaaaaaaaaaaaa-completed-1', activityType: 'deliverWebhook' });
  log.log('INFO', 'worker up', { taskQueue: 'kiln-control' });
  expect(lines.map((l) => [l.level, l.msg, l.predictionId])).toEqual([
    [40, 'attempt failed, placing again', 'p1aaaaaaaaaaaaaaaaaaaaaaaa'],
    [20, 'Activity completed', 'p1aaaaaaaaaaaaaaaaaaaaaaaa'],
    [30, 'worker up', undefined],
  ]);
  expect(lines[0].attempt).toBe(1);
});

test('the API logs each request with the prediction it was about, and no query string or token', async () => {
  const { lines, logger } = capture();
  const app = express();
  app.use(requestLog(logger));
  app.post('/v1/predictions', (_req, res) => {
    notePrediction(res, 'createdaaaaaaaaaaaaaaaaaaa');
    res.status(201).json({});
  });
  app.get('/v1/predictions/:id/stream', (_req, res) => res.json({}));
  app.get('/v1/predictions/:id', (_req, res) => res.status(404).json({}));
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    await fetch(`${base}/v1/predictions`, { method: 'POST', headers: { authorization: 'Bearer kiln_secret' } });
    await fetch(`${base}/v1/predictions/readaaaaaaaaaaaaaaaaaaaaaa/stream?sig=capability`);
    await fetch(`${base}/v1/predictions/missingaaaaaaaaaaaaaaaaaaa`);
  } finally {
    server.close();
  }
  expect(lines.map((l) => [l.req.method, l.req.path, l.res.status, l.predictionId, l.level])).toEqual([
    ['POST', '/v1/predictions', 201, 'createdaaaaaaaaaaaaaaaaaaa', 30],
    ['GET', '/v1/predictions/readaaaaaaaaaaaaaaaaaaaaaa/stream', 200, 'readaaaaaaaaaaaaaaaaaaaaaa', 30],
    ['GET', '/v1/predictions/missingaaaaaaaaaaaaaaaaaaa', 404, 'missingaaaaaaaaaaaaaaaaaaa', 40],
  ]);
  const raw = JSON.stringify(lines);
  expect(raw).not.toContain('kiln_secret');
  expect(raw).not.toContain('capability');
});

test('a 500 logs the original error (type, message, stack) with the request and prediction ids; the client gets a plain JSON error', async () => {
  const { lines, logger } = capture();
  const app = express();
  app.use(requestLog(logger));
  app.post('/v1/predictions', () => {
    // As createPrediction does when Temporal refuses the start: the route never noted the id.
    throw aboutPrediction(new RangeError('payload too large for history: 4203256 bytes'), 'failedaaaaaaaaaaaaaaaaaaaa');
  });
  app.get('/v1/predictions/:id', () => {
    throw new TypeError("Cannot read properties of undefined (reading 'output')");
  });
  app.use(errorHandler(logger));
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let created: Response, read: Response, proxied: Response;
  try {
    created = await fetch(`${base}/v1/predictions`, { method: 'POST' });
    read = await fetch(`${base}/v1/predictions/readaaaaaaaaaaaaaaaaaaaaaa`);
    proxied = await fetch(`${base}/v1/predictions/readaaaaaaaaaaaaaaaaaaaaaa`, { headers: { 'x-request-id': 'proxy-7f3a' } });
  } finally {
    server.close();
  }
  for (const res of [created, read, proxied]) {
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ title: 'Internal server error', detail: 'Internal server error', status: 500 });
  }
  const errors = lines.filter((l) => l.msg === 'unhandled error');
  expect(errors.map((l) => [l.err.type, l.err.message, l.predictionId, l.requestId])).toEqual([
    ['RangeError', 'payload too large for history: 4203256 bytes', 'failedaaaaaaaaaaaaaaaaaaaa', created.headers.get('x-request-id')],
    ['TypeError', "Cannot read properties of undefined (reading 'output')", 'readaaaaaaaaaaaaaaaaaaaaaa', read.headers.get('x-request-id')],
    ['TypeError', "Cannot read properties of undefined (reading 'output')", 'readaaaaaaaaaaaaaaaaaaaaaa', 'proxy-7f3a'],
  ]);
  expect(created.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  expect(created.headers.get('x-request-id')).not.toBe(read.headers.get('x-request-id'));
  for (const l of errors) expect(l.err.stack).toMatch(/\n\s+at .*logging\.test\.ts/);
  // The request's own line carries the same id, so the two can be joined.
  const requestLine = lines.find((l) => l.req?.method === 'POST');
  expect(requestLine).toMatchObject({ requestId: created.headers.get('x-request-id'), res: { status: 500 } });
});

test("only postgres.js's closed-socket write race is survived", () => {
  const race = new TypeError("Cannot read properties of null (reading 'write')");
  race.stack = `${race.message}\n    at nextWrite (/app/node_modules/postgres/cjs/src/connection.js:255:22)\n    at process.processImmediate (node:internal/timers:483:21)`;
  expect(isPostgresSocketRace(race)).toBe(true);
  const ours = new TypeError("Cannot read properties of null (reading 'write')");
  ours.stack = `${ours.message}\n    at Object.<anonymous> (/app/api/sse.ts:20:5)`;
  expect(isPostgresSocketRace(ours)).toBe(false);
  expect(isPostgresSocketRace(new Error('boom'))).toBe(false);
});
