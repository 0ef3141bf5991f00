/**
 * An engine node: registers itself, heartbeats what it has loaded, answers warm-up requests on
 * `node:<id>`, and polls `model:<versionId>` for each version it holds, so that only nodes with
 * the model ever take its predictions.
 */
import { AsyncCompletionClient } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { NativeConnection, Worker, type WorkerPlugin } from '@temporalio/worker';
import { createEngineActivities } from '../activities/engine';
import type { EngineDeps } from '../activities/engine-deps';
import type { InflightLedger } from '../activities/inflight-ledger';
import type { NodeHooks } from '../activities/node-hooks';
import type { Db } from '../db/client';
import { replicaLimits } from '../db/deployments';
import { CREATE_NODES_MAX_AGE_MS, heartbeatNode, liveNodes, registerNode, removeNode } from '../db/nodes';
import { modelQueue, nodeQueue, prefillQueue, sessionQueue } from '../domain/contracts';
import { kilnFailure } from '../domain/failures';
import type { EngineRole } from '../domain/prefill-split';
import type { LoadedVersion } from '../domain/statuses';
import type { LlamaEngine } from '../engines/llama/engine';
import type { ModelCache } from '../engines/model-cache';
import type { OnnxEngine } from '../engines/onnx/engine';
import type { EchoFixtureEngine } from '../fixtures/echo-engine';
import { nodeCapacity } from '../lib/hardware';
import type { Logger } from '../lib/logger';
import { announceReady } from '../lib/ready';
import { pinnedVersions } from './pinned-replicas';
import { modelWorkerTuning } from './worker-tuning';

const HEARTBEAT_MS = 5_000;

/** Prefill tasks a `prefill` node takes from its queue at once; past them a prefill waits in the queue. */
const PREFILLS_TAKEN = 64;
/** A version leaves the registry this long before its queue stops being polled, so work placed just before still runs. */
const UNLOAD_GRACE_MS = 5_000;
/**
 * An evicted model's worker keeps polling this long after the node's row stopped listing it:
 * a create that read the row just before places its prediction there (a second-old read, and
 * the workflow's start), and the model still answers it instead of leaving it in an unpolled queue.
 */
const EVICTION_GRACE_MS = CREATE_NODES_MAX_AGE_MS + 1_000;
/** LoRA adapter contexts one base keeps at most; the least recently used idle one makes way. */
const MAX_ADAPTERS_PER_BASE = 8;
/**
 * How long the node must have run nothing (no prediction, no load) before it restarts to run a
 * llama.cpp build that arrived: a burst's next request usually comes sooner than this.
 */
const IDLE_BEFORE_RESTART_MS = 10_000;

interface Served {
  /** Polls the version's fair queue; a `prefill` node has none (it takes only prefills, on its own queue). */
  worker?: Worker;
  run: Promise<void>;
  memoryBytes: number;
  lastUsedAt: Date;
  active: number;
  idleTtlMs: number;
  draining: boolean;
  /** A LoRA adapter: the base version whose loaded weights it runs on. */
  base?: string;
}

export interface EngineNodeOptions {
  nodeId: string;
  controlQueue: string;
  memoryBytes: number;
  namespace: string;
  sequences: number;
  /** Idle versions are unloaded after this long (scale to zero), unless their settings say otherwise. */
  idleTtlMs: number;
  /** The share of this node one account's pinned replicas may hold (KILN_PINNED_NODE_SHARE). */
  pinnedNodeShare: number;
  /** How long a stream's chunks are gathered into one write (KILN_STREAM_BATCH_MS). */
  streamBatchMs?: number;
  /** KILN_ENGINE_ROLE: a `prefill` node polls `prefill:<id>` and no model or session queue (domain/prefill-split.ts). */
  role?: EngineRole;
  /**
   * Restart when idle onto a llama.cpp source build that arrived after the start (not in the test
   * suite, whose tests count the engine's restarts and keep whichever build is there).
   */
  switchToNewBuild?: boolean;
}

export class EngineNode implements NodeHooks {
  readonly nodeId: string;
  hardware = 'cpu';
  /** What placement may pack here: the configured memory on CPU, the free VRAM (less a reserve) on a GPU. */
  private memoryBytes: number;
  private served = new Map<string, Served>();
  /** Replicas deployments keep warm (min_instances) that are this node's: never unloaded for idleness or eviction. */
  private pinned = new Set<string>();
  /** Unloads under way: a load of the same version waits for them, so it never races one. */
  private unloading = new Map<string, Promise<void>>();
  private nodeWorker?: Worker;
  private sessionWorker?: Worker;
  private prefillWorker?: Worker;
  private timer?: NodeJS.Timeout;
  /**
   * Set when the node stopped to be started again (a new llama.cpp build arrived): the process
   * exits with RESTART_EXIT_CODE and its supervisor starts it at once.
   */
  restartRequested = false;
  private activities: ReturnType<typeof createEngineActivities>;

