/** Activities of an engine node: warm a model up, and run predictions on it. */
import { Context, log } from '@temporalio/activity';
import type { Db } from '../db/client';
import type { VersionFile } from '../domain/statuses';
import { getVersion } from '../db/models';
import { taskType } from '../domain/tasks';
import type { EmbeddingsInput } from '../domain/tasks/embeddings';
import type { TextGenerationInput } from '../domain/tasks/text-generation';
import type { LlamaEngine, LlamaLoadSettings } from '../engines/llama/engine';
import type { ModelCache } from '../engines/model-cache';
import type { EchoFixtureEngine } from '../fixtures/echo-engine';
import type { OnnxEngine } from '../engines/onnx/engine';
import type { RemoveBackgroundInput } from '../domain/tasks/remove-background';
import { fetchInput, InputFetchError, type FetchInputDeps } from '../lib/fetch-input';
import { engineFileIndex } from '../lib/engine-file';
import { fileRef } from '../lib/file-urls';
import type { UrlSigner } from '../lib/signing';
import type { Storage } from '../lib/storage';
import { outputFileId, recordOutputFile } from '../db/files';
import { fileKey } from '../lib/file-keys';
import { finishSucceededPrediction, writePredictionSnapshot, type RunWriter } from '../db/predictions';
import { currentRunWriter } from './run-writer';
import { usageOf } from '../db/usage';
import { draftMetrics, observePrediction } from '../lib/metrics';
import { processingSnapshot, succeededSnapshot } from '../domain/engine-projection';
import { newId } from '../lib/ids';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
type EchoFixtureInput = import('zod').output<typeof import('../fixtures/echo-engine').echoFixtureInput>;
import type { NodeHooks } from './node-hooks';
import { mappingEngineErrors } from './engine-failures';
import { OutputStream } from './output-stream';
import { loadAdapterVersion } from './adapter-load';
import { loraBaseOf } from '../lib/lora';
import { createBatchChunkActivities } from './batch-chunk';
import { OutputWebhooks } from './output-webhooks';
import { kilnFailure } from '../domain/failures';
import {
  PREDICTION_STARTED_SIGNAL,
  predictionWorkflowId,
  type LoadResult,
  type PredictionStartedSignal,
  type PredictRequest,
  type PredictResult,
} from '../domain/contracts';

export interface EngineDeps {
  db: Db;
  cache: ModelCache;
  llama: LlamaEngine;
  node: NodeHooks;
  /** Where webhook delivery workflows run. */
  controlQueue: string;
  /** Where batch inputs are read and their results written. */
  storage?: Storage;
  /** Present only where fixtures are enabled (tests, benchmarks). */
  echoFixture?: EchoFixtureEngine;
  /** ONNX Runtime, with what its tasks need: inputs to fetch and output files to store. */
  onnx?: { engine: OnnxEngine; storage: Storage; signer: UrlSigner; fetch: FetchInputDeps };
  /** How long a stream's chunks are gathered into one write (OutputStream's own default if unset). */
  streamBatchMs?: number;
}

/** How one input runs: as a prediction of its own (`live`), or as an item of a batch. */
export interface RunMode {
  live: boolean;
  heartbeat: (details: unknown) => void;
}

/** How long a prediction runs before its workflow hears that it started (see `predict`). */
export const START_ANNOUNCE_DELAY_MS = 100;
/** How often a generating prediction or a download heartbeats at most (tokens may come every
 * millisecond, download progress every MiB). */
const HEARTBEAT_EVERY_MS = 100;

/**
 * True at most once per HEARTBEAT_EVERY_MS: every heartbeat call converts its details for the SDK
 * even when it sends nothing, and a few a second carry cancellation soon enough.
 */
function heartbeatThrottle(): () => boolean {
  let last = 0;
  return () => {
    const now = performance.now();
    if (now - last < HEARTBEAT_EVERY_MS) return false;
    last = now;
    return true;
  };
}

const round = (n: number, digits = 3) => Number(n.toFixed(digits));
const concurrencyOf = (settings: Record<string, unknown> | undefined) =>
  typeof settings?.sequences === 'number' ? settings.sequences : undefined;
