/**
 * Text generation: a prediction streams its output and sends output webhooks as it goes; a batch
 * item only returns its text. A failed attempt's output is in the stream already, and this
 * attempt continues it (docs/architecture.md#what-survives-a-crash).
 */
import { log } from '@temporalio/activity';
import type { PredictResult, PrefillResult } from '../domain/contracts';
import { kilnFailure } from '../domain/failures';
import type { PredictionMetrics } from '../domain/prediction-metrics';
import type { TextGenerationInput } from '../domain/tasks/text-generation';
import { draftMetrics } from '../lib/metrics';
import { round } from './figures';
import { heartbeatThrottle } from './heartbeat-throttle';
import { OutputStream } from './output-stream';
import { OutputWebhooks } from './output-webhooks';
import type { TaskRun, TaskRunner } from './task-run';

type Generation = Awaited<ReturnType<TaskRun<unknown>['deps']['llama']['generate']>>;

export const runTextGeneration: TaskRunner<TextGenerationInput> = async (run) => {
  const { req, ctx, mode, deps } = run;
  const continues = mode.live ? (req.continues ?? '') : '';
  let tokens = 0;
  const beatDue = heartbeatThrottle();
  const beat = setInterval(() => mode.heartbeat({ tokens }), 1000);
  const stream = mode.live
    ? new OutputStream(
        deps.db,
        req.predictionId,
        (err) => log.warn('stream write failed', { error: err.message }),
        req.attempt,
        deps.streamBatchMs,
      )
    : undefined;
  const output: string[] = continues ? [continues] : [];
  const webhooks = mode.live
    ? new OutputWebhooks(
        ctx.client,
        deps.controlQueue,
        req.snapshot,
        (err) => log.warn('could not start an output webhook', { error: err.message }),
        req.attempt,
      )
    : undefined;
  // A later attempt has taken the stream over (this one was given up for lost): stop generating.
  const replaced = new AbortController();
  try {
    const g = await deps.llama.generate(req.versionId, run.input, {
      signal: AbortSignal.any([ctx.cancellationSignal, replaced.signal]),
      continues,
      continuedTokens: req.continuedTokens,
      session: req.session,
      prefilledElsewhere: req.prefilled !== undefined && req.prefilled.snapshot !== null,
      owner: req.snapshot.accountId,
      onChunk: (chunk, outputTokens) => {
        tokens = outputTokens;
        if (beatDue()) mode.heartbeat({ tokens });
        output.push(chunk);
        stream?.push(chunk, outputTokens);
        webhooks?.outputChanged(output);
        if (stream?.isReplaced) replaced.abort();
      },
    });
    webhooks?.stop();
    await stream?.close();
    // Anything but a cancel request (shutdown, lost heartbeat) is a fault: let Temporal retry.
    if ((g.aborted || replaced.signal.aborted) && !ctx.cancellationDetails?.cancelRequested) {
      throw kilnFailure('EngineInterrupted', `generation interrupted on node ${deps.node.nodeId}`);
    }
    const result = generationResult(run, g, continues);
    return req.prefilled ? withPrefill(result, req.prefilled, g, deps.node.nodeId) : result;
  } finally {
    clearInterval(beat);
    webhooks?.stop();
  }
};

