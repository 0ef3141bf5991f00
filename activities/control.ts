/** Cheap activities run by the control worker: admission, placement and projection. */
import { ApplicationFailure, log } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { eq } from 'drizzle-orm';
import { LRUCache } from 'lru-cache';
import { admit, release } from '../db/admissions';
import type { Db } from '../db/client';
import { replicaLimits } from '../db/deployments';
import { attemptsBegun, beginAttempt } from '../db/events';
import { removeOrphanOutputFiles } from '../db/files';
import { getVersion } from '../db/models';
import { liveNodes } from '../db/nodes';
import { writePredictionSnapshot } from '../db/predictions';
import { accounts } from '../db/schema';
import { sessionNode } from '../db/session-affinity';
import { recordUsage, type UsageRecord, usageOf } from '../db/usage';
import { modelQueue, type Placement, type ReplicaLoad, type SplitPlacement } from '../domain/contracts';
import { kilnFailure } from '../domain/failures';
import {
  coldNodeAvoiding,
  freeBytes,
  holds,
  placementCandidates,
  replicaHolders,
  replicaNodeFor,
  replicaReason,
  servingNodes,
} from '../domain/node-placement';
import { type PredictionSnapshot } from '../domain/prediction-snapshot';
import { chooseSplit } from '../domain/prefill-split';
import { isTerminalStatus } from '../domain/statuses';
import { taskType } from '../domain/tasks';
import { tooLargeMessage } from '../lib/hardware';
import { loraBaseOf } from '../lib/lora';
import { observePrediction } from '../lib/metrics';
import type { Storage } from '../lib/storage';
import { lookEvery } from './look-loop';
import { currentRunWriter } from './run-writer';

/** x-session-affinity: whose session placement keeps on one node. */
type SessionOf = { accountId: string; session: string };

export interface ControlDeps {
  db: Db;
  /** Where output files live: a prediction's finish removes those of its failed attempts. */
  storage?: Pick<Storage, 'delete'>;
  /** Reads task queue backlogs for replica scaling; without it, no replica is added for a backlog. */
  temporal?: Client;
  replicas?: ReplicaSettings;
}

export interface ReplicaSettings {
  /** Tasks waiting per replica before another one is added. */
  backlogPerReplica: number;
  /** Replicas of a version no deployment bounds. */
  maxReplicas: number;
}

const DEFAULT_REPLICAS: ReplicaSettings = { backlogPerReplica: 8, maxReplicas: 4 };

/**
 * Every prediction reads its version and account at admission and placement: a few queries
 * each, on the hot path. Versions never change once pushed (their id is their content), so they
 * are kept a while; accounts change by hand (caps, disabling), so only for a second.
 */
function lookups(db: Db) {
  type Version = NonNullable<Awaited<ReturnType<typeof getVersion>>>;
  type Account = typeof accounts.$inferSelect;
  const versions = new LRUCache<string, Version>({
    max: 1000,
    ttl: 60_000,
    fetchMethod: async (id) => (await getVersion(db, id)) ?? undefined,
  });
  const accountsById = new LRUCache<string, Account>({
    max: 10_000,
    ttl: 1_000,
    fetchMethod: async (id) => (await db.query.accounts.findFirst({ where: eq(accounts.id, id) })) ?? undefined,
  });
  return { version: (id: string) => versions.fetch(id), account: (id: string) => accountsById.fetch(id) };
}

type Lookups = ReturnType<typeof lookups>;

/** Predictions waiting on the version's queue, by Temporal's own count (approximate, and cheap). */
async function backlog(client: Client | undefined, versionId: string): Promise<number> {
  if (!client) return 0;
  const res = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: modelQueue(versionId), kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    reportStats: true,
  });
  return Number(res.stats?.approximateBacklogCount ?? 0);
}

