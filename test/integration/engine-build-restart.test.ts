/**
 * npm start builds llama.cpp for this CPU in the background while the prebuilt serves; a process
 * cannot swap one for the other (their libraries share names), so once the build is there the
 * engine node stops cleanly when idle and its supervisor starts one that runs it. Real Temporal
 * and Postgres: the node registers, serves a version's queue, and a prediction marked running
 * holds the restart off until it is done and the node has been idle a while.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { NativeConnection } from '@temporalio/worker';
import { closeDb, type Db } from '../../db/client';
import { liveNodes } from '../../db/nodes';
import { LlamaEngine } from '../../engines/llama/engine';
import { ModelCache } from '../../engines/model-cache';
import { config } from '../../lib/config';
import { newId } from '../../lib/ids';
import { createLogger } from '../../lib/logger';
import { Storage } from '../../lib/storage';
import { EngineNode } from '../../workers/engine-node';
import { poll, testDb } from '../helpers';

jest.setTimeout(120_000);

/** The engine as it is while it waits for the build; `built` says the build has arrived. */
class AwaitingEngine extends LlamaEngine {
  built = false;
  override sourceBuildArrived(): boolean {
    return this.built;
  }
}

let db: Db;
let connection: NativeConnection;
let dir: string;

beforeAll(async () => {
  db = testDb();
  connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-build-restart-'));
});

afterAll(async () => {
  await connection.close();
  await closeDb(db);
  await rm(dir, { recursive: true, force: true });
});

test('the node restarts for a new llama.cpp build only once nothing has run on it for a while', async () => {
  const llama = new AwaitingEngine({ gpu: 'false', contextSize: 256, sequences: 1, threads: 1, sourceBuild: 'false' });
  const nodeId = `build-restart-${newId().slice(0, 8)}`;
  const node = new EngineNode(
    {
      nodeId,
      controlQueue: 'unused-control-queue',
      idleTtlMs: 600_000,
      memoryBytes: 2 ** 30,
      namespace: process.env.TEMPORAL_NAMESPACE ?? 'kiln-test',
      sequences: 1,
      pinnedNodeShare: 0.5,
    },
    {
      db,
      connection,
      llama,
      cache: new ModelCache(dir, Storage.fromConfig(config())),
      logger: createLogger('engine-build-restart', 'warn'),
    },
  );
  let stoppedAt: number | undefined;
  const running = node.run().then(() => (stoppedAt = Date.now()));
  await poll(
    () => liveNodes(db),
    (nodes) => nodes.some((n) => n.id === nodeId),
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  const version = `build-restart-version-${newId().slice(0, 8)}`;
  await node.serve(version, 2 ** 20);
  const done = node.begin(version);

  // The build is there, but a prediction runs: heartbeats past the idle wait come (each one checks
  // first, then writes) and the node stays.
  llama.built = true;
  const busySince = Date.now();
  await poll(
    () => liveNodes(db),
    (nodes) => nodes.some((n) => n.id === nodeId && n.heartbeatAt.getTime() > busySince + 11_000),
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  expect({ restartRequested: node.restartRequested, stoppedAt }).toEqual({ restartRequested: false, stoppedAt: undefined });

  const doneAt = Date.now();
  done();
  await running;
  expect(node.restartRequested).toBe(true);
  // Idle 10 s first, seen at a 5 s heartbeat.
  expect(stoppedAt! - doneAt).toBeGreaterThanOrEqual(10_000);
  expect(stoppedAt! - doneAt).toBeLessThan(30_000);
  // It left the registry, so placement loads the version anew on the process that replaces it.
  expect((await liveNodes(db)).map((n) => n.id)).not.toContain(nodeId);
  await llama.dispose();
});
