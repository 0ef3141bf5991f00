/** What a prediction stream's follower passes on. */
import { doneWithoutEvent, passedOn } from '../../api/followed-events';
import type { PredictionEventRow } from '../../db/events';

const row = (id: number, event: PredictionEventRow['event']): PredictionEventRow => ({
  id,
  seq: id,
  predictionId: 'p1',
  event,
  data: 'x',
  attempt: 1,
  tokens: null,
  createdAt: new Date(0),
});

test("output before the last reset is a failed attempt's: left out, or passed on as void when asked for", () => {
  expect(passedOn(row(3, 'output'), 5, false)).toBeUndefined();
  expect(passedOn(row(3, 'output'), 5, true)).toEqual({ voided: true });
  expect(passedOn(row(5, 'output'), 5, false)).toEqual({ voided: false });
  expect(passedOn(row(3, 'logs'), 5, false)).toEqual({ voided: false });
  expect(passedOn(row(3, 'reset'), 5, false)).toEqual({ voided: false });
});

test('attempt events go to no reader', () => {
  expect(passedOn(row(9, 'attempt'), 0, true)).toBeUndefined();
});

test("a prediction that ended without a done event gets one after the last read, with its status's reason", () => {
  const at = new Date(1);
  expect(doneWithoutEvent('p1', { id: 41, seq: 7 }, 'succeeded', at)).toEqual({
    id: 42,
    seq: 8,
    predictionId: 'p1',
    event: 'done',
    data: '{}',
    attempt: 1,
    tokens: null,
    createdAt: at,
  });
  expect(JSON.parse(doneWithoutEvent('p1', { id: 0, seq: 0 }, 'canceled').data)).toEqual({ reason: 'canceled' });
});