/** The replica scaler's step, and its looks while no load is under way. */
function replicaActivities(db: Db, client: Client | undefined, replicas: ReplicaSettings) {
  const steps = {
    /**
     * The replica scaler's look at every served version: one more replica where the backlog per
     * replica passed the threshold (up to max_instances, or the default cap), and replicas back
     * up to min_instances where a node holding one went away. Only nodes with room are used:
     * a replica for throughput is not worth evicting another model. At most one load per
     * version is under way at a time, so a burst does not grab every node at once.
     */
    async planReplicas({ loading }: { loading: ReplicaLoad[] }): Promise<ReplicaLoad[]> {
      const [live, limits] = await Promise.all([liveNodes(db), replicaLimits(db)]);
      const free = new Map(live.map((n) => [n.id, freeBytes(n)]));
      const holders = replicaHolders(live);
      const busy = new Set(loading.map((l) => l.versionId));
      const plan: ReplicaLoad[] = [];
      const versions = new Set([...holders.keys(), ...[...limits].filter(([, l]) => l.min > 0).map(([v]) => v)]);
      for (const versionId of versions) {
        if (busy.has(versionId)) continue;
        const on = holders.get(versionId) ?? new Set<string>();
        const bounds = limits.get(versionId) ?? { min: 0, max: replicas.maxReplicas };
        const reason = await replicaReason(on.size, bounds, replicas.backlogPerReplica, () => backlog(client, versionId));
        if (!reason) continue;
        const version = await getVersion(db, versionId);
        if (!version) continue;
        const node = replicaNodeFor(live, free, on, version.memoryBytes);
        if (!node) continue;
        free.set(node.id, (free.get(node.id) ?? 0) - version.memoryBytes);
        log.info('adding a replica', { versionId, nodeId: node.id, reason, replicas: on.size });
        plan.push({ versionId, nodeId: node.id });
      }
      return plan;
    },
  };
  return {
    ...steps,
    /**
     * The scaler's looks while no load is under way, `intervalMs` apart in one activity
     * (./look-loop.ts): the first plan that loads something, or none after `looks` looks.
     */
    async watchReplicas({ intervalMs, looks }: { intervalMs: number; looks: number }): Promise<ReplicaLoad[]> {
      let plan: ReplicaLoad[] = [];
      await lookEvery(
        () => steps.planReplicas({ loading: [] }),
        (found) => (plan = found).length > 0,
        { intervalMs, looks, name: 'replica planning' },
      );
      return plan;
    },
  };
}

/** The admission slots of an account (max_running). */
function admissionActivities(db: Db, cached: Lookups) {
  return {
    /**
     * Takes one of the account's admission slots (max_running). When they are all held, the
     * prediction waits (a plain error: Temporal retries with backoff) or, if the account says
     * so, fails with OverCapacity.
     */
    async admitPrediction({
      predictionId,
      accountId,
      versionId,
    }: {
      predictionId: string;
      accountId: string;
      versionId: string;
    }): Promise<void> {
      const [account, version] = await Promise.all([cached.account(accountId), cached.version(versionId)]);
      if (!account || account.disabled) throw kilnFailure('AccountDisabled', `account ${accountId} is disabled`);
      if (!version) {
        throw kilnFailure('ModelVersionNotFound', `model version ${versionId} does not exist`);
      }
      const { admitted, held } = await admit(db, predictionId, accountId, account.maxRunning);
      if (admitted) return;
      const message = `account ${account.username} has ${held} predictions admitted (max_running ${account.maxRunning})`;
      if (account.overCap === 'refuse') throw kilnFailure('OverCapacity', `${message}; this account refuses work over its cap`);
      throw new Error(`${message}; waiting for a slot`);
    },

    async releaseAdmission({ predictionId }: { predictionId: string }): Promise<void> {
      await release(db, predictionId);
    },
  };
}

/** Which node a version's predictions run on: one node, or a long prompt's prefill and decode nodes. */
function placementActivities(db: Db, cached: Lookups) {
  return {
    /**
     * A node that already serves the version, or else best fit: the live node with the least
     * free memory that still holds it, so big nodes stay free for big models (bin-packing).
     * No live node is a retryable fault: one may come up.
     */
    async placeModel({
      versionId,
      excludeNodes = [],
      session,
    }: {
      versionId: string;
      excludeNodes?: string[];
      session?: SessionOf;
    }): Promise<Placement> {
      const [version, live] = await Promise.all([cached.version(versionId), liveNodes(db)]);
      if (!version) throw kilnFailure('ModelVersionNotFound', `model version ${versionId} does not exist`);
      const candidates = placementCandidates(live, excludeNodes);
      if (candidates.length === 0) throw new Error('no engine node is up');
      const serving = servingNodes(candidates, versionId);
      // A node this prediction failed on may have lost what its row says it serves (its engine
      // restarts empty, and registers again only once up): it is asked to load, which answers at
      // once where the version is still loaded, instead of being sent work nothing polls for.
      const trusted = serving.filter((n) => !excludeNodes.includes(n.id));
      if (trusted.length > 0) {
        const any = trusted[Math.floor(Math.random() * trusted.length)].id;
        const ids = trusted.map((n) => n.id);
        return { nodeId: session ? await sessionNode(db, { ...session, versionId }, ids, any) : any, warm: true };
      }
      if (serving.length > 0) {
        const nodeId = serving[0].id;
        if (session) await sessionNode(db, { ...session, versionId }, [], nodeId);
        return { nodeId, warm: false };
      }
      // A LoRA adapter needs only its own context where its base is loaded, and its base too elsewhere.
      const loraBase = loraBaseOf(version.settings);
      const baseBytes = loraBase ? ((await cached.version(loraBase))?.memoryBytes ?? 0) : 0;
      const { node: best, need, fits } = coldNodeAvoiding(live, excludeNodes, { memoryBytes: version.memoryBytes, loraBase, baseBytes })!;
      if (!fits) throw kilnFailure('ModelTooLarge', tooLargeMessage(need, best));
      log.info('placing model', { versionId, nodeId: best.id, freeBytes: freeBytes(best) });
      if (session) await sessionNode(db, { ...session, versionId }, [], best.id);
      return { nodeId: best.id, warm: false };
    },

    /**
     * A long prompt's two nodes (domain/prefill-split.ts): the `prefill` node with the fewest prompt
     * tokens in flight and the `decode` node with the fewest active sequences and KV bytes, each
     * warm or to be warmed up; null where the roles are not both live for the version.
     */
    async placeSplit({ versionId, excludeNodes = [] }: { versionId: string; excludeNodes?: string[] }): Promise<SplitPlacement | null> {
      const [version, live] = await Promise.all([cached.version(versionId), liveNodes(db)]);
      if (!version) throw kilnFailure('ModelVersionNotFound', `model version ${versionId} does not exist`);
      const choice = chooseSplit(live, { versionId, memoryBytes: version.memoryBytes, excludeNodes });
      if (!choice) return null;
      const placed = (n: (typeof live)[number]): Placement => ({ nodeId: n.id, warm: holds(n, versionId) });
      log.info('splitting prefill and decode', { versionId, prefill: choice.prefill.id, decode: choice.decode.id });
      return { prefill: placed(choice.prefill), decode: placed(choice.decode) };
    },
  };
}

