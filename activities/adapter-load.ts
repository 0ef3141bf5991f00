/**
 * Warming up a LoRA adapter version on a node: its base version first (loaded and served like
 * any version, or found loaded already), then the adapter file from the model cache, applied to
 * the base's weights in a context of its own. The adapter's queue is then polled like any version's.
 */
import { Context, log } from '@temporalio/activity';
import type { ModelVersion } from '../db/models';
import type { LoadResult } from '../domain/contracts';
import { kilnFailure } from '../domain/failures';
import type { LlamaLoadSettings, ModelFiles, TextEngine } from '../engines';
import { engineFileIndex } from '../lib/engine-file';
import { loraScaleOf } from '../lib/lora';
import { round } from './figures';
import type { NodeHooks } from './node-hooks';

export async function loadAdapterVersion(
  deps: { cache: ModelFiles; llama: TextEngine; node: NodeHooks; loadBase: (versionId: string) => Promise<LoadResult> },
  version: ModelVersion,
  base: string,
  settings: { concurrency?: number; idleTtlSeconds?: number },
): Promise<LoadResult> {
  const ctx = Context.current();
  if (version.engine !== 'llama.cpp') throw kilnFailure('ModelLoadFailed', `LoRA adapters run on llama.cpp, not ${version.engine}`);
  const baseLoad = await deps.loadBase(base);
  await deps.node.makeRoomForAdapter(base);
  await deps.node.makeRoom(version.memoryBytes);
  const started = performance.now();
  const file = version.files[engineFileIndex(version.files, '.gguf')];
  const cached = await deps.cache.ensure(file, {
    signal: ctx.cancellationSignal,
    onProgress: (p) => ctx.heartbeat({ phase: 'download', ...p }),
  });
  const downloadSeconds = cached.downloadedBytes > 0 ? (performance.now() - started) / 1000 : 0;
  ctx.heartbeat({ phase: 'load' });
  const loadStarted = performance.now();
  await deps.llama.loadAdapter(version.id, base, cached.path, {
    ...(version.settings as LlamaLoadSettings),
    loraScale: loraScaleOf(version.settings),
  });
  const loadSeconds = (performance.now() - loadStarted) / 1000;
  await deps.node.serve(version.id, version.memoryBytes, settings.concurrency, settings.idleTtlSeconds, base);
  log.info('LoRA adapter loaded', { versionId: version.id, base, downloadedBytes: cached.downloadedBytes, loadSeconds });
  return {
    nodeId: deps.node.nodeId,
    downloadSeconds: round(baseLoad.downloadSeconds + downloadSeconds),
    loadSeconds: round(baseLoad.loadSeconds + loadSeconds),
    downloadedBytes: baseLoad.downloadedBytes + cached.downloadedBytes,
    alreadyLoaded: false,
  };
}
