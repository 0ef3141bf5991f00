/** Warming a version up on this node: download its files (if not cached), load them, poll its queue. */
import { Context, log } from '@temporalio/activity';
import { getVersion } from '../db/models';
import type { LoadResult } from '../domain/contracts';
import { kilnFailure } from '../domain/failures';
import type { VersionFile } from '../domain/statuses';
import type { LlamaLoadSettings } from '../engines';
import { engineFileIndex } from '../lib/engine-file';
import { loraBaseOf } from '../lib/lora';
import { loadAdapterVersion } from './adapter-load';
import type { EngineDeps } from './engine-deps';
import { round } from './figures';
import { heartbeatThrottle } from './heartbeat-throttle';

type Settings = Record<string, unknown> | undefined;

const concurrencyOf = (settings: Settings) => (typeof settings?.sequences === 'number' ? settings.sequences : undefined);
const idleTtlOf = (settings: Settings) => (typeof settings?.idleTtlSeconds === 'number' ? settings.idleTtlSeconds : undefined);
const notLoaded = (nodeId: string): LoadResult => ({
  nodeId,
  downloadSeconds: 0,
  loadSeconds: 0,
  downloadedBytes: 0,
  alreadyLoaded: false,
});

/**
 * Fixtures only (the echo fixture is there exactly where fixtures are enabled): a version's
 * `fixtureWarmUpHoldMs` holds each warm-up phase that long, so a test sees the download and
 * load progress on any machine instead of racing a warm-up that a fast one ends at once.
 */
async function holdWarmUpPhase(echoFixture: EngineDeps['echoFixture'], settings: Settings): Promise<void> {
  const ms = echoFixture && typeof settings?.fixtureWarmUpHoldMs === 'number' ? settings.fixtureWarmUpHoldMs : 0;
  if (ms > 0) await Context.current().sleep(ms);
}

/** The local path of the draft model's GGUF where the version decodes with one. */
async function draftFileOf(
  db: EngineDeps['db'],
  settings: Settings,
  ensure: (file: VersionFile) => Promise<string>,
): Promise<string | undefined> {
  const speculative = (settings as LlamaLoadSettings | undefined)?.speculative;
  if (speculative?.type !== 'draft') return undefined;
  const draft = await getVersion(db, speculative.version);
  const gguf = draft?.files.find((f) => f.path.endsWith('.gguf'));
  if (!gguf) throw kilnFailure('ModelLoadFailed', `the draft model ${speculative.model} (version ${speculative.version}) has no GGUF file`);
  return ensure(gguf);
}

/** The version's files (and its draft model's) in the local cache, heartbeating progress. */
async function download({ db, cache }: EngineDeps, version: { files: VersionFile[]; settings: Settings }) {
  const ctx = Context.current();
  const started = performance.now();
  let downloadedBytes = 0;
  const beatDue = heartbeatThrottle();
  const ensure = async (file: VersionFile, lastProgressAlways: boolean) => {
    const cached = await cache.ensure(file, {
      signal: ctx.cancellationSignal,
      // The last progress of a file always goes out: the bar ends full.
      onProgress: (p) => {
        if (beatDue() || (lastProgressAlways && p.bytes >= p.total)) ctx.heartbeat({ phase: 'download', ...p });
      },
    });
    downloadedBytes += cached.downloadedBytes;
    return cached.path;
  };
  const paths: string[] = [];
  for (const file of version.files) paths.push(await ensure(file, true));
  // A draft model (speculative decoding) is fetched the way the version's own weights are.
  const draft = await draftFileOf(db, version.settings, (file) => ensure(file, false));
  const seconds = downloadedBytes > 0 ? (performance.now() - started) / 1000 : 0;
  return { paths, draft, downloadedBytes, seconds };
}

export function createModelLoader(deps: EngineDeps) {
  const { db, cache, llama, node, echoFixture, onnx } = deps;
  const isLoaded = (versionId: string) =>
    llama.isLoaded(versionId) || echoFixture?.isLoaded(versionId) === true || onnx?.engine.isLoaded(versionId) === true;

  const loading = new Map<string, Promise<LoadResult>>();

  async function load(versionId: string): Promise<LoadResult> {
    const ctx = Context.current();
    const version = await getVersion(db, versionId);
    if (!version) throw kilnFailure('ModelVersionNotFound', `model version ${versionId} does not exist`);
    const serving = { concurrency: concurrencyOf(version.settings), idleTtlSeconds: idleTtlOf(version.settings) };
    if (version.engine === 'echo-fixture' && echoFixture) {
      echoFixture.load(versionId);
      await node.serve(versionId, version.memoryBytes, serving.concurrency, serving.idleTtlSeconds);
      return notLoaded(node.nodeId);
    }
    const loraBase = loraBaseOf(version.settings);
    if (loraBase)
      return loadAdapterVersion({ cache, llama, node, loadBase: (id) => loadModel({ versionId: id }) }, version, loraBase, serving);
    if (version.engine !== 'llama.cpp' && !(version.engine === 'onnxruntime' && onnx)) {
      throw kilnFailure('ModelLoadFailed', `engine ${version.engine} is not available on node ${node.nodeId}`);
    }
    await node.makeRoom(version.memoryBytes);
    const resumedFrom = ctx.info.heartbeatDetails as { bytes?: number } | undefined;
    if (resumedFrom?.bytes) log.info('resuming model download', { versionId, bytes: resumedFrom.bytes });
    const files = await download(deps, version);
    await holdWarmUpPhase(echoFixture, version.settings);
    ctx.heartbeat({ phase: 'load' });
    await holdWarmUpPhase(echoFixture, version.settings);
    const loadStarted = performance.now();
    if (version.engine === 'onnxruntime' && onnx) {
      await onnx.engine.load(versionId, files.paths[engineFileIndex(version.files, '.onnx')]);
    } else {
      await llama.load(versionId, files.paths[engineFileIndex(version.files, '.gguf')], version.settings as LlamaLoadSettings, files.draft);
    }
    const loadSeconds = (performance.now() - loadStarted) / 1000;
    await node.serve(versionId, version.memoryBytes, serving.concurrency, serving.idleTtlSeconds);
    log.info('model loaded', { versionId, downloadedBytes: files.downloadedBytes, downloadSeconds: files.seconds, loadSeconds });
    return {
      ...notLoaded(node.nodeId),
      downloadSeconds: round(files.seconds),
      loadSeconds: round(loadSeconds),
      downloadedBytes: files.downloadedBytes,
    };
  }

  /** Downloads (if not cached) and loads a version, then polls its queue. Concurrent calls share one load. */
  async function loadModel({ versionId }: { versionId: string }): Promise<LoadResult> {
    // A version being unloaded (idle, evicted) is loaded again from scratch once that is done.
    await node.settled(versionId);
    if (isLoaded(versionId)) {
      const version = await getVersion(db, versionId);
      await node.serve(
        versionId,
        version?.memoryBytes ?? 0,
        concurrencyOf(version?.settings),
        idleTtlOf(version?.settings),
        loraBaseOf(version?.settings),
      );
      return { ...notLoaded(node.nodeId), alreadyLoaded: true };
    }
    let pending = loading.get(versionId);
    if (!pending) {
      pending = load(versionId).finally(() => loading.delete(versionId));
      loading.set(versionId, pending);
    }
    return pending;
  }

  return { loadModel, isLoaded };
}