  private get role(): EngineRole {
    return this.opts.role ?? 'both';
  }

  constructor(
    private opts: EngineNodeOptions,
    private deps: {
      db: Db;
      connection: NativeConnection;
      /** Temporal worker plugins (tracing). */
      plugins?: WorkerPlugin[];
      llama: LlamaEngine;
      cache: ModelCache;
      logger: Logger;
      echoFixture?: EchoFixtureEngine;
      onnx?: NonNullable<EngineDeps['onnx']> & { engine: OnnxEngine };
      storage?: EngineDeps['storage'];
      /** The payload codec (lib/payload-refs.ts) every worker of this node decodes and encodes with. */
      dataConverter?: DataConverter;
      /** The predictions running here, kept on disk: a restarted process reports them lost at once. */
      inflight?: InflightLedger;
    },
  ) {
    this.nodeId = opts.nodeId;
    this.memoryBytes = opts.memoryBytes;
    this.activities = createEngineActivities({
      db: deps.db,
      cache: deps.cache,
      llama: deps.llama,
      node: this,
      controlQueue: opts.controlQueue,
      echoFixture: deps.echoFixture,
      onnx: deps.onnx,
      storage: deps.storage,
      streamBatchMs: opts.streamBatchMs,
      inflight: deps.inflight,
    });
  }

  /** What the previous process of this node was running when it died: failed now, so their workflows move on. */
  private async reportLost(): Promise<void> {
    const { inflight, connection, dataConverter, logger } = this.deps;
    if (!inflight) return;
    const completion = new AsyncCompletionClient({ connection, namespace: this.opts.namespace, dataConverter });
    const lost = await inflight.reportLost((token, failure) => completion.fail(token, failure));
    if (lost.length > 0)
      logger.warn({ predictions: lost.map((l) => l.predictionId) }, 'reported predictions the previous engine process left running');
  }

  /** Runs until shutdown() is called. */
  async run(): Promise<void> {
    // On a GPU, placement packs the card's VRAM (weights and KV cache live there), not RAM.
    const capacity = nodeCapacity({ gpu: await this.deps.llama.gpuState(), cpuMemoryBytes: this.opts.memoryBytes });
    this.memoryBytes = capacity.memoryBytes;
    this.hardware = capacity.sku;
    await registerNode(this.deps.db, { id: this.nodeId, memoryBytes: capacity.memoryBytes, gpu: capacity.gpu, role: this.role });
    // After the registration, which says nothing is loaded here any more: the lost attempts' retries place anew.
    await this.reportLost();
    this.deps.logger.info(
      { nodeId: this.nodeId, role: this.role, gpu: capacity.gpu ?? 'cpu', sku: capacity.sku, memoryBytes: capacity.memoryBytes },
      'engine node up',
    );
    this.timer = setInterval(() => {
      this.heartbeat().catch((err: Error) => this.deps.logger.warn({ err: err.message }, 'node heartbeat failed'));
      this.reapIdle();
      this.restartForNewBuild();
    }, HEARTBEAT_MS);
    this.nodeWorker = await Worker.create({
      connection: this.deps.connection,
      namespace: this.opts.namespace,
      dataConverter: this.deps.dataConverter,
      taskQueue: nodeQueue(this.nodeId),
      plugins: this.deps.plugins,
      activities: { loadModel: this.activities.loadModel },
      maxConcurrentActivityTaskExecutions: 4,
      // GET /v1/predictions/{id}/setup shows these heartbeats: by default every one after the
      // first would wait 24 s (80% of the 30 s heartbeat timeout), so a warm-up showed its first
      // download chunk and nothing more.
      maxHeartbeatThrottleInterval: '500 ms',
    });
    if (this.role === 'prefill') {
      // Prefills placed here, whatever their version: the prompt's evaluation, then its KV snapshot's upload.
      this.prefillWorker = await Worker.create({
        connection: this.deps.connection,
        namespace: this.opts.namespace,
        dataConverter: this.deps.dataConverter,
        taskQueue: prefillQueue(this.nodeId),
        plugins: this.deps.plugins,
        activities: { prefill: this.activities.prefill },
        // The engine evaluates them one at a time, in arrival order (engines/llama/prefill-turns.ts),
        // so a backlog waits there, heartbeating and counted in the tokens in flight that placement
        // reads. Taken from the queue at once: the prefill's schedule-to-start timeout is then a lost
        // node's, never a busy one's (bench/pd.ts, 2026-11-27: with as many as the sequences, 4 of 10
        // long prompts waited past it and were prefilled on the decode node, stalling its streams).
        ...modelWorkerTuning(PREFILLS_TAKEN),
      });
    } else {
      // Sessions (x-session-affinity) placed here, whatever their version: the engine keeps their
      // sequences. A split's decode step comes here too: it is placed on this very node.
      this.sessionWorker = await Worker.create({
        connection: this.deps.connection,
        namespace: this.opts.namespace,
        dataConverter: this.deps.dataConverter,
        taskQueue: sessionQueue(this.nodeId),
        plugins: this.deps.plugins,
        activities: { predict: this.activities.predict },
        // The engine's sequence pool is the limit: past it a session's request waits there for a sequence.
        ...modelWorkerTuning(this.opts.sequences * 4),
      });
    }
    const running = Promise.all([this.nodeWorker.run(), (this.sessionWorker ?? this.prefillWorker)!.run()]);
    announceReady();
    await running;
  }

