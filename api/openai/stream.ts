/**
 * OpenAI's event streams: each chunk a bare `data: <json>` line, errors as `data: {"error": …}`,
 * and `data: [DONE]` at the end, whatever the prediction's outcome.
 */
import type { Response } from 'express';
import type { Db } from '../../db/client';
import type { PredictionRow } from '../../db/predictions';
import { awaitPrediction } from '../await-prediction';
import type { EventHub } from '../event-hub';
import { inputFailure } from '../input-failure';
import type { OpenConnection } from '../open-connections';
import { followPrediction } from '../prediction-stream';
import { SseWriter } from '../sse';
import { codedErrorBody, errorType, inputFailureError, openAiError } from './errors';
import { usage } from './result';
import { type Chunk, type StreamShape, usageChunk } from './stream-shape';

/**
 * An event stream that opens (status 200 and headers) with its first chunk: until then an
 * error can still be answered with an HTTP status.
 */
export class ChunkStream {
  private sse: SseWriter | undefined;

  constructor(
    private readonly res: Response,
    private readonly first?: Chunk,
  ) {}

  get opened(): boolean {
    return this.sse !== undefined;
  }

  send(chunks: Chunk[]): void {
    if (chunks.length > 0) this.open();
    for (const c of chunks) this.sse?.data(JSON.stringify(c));
  }

  error(message: string, type = 'server_error'): void {
    this.open().data(JSON.stringify(openAiError(message, type, null, null)));
  }

  done(): void {
    const sse = this.open();
    sse.data('[DONE]');
    sse.end();
  }

  private open(): SseWriter {
    if (!this.sse) {
      this.sse = new SseWriter(this.res);
      // Stops its keep-alive when the client goes.
      this.sse.onClose(() => undefined);
      if (this.first) this.sse.data(JSON.stringify(this.first));
    }
    return this.sse;
  }
}

type StreamDeps = { db: Db; hub: EventHub };

/**
 * Relays the prediction's output events as OpenAI chunks, then the finish, usage and [DONE].
 * The event stream opens with the first output (or the end): a prompt too long for the
 * context is then still an HTTP 400, as OpenAI answers it, not an error inside a 200 stream.
 */
export function streamPrediction(
  deps: StreamDeps,
  res: Response,
  row: PredictionRow,
  shape: StreamShape,
  includeUsage: boolean,
  held: OpenConnection,
): void {
  const out = new ChunkStream(res, shape.first);
  let closed = false;
  /** The text sent cannot be taken back: a generation that starts over ends this stream. */
  let restarted = false;
  /** The token or the account no longer holds: the stream ends with an error, whatever the prediction does. */
  let withdrawn = false;
  const stop = followPrediction(
    deps,
    row.id,
    0,
    (e) => {
      if (restarted || withdrawn) return;
      if (e.event === 'output') out.send(shape.text(e.data));
      if (e.event === 'error' && !inputFailure({ status: 'failed', error: e.data })) out.error(e.data);
      if (e.event === 'reset') {
        // Only where a retry could not continue the text streamed so far (a workflow from before retries continued it).
        restarted = true;
        out.error(`the generation restarted after a node failure; the text above is void: ask again (prediction ${row.id})`);
        stop();
      }
    },
    async () => {
      if (closed || withdrawn) return;
      if (restarted) return out.done();
      await endStream(deps, res, row, out, shape, includeUsage);
    },
  );
  held.signal.addEventListener('abort', () => {
    withdrawn = true;
    stop();
    const message = (held.signal.reason as Error).message;
    if (closed) return;
    if (!out.opened) return void res.status(401).json(openAiError(message, errorType(401), null, null));
    out.error(message, errorType(401));
    out.done();
  });
  res.on('close', () => {
    closed = true;
    stop();
  });
}

/** The end of a stream whose prediction finished: its last chunks and usage if it succeeded, or a 400 if nothing was sent yet. */
async function endStream(
  deps: StreamDeps,
  res: Response,
  row: PredictionRow,
  out: ChunkStream,
  shape: StreamShape,
  includeUsage: boolean,
): Promise<void> {
  const done = await awaitPrediction(deps, row, { timeoutMs: 5_000 });
  const tooLong = inputFailureError(done);
  if (tooLong && !out.opened) {
    res.status(400).json(codedErrorBody(tooLong));
    return;
  }
  if (done.status === 'succeeded') {
    out.send(shape.end(done));
    if (includeUsage) out.send([usageChunk(shape, usage(done))]);
  }
  out.done();
}
