/** A prediction create's options from its body and headers, shared by the model and deployment routes. */
import { ValidationError } from '../../api/errors';
import { modelCreateBody, predictionCreateOptions } from '../../api/prediction-request';

const headers =
  (h: Record<string, string>) =>
  (name: string): string | undefined =>
    h[name];

test('no headers and a bare body: nothing set', () => {
  const options = predictionCreateOptions(modelCreateBody.parse({ input: {} }), headers({}));
  expect(Object.values(options).every((v) => v === undefined)).toBe(true);
});

test('each option is read from its header or body field', () => {
  const body = modelCreateBody.parse({
    input: { prompt: 'hi' },
    webhook: 'https://example.com/hook',
    webhook_events_filter: ['completed'],
    max_queue_seconds: 30,
  });
  const options = predictionCreateOptions(
    body,
    headers({ 'idempotency-key': 'k-1', 'kiln-priority': 'Batch', 'cancel-after': '90s', 'x-session-affinity': 's-1' }),
  );
  expect(options).toEqual({
    idempotencyKey: 'k-1',
    priority: 'batch',
    webhook: 'https://example.com/hook',
    webhookEventsFilter: ['completed'],
    cancelAfterSeconds: 90,
    maxQueueSeconds: 30,
    session: 's-1',
  });
});

test('a bad header is a validation error naming it', () => {
  const body = modelCreateBody.parse({ input: {} });
  expect(() => predictionCreateOptions(body, headers({ 'kiln-priority': 'urgent' }))).toThrow(ValidationError);
});
