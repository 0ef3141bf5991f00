/**
 * A response's event stream: its prediction's durable event log, replayed from the start and
 * followed live, shaped into Responses events numbered in order. Events up to `starting_after`
 * are made and numbered but not sent, so a client that comes back gets exactly the ones it
 * missed, then the live ones, from any API process (responses-reader.ts: what each reader is sent).
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
import { ResponseEvents } from './responses-events';
import { type ResponseState, responseObject, responsePlan } from './responses-object';
import { type NumberedEvent, ResponseStreamReader } from './responses-reader';

export function streamResponse(
  deps: { db: Db; hub: EventHub },
  res: Response,
  state: ResponseState,
  prediction: PredictionRow,
  startingAfter: number,
  held: OpenConnection,
): void {
  const sse = new SseWriter(res);
  const reader = new ResponseStreamReader(new ResponseEvents(prediction.id, responsePlan(state)), startingAfter);
  let closed = false;
  const send = (events: NumberedEvent[]) => {
    for (const e of events) if (!closed) sse.send({ event: e.type, data: JSON.stringify(e) });
  };
  /** Ends the stream with an error event: the reader does not go on from here. */
  const fail = (error: Record<string, unknown>) => {
    if (closed) return;
    closed = true;
    stop();
    sse.send({ event: 'error', data: JSON.stringify({ type: 'error', ...error }) });
    sse.end();
  };
  const first = state.request.background ? 'queued' : 'in_progress';
  send(reader.start(responseObject(state, prediction, first), responseObject(state, prediction, 'in_progress')));
  const stop = followPrediction(
    deps,
    prediction.id,
    0,
    (e, voided) => {
      if (e.event === 'output') send(reader.output(e.data, voided));
      if (e.event !== 'reset') return;
      const restart = reader.reset();
      if (restart)
        fail({
          code: 'response_restarted',
          message: `The generation restarted after a failure: the events after sequence_number ${restart.startingAfter} are void. Read the stream again with starting_after=${restart.startingAfter}.`,
          param: 'starting_after',
          starting_after: restart.startingAfter,
        });
    },
    async () => {
      if (closed) return;
      const done = await awaitPrediction(deps, prediction, { timeoutMs: 5_000 });
      send(reader.end(done, responseObject(state, done)));
      sse.end();
    },
    { withVoided: true },
  );
  held.signal.addEventListener('abort', () => fail({ code: errorType(401), message: (held.signal.reason as Error).message }));
  sse.onClose(() => {
    closed = true;
    stop();
  });
}
