/**
 * A response's event stream: its prediction's durable event log, replayed from the start and
 * followed live, shaped into Responses events numbered in order. Events up to `starting_after`
 * are made and numbered but not sent, so a client that comes back gets exactly the ones it
 * missed, then the live ones, from any API process.
 */
import type { Response } from 'express';
import type { Db } from '../../db/client';
import type { PredictionRow } from '../../db/predictions';
import { awaitPrediction } from '../await-prediction';
import type { EventHub } from '../event-hub';
import type { OpenConnection } from '../open-connections';
import { followPrediction } from '../prediction-stream';
import { SseWriter } from '../sse';
import { errorType } from './errors';
import { ResponseEvents, type ResponseEvent } from './responses-events';
import { responseObject, responsePlan, type ResponseState } from './responses-object';

export function streamResponse(
  deps: { db: Db; hub: EventHub },
  res: Response,
  state: ResponseState,
  prediction: PredictionRow,
  startingAfter: number,
  held: OpenConnection,
): void {
  const sse = new SseWriter(res);
  const shaper = new ResponseEvents(prediction.id, responsePlan(state));
  let next = 0;
  let closed = false;
  const send = (events: ResponseEvent[]) => {
    for (const { type, ...rest } of events) {
      const sequence_number = next++;
      if (sequence_number > startingAfter && !closed) sse.send({ event: type, data: JSON.stringify({ type, sequence_number, ...rest }) });
    }
  };
  const first = state.request.background ? 'queued' : 'in_progress';
  send(shaper.start(responseObject(state, prediction, first), responseObject(state, prediction, 'in_progress')));
  const stop = followPrediction(
    deps,
    prediction.id,
    0,
    (e) => {
      if (e.event === 'output') send(shaper.text(e.data));
    },
    async () => {
      if (closed) return;
      const done = await awaitPrediction(deps, prediction, { timeoutMs: 5_000 });
      send(shaper.end(done, responseObject(state, done)));
      sse.end();
    },
  );
  held.signal.addEventListener('abort', () => {
    if (closed) return;
    closed = true;
    stop();
    sse.send({
      event: 'error',
      data: JSON.stringify({ type: 'error', code: errorType(401), message: (held.signal.reason as Error).message }),
    });
    sse.end();
  });
  sse.onClose(() => {
    closed = true;
    stop();
  });
}