const idleTtlOf = (settings: Record<string, unknown> | undefined) =>
  typeof settings?.idleTtlSeconds === 'number' ? settings.idleTtlSeconds : undefined;

export function createEngineActivities({ db, cache, llama, node, controlQueue, echoFixture, onnx, storage, streamBatchMs }: EngineDeps) {
  const isLoaded = (versionId: string) =>
    llama.isLoaded(versionId) || echoFixture?.isLoaded(versionId) === true || onnx?.engine.isLoaded(versionId) === true;

  const loading = new Map<string, Promise<LoadResult>>();

  /**
   * Fixtures only (the echo fixture is there exactly where fixtures are enabled): a version's
   * `fixtureWarmUpHoldMs` holds each warm-up phase that long, so a test sees the download and
   * load progress on any machine instead of racing a warm-up that a fast one ends at once.
   */
  async function holdWarmUpPhase(settings: Record<string, unknown> | undefined): Promise<void> {
    const ms = echoFixture && typeof settings?.fixtureWarmUpHoldMs === 'number' ? settings.fixtureWarmUpHoldMs : 0;
    if (ms > 0) await Context.current().sleep(ms);
  }

  /** The local path of the draft model's GGUF where the version decodes with one. */
  async function draftFileOf(settings: Record<string, unknown> | undefined, ensure: (file: VersionFile) => Promise<string>): Promise<string | undefined> {
    const speculative = (settings as LlamaLoadSettings | undefined)?.speculative;
    if (speculative?.type !== 'draft') return undefined;
    const draft = await getVersion(db, speculative.version);
    const gguf = draft?.files.find((f) => f.path.endsWith('.gguf'));
    if (!gguf) throw kilnFailure('ModelLoadFailed', `the draft model ${speculative.model} (version ${speculative.version}) has no GGUF file`);
    return ensure(gguf);
  }

  async function load(versionId: string): Promise<LoadResult> {
    const ctx = Context.current();
    const version = await getVersion(db, versionId);
    if (!version) throw kilnFailure('ModelVersionNotFound', `model version ${versionId} does not exist`);
    if (version.engine === 'echo-fixture' && echoFixture) {
      echoFixture.load(versionId);
      await node.serve(versionId, version.memoryBytes, concurrencyOf(version.settings), idleTtlOf(version.settings));
      return { nodeId: node.nodeId, downloadSeconds: 0, loadSeconds: 0, downloadedBytes: 0, alreadyLoaded: false };
    }
    const loraBase = loraBaseOf(version.settings);
    if (loraBase) {
      return loadAdapterVersion({ cache, llama, node, loadBase: (id) => loadModel({ versionId: id }) }, version, loraBase, {
        concurrency: concurrencyOf(version.settings),
        idleTtlSeconds: idleTtlOf(version.settings),
      });
    }
    if (version.engine !== 'llama.cpp' && !(version.engine === 'onnxruntime' && onnx)) {
      throw kilnFailure('ModelLoadFailed', `engine ${version.engine} is not available on node ${node.nodeId}`);
    }
    await node.makeRoom(version.memoryBytes);
    const resumedFrom = ctx.info.heartbeatDetails as { bytes?: number } | undefined;
    if (resumedFrom?.bytes) log.info('resuming model download', { versionId, bytes: resumedFrom.bytes });
    const downloadStarted = performance.now();
    let downloadedBytes = 0;
    const paths: string[] = [];
    const beatDue = heartbeatThrottle();
    for (const file of version.files) {
      const cached = await cache.ensure(file, {
        signal: ctx.cancellationSignal,
        // The last progress of a file always goes out: the bar ends full.
        onProgress: (p) => {
          if (beatDue() || p.bytes >= p.total) ctx.heartbeat({ phase: 'download', ...p });
        },
      });
      downloadedBytes += cached.downloadedBytes;
      paths.push(cached.path);
    }
    // A draft model (speculative decoding) is fetched the way the version's own weights are.
    const draft = await draftFileOf(version.settings, async (file) => {
      const cached = await cache.ensure(file, { signal: ctx.cancellationSignal, onProgress: (p) => beatDue() && ctx.heartbeat({ phase: 'download', ...p }) });
      downloadedBytes += cached.downloadedBytes;
      return cached.path;
    });
    const downloadSeconds = downloadedBytes > 0 ? (performance.now() - downloadStarted) / 1000 : 0;
    await holdWarmUpPhase(version.settings);
    ctx.heartbeat({ phase: 'load' });
    await holdWarmUpPhase(version.settings);
    const loadStarted = performance.now();
    if (version.engine === 'onnxruntime' && onnx) {
      await onnx.engine.load(versionId, paths[engineFileIndex(version.files, '.onnx')]);
    } else {
      await llama.load(versionId, paths[engineFileIndex(version.files, '.gguf')], version.settings as LlamaLoadSettings, draft);
    }
    const loadSeconds = (performance.now() - loadStarted) / 1000;
    await node.serve(versionId, version.memoryBytes, concurrencyOf(version.settings), idleTtlOf(version.settings));
    log.info('model loaded', { versionId, downloadedBytes, downloadSeconds, loadSeconds });
    return {
      nodeId: node.nodeId,
      downloadSeconds: round(downloadSeconds),
      loadSeconds: round(loadSeconds),
      downloadedBytes,
      alreadyLoaded: false,
    };
  }

  /** Downloads (if not cached) and loads a version, then polls its queue. Concurrent calls share one load. */
  async function loadModel({ versionId }: { versionId: string }): Promise<LoadResult> {
    // A version being unloaded (idle, evicted) is loaded again from scratch once that is done.
    await node.settled(versionId);
    if (isLoaded(versionId)) {
      const version = await getVersion(db, versionId);
      await node.serve(versionId, version?.memoryBytes ?? 0, concurrencyOf(version?.settings), idleTtlOf(version?.settings), loraBaseOf(version?.settings));
      return { nodeId: node.nodeId, downloadSeconds: 0, loadSeconds: 0, downloadedBytes: 0, alreadyLoaded: true };
    }
    let pending = loading.get(versionId);
    if (!pending) {
      pending = load(versionId).finally(() => loading.delete(versionId));
      loading.set(versionId, pending);
    }
    return pending;
  }

  /**
   * Runs one input. A prediction (`live`) streams its output
   * and sends output webhooks; a batch item does none of that, and its heartbeats go through the
   * batch, which adds its own progress to them.
   */
  async function runPrediction(
    req: PredictRequest,
    ctx: Context,
    startedAt: string,
    queueSeconds: number,
    mode: RunMode = { live: true, heartbeat: (d) => ctx.heartbeat(d) },
  ): Promise<PredictResult> {
    {
      const task = taskType(req.task);
      if (!task) throw kilnFailure('InvalidInput', `task ${req.task} is not served here`);
      const parsed = task.input.safeParse(req.input);
      if (!parsed.success) throw kilnFailure('InvalidInput', parsed.error.message);
      if (req.task === 'echo-fixture') {
        if (!echoFixture) throw kilnFailure('InvalidInput', 'fixtures are not enabled on this node');
        const t0 = performance.now();
        // Heartbeats carry cancellation to the activity, and keep a long sleep alive.
        const beat = setInterval(() => mode.heartbeat({}), 1000);
        const r = await echoFixture.run(parsed.data as EchoFixtureInput, ctx.cancellationSignal, req.predictionId).finally(() => clearInterval(beat));
        if (r.aborted && !ctx.cancellationDetails?.cancelRequested) throw kilnFailure('EngineInterrupted', `interrupted on node ${node.nodeId}`);
        const seconds = (performance.now() - t0) / 1000;
        return {
          output: r.output,
          logs: [`echo fixture: slept ${(seconds * 1000).toFixed(0)} ms on node ${node.nodeId}`],
          metrics: { predict_time: round(seconds), queue_time: round(queueSeconds) },
          startedAt,
          aborted: r.aborted,
          hardware: 'fixture',
        };
      }
      if (req.task === 'remove-background') {
        if (!onnx) throw kilnFailure('InvalidInput', 'ONNX Runtime is not available on this node');
        return removeBackground(req, parsed.data as RemoveBackgroundInput, ctx, startedAt, queueSeconds, onnx, mode.heartbeat);
      }
      if (!task.engines.includes('llama.cpp')) {
        throw kilnFailure('InvalidInput', `task ${req.task} is not served by the llama.cpp engine`);
      }
      if (req.task === 'embeddings') {
        const texts = [(parsed.data as EmbeddingsInput).text].flat();
        const t0 = performance.now();
        const { vectors, tokens } = await llama.embed(req.versionId, texts, ctx.cancellationSignal);
        const seconds = (performance.now() - t0) / 1000;
        return {
          output: vectors,
          logs: [`Embedded ${texts.length} text(s), ${tokens} tokens, in ${seconds.toFixed(3)} s`],
          metrics: { predict_time: round(seconds), input_token_count: tokens, queue_time: round(queueSeconds) },
          startedAt,
          aborted: false,
          hardware: node.hardware,
        };
      }
      const input = parsed.data as TextGenerationInput;
      // A failed attempt's output is in the stream already: this attempt continues it.
      const continues = mode.live ? (req.continues ?? '') : '';

      let tokens = 0;
      const beatDue = heartbeatThrottle();
      const beat = setInterval(() => mode.heartbeat({ tokens }), 1000);
      const stream = mode.live
        ? new OutputStream(db, req.predictionId, (err) => log.warn('stream write failed', { error: err.message }), req.attempt, streamBatchMs)
        : undefined;
      const output: string[] = continues ? [continues] : [];
      const webhooks = mode.live
        ? new OutputWebhooks(ctx.client, controlQueue, req.snapshot, (err) => log.warn('could not start an output webhook', { error: err.message }), req.attempt)
        : undefined;
      // A later attempt has taken the stream over (this one was given up for lost): stop generating.
      const replaced = new AbortController();
      try {
        const g = await llama.generate(req.versionId, input, {
          signal: AbortSignal.any([ctx.cancellationSignal, replaced.signal]),
          continues,
          continuedTokens: req.continuedTokens,
          session: req.session,
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
          throw kilnFailure('EngineInterrupted', `generation interrupted on node ${node.nodeId}`);
        }
        const generated = g.outputTokens - g.continuedTokens;
        const tokensPerSecond = generated / Math.max(g.predictSeconds, 1e-6);
        const logs = [`Using seed: ${g.seed}`];
        if (continues) logs.push(`Continued the output of the failed attempt (${g.continuedTokens} tokens)`);
        logs.push(
          g.aborted
            ? `Canceled after ${g.outputTokens} tokens`
            : `Generated ${generated} tokens in ${g.predictSeconds.toFixed(3)} s (${tokensPerSecond.toFixed(1)} tokens/s, stop: ${g.stopReason})`,
        );
        const metrics: Record<string, number> = {
          queue_time: round(queueSeconds),
          predict_time: round(g.predictSeconds),
          input_token_count: g.inputTokens,
          cached_tokens: g.cachedTokens,
          output_token_count: g.outputTokens,
          tokens_per_second: round(tokensPerSecond, 2),
        };
        if (g.timeToFirstToken !== null) metrics.time_to_first_token = round(g.timeToFirstToken);
        if (g.draft) Object.assign(metrics, draftMetrics(g.draft));
        return { output: continues ? [continues, ...g.chunks] : g.chunks, logs, metrics, startedAt, aborted: g.aborted, hardware: node.hardware };
      } finally {
        clearInterval(beat);
        webhooks?.stop();
      }
    }
  }

  /** Fetches the image, cuts it out, and stores the PNG as a file of the prediction's account. */
  async function removeBackground(
    req: PredictRequest,
    input: RemoveBackgroundInput,
    ctx: Context,
    startedAt: string,
    queueSeconds: number,
    deps: NonNullable<EngineDeps['onnx']>,
    heartbeat: RunMode['heartbeat'],
  ): Promise<PredictResult> {
    const t0 = performance.now();
    let image;
    try {
      image = await fetchInput(input.image, deps.fetch, ctx.cancellationSignal);
    } catch (err) {
      if (err instanceof InputFetchError) throw kilnFailure('InvalidInput', `image: ${err.message}`);
      throw err;
    }
    const fetchSeconds = (performance.now() - t0) / 1000;
    heartbeat({ phase: 'inference' });
    const out = await deps.engine.removeBackground(req.versionId, image.bytes, ctx.cancellationSignal);
    // Named by prediction and attempt: the prediction's finish removes what failed attempts stored.
    const id = req.attempt === undefined ? newId() : outputFileId(req.predictionId, req.attempt);
    await deps.storage.putStream(fileKey(id), Readable.from([out.png]));
    await recordOutputFile(db, {
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
      output: fileRef(deps.signer, id),
      logs: [
        `Fetched the image (${(image.bytes.length / 1024).toFixed(0)} KiB) in ${fetchSeconds.toFixed(3)} s`,
        `Removed the background of ${out.width}×${out.height} in ${out.seconds.toFixed(3)} s on ${deps.engine.providers(req.versionId)?.join('+') ?? 'cpu'}`,
      ],
      metrics: { predict_time: round(seconds), queue_time: round(queueSeconds), image_count: 1 },
      startedAt,
      aborted: false,
      hardware: node.hardware,
    };
  }

  return {
    ...createBatchChunkActivities({
      storage,
      nodeId: node.nodeId,
      async runItem(req, ctx, heartbeat) {
        const done = node.begin(req.versionId);
        try {
          return await mappingEngineErrors(runPrediction)(req, ctx, new Date().toISOString(), 0, { live: false, heartbeat });
        } finally {
          done();
        }
      },
    }),

    loadModel: mappingEngineErrors(loadModel),

    async predict(req: PredictRequest): Promise<PredictResult> {
      const ctx = Context.current();
      const startedAt = new Date().toISOString();
      // Time in the model's fair queue: from this attempt's scheduling to an engine taking it.
      const queueSeconds = Math.max(0, Date.now() - ctx.info.currentAttemptScheduledTimestampMs) / 1000;
      const done = node.begin(req.versionId);
      // The hot path's writes are the workflow run's: after an operator's reset, an old run's lose.
      const writer = req.project ? currentRunWriter(ctx.client) : undefined;
      let processing: Promise<unknown> | undefined;
      // Only a prediction still running after a moment is shown as started: a short one goes
      // straight to its final state, which spares a projection write (and, where the workflow
      // projects, a workflow task and a search attribute update). Best effort: the result carries
      // the start too.
      const announce = setTimeout(() => {
        if (req.project) {
          processing = writePredictionSnapshot(db, processingSnapshot(req.snapshot, startedAt), writer, { existing: true }).catch((err: Error) =>
            log.warn('could not write processing', { error: err.message }),
          );
          return;
        }
        const started: PredictionStartedSignal = { startedAt, nodeId: node.nodeId };
        ctx.client.workflow
          .getHandle(predictionWorkflowId(req.predictionId))
          .signal(PREDICTION_STARTED_SIGNAL, started)
          .catch((err: Error) => log.warn('could not signal start', { error: err.message }));
      }, START_ANNOUNCE_DELAY_MS);
      // Heartbeats name the node: a workflow whose attempt timed out knows which node to avoid.
      const heartbeat = (details: unknown) => ctx.heartbeat({ ...(details as object), nodeId: node.nodeId });
      try {
        const result = await mappingEngineErrors(runPrediction)(req, ctx, startedAt, queueSeconds, { live: true, heartbeat });
        clearTimeout(announce);
        if (!req.project || result.aborted) return result;
        await processing;
        return await projectSucceeded(req, result, writer);
      } finally {
        clearTimeout(announce);
        done();
      }
    },
  };

  /**
   * The hot path's last writes, in one transaction: the final row (and its stream events), the
   * admission slot released, usage recorded. The result then carries completed_at, and the
   * workflow ends without a write of its own. A write that fails or is overtaken (the workflow
   * canceled and wrote a later revision) leaves the result as it is: the workflow finishes it.
   */
  async function projectSucceeded(req: PredictRequest, result: PredictResult, writer: RunWriter | undefined): Promise<PredictResult> {
    const completedAt = new Date().toISOString();
    const final = succeededSnapshot(req.snapshot, result, completedAt);
    try {
      const applied = await finishSucceededPrediction(db, final, usageOf(final, req.task, result.hardware), writer);
      if (!applied) return result;
      observePrediction(final);
      return { ...result, completedAt };
    } catch (err) {
      log.warn('could not write the final row; the workflow writes it', { error: (err as Error).message });
      return result;
    }
  }
}