  /** What placement may send here: draining versions are already gone from it. */
  loadedVersions(): LoadedVersion[] {
    return [...this.served]
      .filter(([, s]) => !s.draining)
      .map(([versionId, s]) => ({
        versionId,
        memoryBytes: s.memoryBytes,
        lastUsedAt: s.lastUsedAt.toISOString(),
        ...(s.base ? { loraFor: s.base } : {}),
      }));
  }

  async heartbeat(): Promise<void> {
    await heartbeatNode(this.deps.db, this.nodeId, this.loadedVersions(), this.deps.llama.currentLoad());
    const [limits, live] = await Promise.all([replicaLimits(this.deps.db), liveNodes(this.deps.db)]);
    this.pinned = pinnedVersions({
      nodeId: this.nodeId,
      nodeMemoryBytes: this.memoryBytes,
      share: this.opts.pinnedNodeShare,
      served: new Map([...this.served].filter(([, s]) => !s.draining).map(([id, s]) => [id, s.memoryBytes])),
      limits,
      live,
    });
  }

  async serve(versionId: string, memoryBytes: number, concurrency?: number, idleTtlSeconds?: number, base?: string): Promise<void> {
    await this.settled(versionId);
    if (this.served.has(versionId)) return;
    const worker =
      this.role === 'prefill'
        ? undefined
        : await Worker.create({
            connection: this.deps.connection,
            namespace: this.opts.namespace,
            dataConverter: this.deps.dataConverter,
            taskQueue: modelQueue(versionId),
            plugins: this.deps.plugins,
            activities: { predict: this.activities.predict, runBatchChunk: this.activities.runBatchChunk },
            // As many predictions (or batch chunks) as the context has sequences; the rest wait in the fair queue.
            ...modelWorkerTuning(concurrency ?? this.opts.sequences),
          });
    const run = worker
      ? worker.run().catch((err: Error) => this.deps.logger.error({ err: err.message, versionId }, 'model worker stopped'))
      : Promise.resolve();
    this.served.set(versionId, {
      worker,
      run,
      memoryBytes,
      lastUsedAt: new Date(),
      active: 0,
      idleTtlMs: idleTtlSeconds !== undefined ? idleTtlSeconds * 1000 : this.opts.idleTtlMs,
      draining: false,
      base,
    });
    await this.heartbeat();
  }

  /** Marks a prediction running on the version; the returned function marks it done. */
  begin(versionId: string): () => void {
    const s = this.served.get(versionId);
    if (!s) return () => undefined;
    // An adapter's prediction uses its base too: the base is neither idle nor evictable meanwhile.
    const base = s.base ? this.served.get(s.base) : undefined;
    const using = base ? [s, base] : [s];
    for (const u of using) {
      u.active += 1;
      u.lastUsedAt = new Date();
    }
    return () => {
      for (const u of using) {
        u.active -= 1;
        u.lastUsedAt = new Date();
      }
    };
  }

  /** Unloads the least recently used idle adapters of the base until one more fits under MAX_ADAPTERS_PER_BASE. */
  async makeRoomForAdapter(base: string): Promise<void> {
    const adapters = () => [...this.served].filter(([, s]) => s.base === base && !s.draining);
    while (adapters().length >= MAX_ADAPTERS_PER_BASE) {
      const idle = adapters()
        .filter(([id, s]) => s.active === 0 && !this.pinned.has(id))
        .sort((a, b) => +a[1].lastUsedAt - +b[1].lastUsedAt);
      if (idle.length === 0) return;
      this.deps.logger.info({ versionId: idle[0][0], base }, 'unloading the least recently used LoRA adapter');
      await this.unload(idle[0][0], EVICTION_GRACE_MS);
    }
  }