/** What a prediction's row and usage say: the projection of its workflow's state. */
function projectionActivities(db: Db, client: Client | undefined) {
  return {
    async projectPrediction(snapshot: PredictionSnapshot): Promise<void> {
      const applied = await writePredictionSnapshot(db, snapshot, currentRunWriter(client));
      // Counted once: a retried or late write of the same transition is not applied again.
      if (applied && isTerminalStatus(snapshot.status)) observePrediction(snapshot);
    },

    async recordUsage(record: UsageRecord): Promise<void> {
      await recordUsage(db, record);
    },
  };
}

type ControlSteps = ReturnType<typeof admissionActivities> &
  ReturnType<typeof placementActivities> &
  ReturnType<typeof projectionActivities>;

/** A prediction's first and last writes, each in one local activity, made of the steps above. */
function lifecycleActivities(db: Db, steps: ControlSteps, storage: ControlDeps['storage']) {
  /** Output files that no final output refers to: those of attempts that failed after storing theirs. */
  async function removeFailedAttemptsFiles(snapshot: PredictionSnapshot, task: string): Promise<void> {
    if (!storage || !taskType(task)?.outputFiles) return;
    const removed = await removeOrphanOutputFiles(db, storage, snapshot.id, await attemptsBegun(db, snapshot.id), snapshot.output);
    if (removed.length > 0) log.info('removed output files of failed attempts', { predictionId: snapshot.id, files: removed });
  }

  return {
    /**
     * A prediction's first steps in one local activity (one workflow activation instead of
     * three): its row, an admission slot (or a wait, retried, or OverCapacity), and a node. The
     * row is written first so the prediction is visible while it waits; writing it again on a
     * retry changes nothing. No node yet is not a failure here: the workflow places the model
     * itself, under placement's own time limit.
     */
    async beginPrediction({
      snapshot,
      session,
    }: {
      snapshot: PredictionSnapshot;
      session?: SessionOf;
    }): Promise<{ placement?: Placement }> {
      await steps.projectPrediction(snapshot);
      await steps.admitPrediction({ predictionId: snapshot.id, accountId: snapshot.accountId, versionId: snapshot.versionId });
      try {
        return { placement: await steps.placeModel({ versionId: snapshot.versionId, ...(session ? { session } : {}) }) };
      } catch (err) {
        if (err instanceof ApplicationFailure && err.nonRetryable) throw err;
        return {};
      }
    },

    /**
     * Attempt `attempt` begins after a failed one: fences the failed attempts' late writes out of
     * the stream and answers the output they left there, which a streaming task continues.
     */
    async beginAttempt({
      predictionId,
      attempt,
    }: {
      predictionId: string;
      attempt: number;
    }): Promise<{ continues: string; continuedTokens?: number }> {
      const { text, tokens } = await beginAttempt(db, predictionId, attempt);
      return { continues: text, ...(tokens !== undefined ? { continuedTokens: tokens } : {}) };
    },

    /** A prediction's last writes, side by side in one local activity: the slot, the row, the usage, failed attempts' files. */
    async finishPrediction({ snapshot, task, hardware }: { snapshot: PredictionSnapshot; task: string; hardware: string }): Promise<void> {
      await Promise.all([
        steps.releaseAdmission({ predictionId: snapshot.id }),
        steps.projectPrediction(snapshot),
        steps.recordUsage(usageOf(snapshot, task, hardware)),
        removeFailedAttemptsFiles(snapshot, task),
      ]);
    },
  };
}

export function createControlActivities({ db, temporal: client, replicas = DEFAULT_REPLICAS, storage }: ControlDeps) {
  const cached = lookups(db);
  const steps = {
    ...replicaActivities(db, client, replicas),
    ...projectionActivities(db, client),
    ...admissionActivities(db, cached),
    ...placementActivities(db, cached),
  };
  return { ...steps, ...lifecycleActivities(db, steps, storage) };
}