/** The prediction's result: the text (continuing a failed attempt's), its logs and metrics. */
export function generationResult(
  run: Pick<TaskRun<unknown>, 'startedAt' | 'queueSeconds' | 'deps'>,
  g: Generation,
  continues: string,
): PredictResult {
  const generated = g.outputTokens - g.continuedTokens;
  const tokensPerSecond = generated / Math.max(g.predictSeconds, 1e-6);
  const logs = [`Using seed: ${g.seed}`];
  if (continues) logs.push(`Continued the output of the failed attempt (${g.continuedTokens} tokens)`);
  if (g.resumed) logs.push(resumeLine(g.resumed));
  if (g.checkpoints) logs.push(`Saved ${g.checkpoints.saved} KV checkpoints in ${g.checkpoints.seconds.toFixed(3)} s`);
  if (g.restored) {
    const where = g.restored.tier === 'object' ? 'in object storage' : 'on disk';
    logs.push(`Restored ${g.restored.tokens} prompt tokens from a KV snapshot ${where} in ${g.restored.seconds.toFixed(3)} s`);
  }
  logs.push(
    g.aborted
      ? `Canceled after ${g.outputTokens} tokens`
      : `Generated ${generated} tokens in ${g.predictSeconds.toFixed(3)} s (${tokensPerSecond.toFixed(1)} tokens/s, stop: ${g.stopReason})`,
  );
  const metrics: PredictionMetrics = {
    queue_time: round(run.queueSeconds),
    predict_time: round(g.predictSeconds),
    input_token_count: g.inputTokens,
    cached_tokens: g.cachedTokens,
    cache_tier: g.cacheTier,
    output_token_count: g.outputTokens,
    tokens_per_second: round(tokensPerSecond, 2),
  };
  if (g.timeToFirstToken !== null) metrics.time_to_first_token = round(g.timeToFirstToken);
  if (g.draft) Object.assign(metrics, draftMetrics(g.draft));
  // Of cached_tokens, those a snapshot gave (cache_tier says which tier it came from).
  if (g.restored) Object.assign(metrics, { restored_tokens: g.restored.tokens, restore_time: round(g.restored.seconds) });
  const text = continues ? [continues, ...g.chunks] : g.chunks;
  return { output: text, logs, metrics, startedAt: run.startedAt, aborted: g.aborted, hardware: run.deps.node.hardware };
}

/** How an exact continuation resumed decoding: from which checkpoint, or from the prompt again. */
function resumeLine(r: NonNullable<Generation['resumed']>): string {
  const where = r.tier === 'object' ? 'in object storage' : 'on disk';
  const from =
    r.from === 'checkpoint'
      ? `Restored the failed attempt's KV checkpoint at token ${r.atToken} ${where} in ${r.seconds.toFixed(3)} s`
      : 'No KV checkpoint of the failed attempt was usable: prefilled the prompt again';
  const redrawn = `drew again the ${r.redrawn} tokens it had streamed since${r.matched ? '' : ', which differed from the streamed text'}`;
  return `${from} and ${redrawn}`;
}

/**
 * A split prediction (domain/prefill-split.ts): its metrics name both nodes and what each step
 * took, and its logs say whether the prefill node's snapshot was restored here or the prompt was
 * prefilled here after all (the snapshot was missing).
 */
export function withPrefill(result: PredictResult, prefilled: PrefillResult, g: Generation, nodeId: string): PredictResult {
  const used = prefilled.snapshot !== null && g.restored?.name === prefilled.snapshot;
  const metrics: PredictionMetrics = {
    ...result.metrics,
    prefill_node: prefilled.nodeId,
    ...(prefilled.waitSeconds !== undefined ? { prefill_wait_time: prefilled.waitSeconds } : {}),
    prefill_time: prefilled.prefillSeconds,
    kv_upload_time: prefilled.uploadSeconds,
    kv_transfer_bytes: used ? prefilled.bytes : 0,
    decode_node: nodeId,
    decode_time: result.metrics.predict_time,
    prefill_split: used ? 'restored' : 'prefilled on the decode node',
  };
  const line = used
    ? `Prefilled on node ${prefilled.nodeId} in ${prefilled.prefillSeconds.toFixed(3)} s; its KV snapshot (${prefilled.bytes} bytes) restored on node ${nodeId} in ${g.restored!.seconds.toFixed(3)} s`
    : `Prefilled on node ${prefilled.nodeId}, but its KV snapshot ${prefilled.snapshot ?? '(none kept)'} was not restored here: prefilled on node ${nodeId} instead`;
  return { ...result, metrics, logs: [line, ...result.logs] };
}
