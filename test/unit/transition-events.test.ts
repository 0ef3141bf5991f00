/** What a prediction's transition adds to its stream. */
import { transitionEvents } from '../../db/predictions';

const at = (
  logs: string,
  status: 'processing' | 'succeeded' | 'failed' | 'canceled',
  output: unknown = null,
  error: string | null = null,
) => ({
  logs,
  status,
  output,
  error,
});
const none = { oldLogs: '', restartStream: false, hasOutput: false };

test('only the log lines the row does not have yet go out, without the last newline', () => {
  expect(transitionEvents(at('a\nb\n', 'processing'), { ...none, oldLogs: 'a\n' })).toEqual([{ event: 'logs', data: 'b' }]);
  expect(transitionEvents(at('a\n', 'processing'), { ...none, oldLogs: 'a\n' })).toEqual([]);
  // Logs that do not continue the row's (a reset run's) go out whole.
  expect(transitionEvents(at('x\n', 'processing'), { ...none, oldLogs: 'a\n' })).toEqual([{ event: 'logs', data: 'x' }]);
});

test('a success ends with its output, unless streamed, then done', () => {
  expect(transitionEvents(at('', 'succeeded', 'hi'), none)).toEqual([
    { event: 'output', data: 'hi' },
    { event: 'done', data: '{}' },
  ]);
  expect(transitionEvents(at('', 'succeeded', { a: 1 }), none)[0]).toEqual({ event: 'output', data: '{"a":1}' });
  expect(transitionEvents(at('', 'succeeded', 'hi'), { ...none, hasOutput: true })).toEqual([{ event: 'done', data: '{}' }]);
});

test('a failure ends with its error, then done with its reason; a cancel with done alone', () => {
  expect(transitionEvents(at('', 'failed', null, 'boom'), none)).toEqual([
    { event: 'error', data: 'boom' },
    { event: 'done', data: '{"reason":"failed"}' },
  ]);
  expect(transitionEvents(at('', 'failed'), none)[0].data).toBe('prediction failed');
  expect(transitionEvents(at('', 'canceled'), none)).toEqual([{ event: 'done', data: '{"reason":"canceled"}' }]);
});

test('a stream that starts again says reset first', () => {
  const events = transitionEvents(at('l\n', 'succeeded', 'o'), { ...none, restartStream: true, hasOutput: true });
  expect(events.map((e) => e.event)).toEqual(['reset', 'logs', 'done']);
});
