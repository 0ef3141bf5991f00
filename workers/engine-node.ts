/**
 * An engine node: registers itself, heartbeats what it has loaded, answers warm-up requests on
 * `node:<id>`, and polls `model:<versionId>` for each version it holds, so that only nodes with
 * the model ever take its predictions.
 */
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Db } from '../db/client';
import { heartbeatNode, registerNode, removeNode } from '../db/nodes';
import type { LoadedVersion } from '../db/schema';
import type { Logger } from '../lib/logger';
import { announceReady } from '../lib/ready';
import { createEngineActivities, type NodeHooks } from '../activities/engine';
import type { EchoFixtureEngine } from './engines/echo-fixture';
import type { LlamaEngine } from './engines/llama-engine';
import type { ModelCache } from './model-cache';
import { modelQueue, nodeQueue } from '../workflows/types';

const HEARTBEAT_MS = 5_000;

export interface EngineNodeOptions {
  nodeId: string;
  controlQueue: string;
  memoryBytes: number;
  namespace: string;
  sequences: number;
}

export class EngineNode implements NodeHooks {
  readonly nodeId: string;
  hardware = 'cpu';
  private served = new Map<string, { worker: Worker; run: Promise<void>; memoryBytes: number; lastUsedAt: Date }>();
  private nodeWorker?: Worker;
  private timer?: NodeJS.Timeout;
  private activities: ReturnType<typeof createEngineActivities>;

  constructor(
    private opts: EngineNodeOptions,
    private deps: {
      db: Db;
      connection: NativeConnection;
      llama: LlamaEngine;
      cache: ModelCache;
      logger: Logger;
      echoFixture?: EchoFixtureEngine;
    },
  ) {
    this.nodeId = opts.nodeId;
    this.activities = createEngineActivities({
      db: deps.db,
      cache: deps.cache,
      llama: deps.llama,
      node: this,
      controlQueue: opts.controlQueue,
      echoFixture: deps.echoFixture,
    });
  }

  /** Runs until shutdown() is called. */
  async run(): Promise<void> {
    const gpu = await this.deps.llama.gpu();
    this.hardware = gpu ?? 'cpu';
    await registerNode(this.deps.db, { id: this.nodeId, memoryBytes: this.opts.memoryBytes, gpu });
    this.deps.logger.info({ nodeId: this.nodeId, gpu: gpu ?? 'cpu', memoryBytes: this.opts.memoryBytes }, 'engine node up');
    this.timer = setInterval(() => {
      this.heartbeat().catch((err: Error) => this.deps.logger.warn({ err: err.message }, 'node heartbeat failed'));
    }, HEARTBEAT_MS);
    this.nodeWorker = await Worker.create({
      connection: this.deps.connection,
      namespace: this.opts.namespace,
      taskQueue: nodeQueue(this.nodeId),
      activities: { loadModel: this.activities.loadModel },
      maxConcurrentActivityTaskExecutions: 4,
    });
    const running = this.nodeWorker.run();
    announceReady();
    await running;
  }

  loadedVersions(): LoadedVersion[] {
    return [...this.served].map(([versionId, s]) => ({
      versionId,
      memoryBytes: s.memoryBytes,
      lastUsedAt: s.lastUsedAt.toISOString(),
    }));
  }

  async heartbeat(): Promise<void> {
    await heartbeatNode(this.deps.db, this.nodeId, this.loadedVersions());
  }

  async serve(versionId: string, memoryBytes: number, concurrency?: number): Promise<void> {
    if (this.served.has(versionId)) return;
    const worker = await Worker.create({
      connection: this.deps.connection,
      namespace: this.opts.namespace,
      taskQueue: modelQueue(versionId),
      activities: { predict: this.activities.predict },
      // As many predictions as the context has sequences; the rest wait in the fair queue.
      maxConcurrentActivityTaskExecutions: concurrency ?? this.opts.sequences,
      // Cancellation reaches an activity through its heartbeat: keep that path short.
      maxHeartbeatThrottleInterval: '500 ms',
    });
    const run = worker.run().catch((err: Error) => this.deps.logger.error({ err: err.message, versionId }, 'model worker stopped'));
    this.served.set(versionId, { worker, run, memoryBytes, lastUsedAt: new Date() });
    await this.heartbeat();
  }

  touch(versionId: string): void {
    const s = this.served.get(versionId);
    if (s) s.lastUsedAt = new Date();
  }

  async shutdown(): Promise<void> {
    clearInterval(this.timer);
    // Leave the registry first so no new work is placed here while we drain.
    await removeNode(this.deps.db, this.nodeId).catch(() => {});
    for (const s of this.served.values()) s.worker.shutdown();
    await Promise.all([...this.served.values()].map((s) => s.run));
    if (this.nodeWorker && this.nodeWorker.getState() === 'RUNNING') this.nodeWorker.shutdown();
  }
}