  /**
   * Frees memory for a version about to load by unloading the least recently used idle ones.
   * Throws (a retryable fault) when busy versions leave no room.
   */
  async makeRoom(bytes: number): Promise<void> {
    const used = () => [...this.served.values()].filter((s) => !s.draining).reduce((n, s) => n + s.memoryBytes, 0);
    while (used() + bytes > this.memoryBytes) {
      const idle = [...this.served]
        .filter(([id, s]) => !s.draining && s.active === 0 && !this.pinned.has(id))
        .sort((a, b) => +a[1].lastUsedAt - +b[1].lastUsedAt);
      if (idle.length === 0) {
        throw kilnFailure('NodeBusy', `node ${this.nodeId} has ${used()} of ${this.memoryBytes} bytes in use by busy models`);
      }
      this.deps.logger.info({ versionId: idle[0][0], forBytes: bytes }, 'evicting the least recently used model');
      await this.unload(idle[0][0], EVICTION_GRACE_MS);
    }
  }

  /** Scale to zero: versions idle past their TTL are unloaded. */
  private reapIdle(): void {
    const now = Date.now();
    for (const [versionId, s] of this.served) {
      if (!s.draining && s.active === 0 && !this.pinned.has(versionId) && now - s.lastUsedAt.getTime() > s.idleTtlMs) {
        this.deps.logger.info({ versionId, idleMs: now - s.lastUsedAt.getTime() }, 'unloading idle model');
        void this.unload(versionId).catch((err: Error) => this.deps.logger.warn({ err: err.message, versionId }, 'unload failed'));
      }
    }
  }

  /**
   * npm start builds llama.cpp for this CPU in the background while the prebuilt serves; once the
   * build is there and the node has been idle a while, it stops the way it stops for a restart
   * (leaves the registry, lets whatever still runs finish) and its supervisor starts a process
   * that runs the new build. A prediction that comes meanwhile waits in its queue and is placed
   * again, loading its model on the new process.
   */
  private restartForNewBuild(): void {
    if (this.opts.switchToNewBuild === false || this.restartRequested || !this.deps.llama.sourceBuildArrived()) return;
    const now = Date.now();
    const busy =
      this.unloading.size > 0 ||
      (this.nodeWorker?.getStatus().numInFlightActivities ?? 0) > 0 ||
      (this.sessionWorker?.getStatus().numInFlightActivities ?? 0) > 0 ||
      [...this.served.values()].some((s) => s.active > 0 || now - s.lastUsedAt.getTime() < IDLE_BEFORE_RESTART_MS);
    if (busy) return;
    this.restartRequested = true;
    this.deps.logger.info(
      { loaded: [...this.served.keys()] },
      'llama.cpp built for this CPU is ready: restarting the idle engine to run it',
    );
    void this.shutdown().catch((err: Error) => this.deps.logger.error({ err: err.message }, 'stopping for the restart failed'));
  }

  /** Resolves once no unload of the version is under way. */
  async settled(versionId: string): Promise<void> {
    await this.unloading.get(versionId);
  }

  /** Leaves the registry, keeps serving for a grace period, then stops polling and frees memory. */
  unload(versionId: string, graceMs = UNLOAD_GRACE_MS): Promise<void> {
    const pending = this.unloading.get(versionId);
    if (pending) return pending;
    const s = this.served.get(versionId);
    if (!s) return Promise.resolve();
    const done = this.drain(versionId, s, graceMs).finally(() => this.unloading.delete(versionId));
    this.unloading.set(versionId, done);
    return done;
  }

  private async drain(versionId: string, s: Served, graceMs: number): Promise<void> {
    s.draining = true;
    // Adapters run on this version's weights: they stop being served with it.
    const adapters = [...this.served].filter(([, a]) => a.base === versionId).map(([id]) => id);
    await Promise.all(adapters.map((id) => this.unload(id, graceMs)));
    await this.heartbeat().catch(() => undefined);
    if (graceMs > 0) await new Promise((resolve) => setTimeout(resolve, graceMs));
    s.worker?.shutdown();
    await s.run;
    if (this.served.get(versionId) === s) this.served.delete(versionId);
    await this.deps.llama.unload(versionId);
    this.deps.echoFixture?.unload(versionId);
    await this.deps.onnx?.engine.unload(versionId);
    await this.heartbeat().catch(() => undefined);
  }

  async shutdown(): Promise<void> {
    clearInterval(this.timer);
    // Leave the registry first so no new work is placed here while we drain.
    await removeNode(this.deps.db, this.nodeId).catch(() => {});
    for (const s of this.served.values()) s.worker?.shutdown();
    if (this.sessionWorker?.getState() === 'RUNNING') this.sessionWorker.shutdown();
    if (this.prefillWorker?.getState() === 'RUNNING') this.prefillWorker.shutdown();
    await Promise.all([...this.served.values()].map((s) => s.run));
    if (this.nodeWorker && this.nodeWorker.getState() === 'RUNNING') this.nodeWorker.shutdown();
  }
}
