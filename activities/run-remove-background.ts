/** Background removal: fetch the image, cut it out, store the PNG as a file of the prediction's account. */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { outputFileId, recordOutputFile } from '../db/files';
import { kilnFailure } from '../domain/failures';
import type { RemoveBackgroundInput } from '../domain/tasks/remove-background';
import { fetchInput, InputFetchError } from '../lib/fetch-input';
import { fileKey } from '../lib/file-keys';
import { fileRef } from '../lib/file-urls';
import { newId } from '../lib/ids';
import { round } from './figures';
import type { TaskRunner } from './task-run';

/** Half the engine worker's heartbeat throttle (500 ms): every heartbeat it may send goes. */
const INFERENCE_HEARTBEAT_MS = 250;

export const runRemoveBackground: TaskRunner<RemoveBackgroundInput> = async ({ req, input, ctx, startedAt, queueSeconds, mode, deps }) => {
  const onnx = deps.onnx;
  if (!onnx) throw kilnFailure('InvalidInput', 'ONNX Runtime is not available on this node');
  const t0 = performance.now();
  let image;
  try {
    image = await fetchInput(input.image, onnx.fetch, ctx.cancellationSignal);
  } catch (err) {
    if (err instanceof InputFetchError) throw kilnFailure('InvalidInput', `image: ${err.message}`, undefined, err);
    throw err;
  }
  const fetchSeconds = (performance.now() - t0) / 1000;
  mode.heartbeat({ phase: 'inference' });
  // The run takes seconds on its own thread: heartbeats go on meanwhile, so a cancel, a
  // terminate or a reset reaches it (Temporal answers the next heartbeat) before its end.
  const beat = setInterval(() => mode.heartbeat({ phase: 'inference' }), INFERENCE_HEARTBEAT_MS);
  let out;
  try {
    out = await onnx.engine.removeBackground(req.versionId, image.bytes, ctx.cancellationSignal);
  } finally {
    clearInterval(beat);
  }
  // Named by prediction and attempt: the prediction's finish removes what failed attempts stored.
  const id = req.attempt === undefined ? newId() : outputFileId(req.predictionId, req.attempt);
  await onnx.storage.putStream(fileKey(id), Readable.from([out.png]));
  await recordOutputFile(deps.db, {
    id,
    accountId: req.snapshot.accountId,
    name: 'output.png',
    contentType: 'image/png',
    size: out.png.length,
    sha256: createHash('sha256').update(out.png).digest('hex'),
    predictionId: req.predictionId,
  });
  const seconds = (performance.now() - t0) / 1000;
  return {
    output: fileRef(onnx.signer, id),
    logs: [
      `Fetched the image (${(image.bytes.length / 1024).toFixed(0)} KiB) in ${fetchSeconds.toFixed(3)} s`,
      `Removed the background of ${out.width}×${out.height} in ${out.seconds.toFixed(3)} s on ${onnx.engine.providers(req.versionId)?.join('+') ?? 'cpu'}`,
    ],
    metrics: { predict_time: round(seconds), queue_time: round(queueSeconds), image_count: 1 },
    startedAt,
    aborted: false,
    hardware: deps.node.hardware,
  };
};
