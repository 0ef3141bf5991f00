/**
 * Runs the floor (bench/floor/workflow.ts) in the benchmark's own invocation: two worker
 * processes (workflows, activities) on the same Temporal server and namespace as Kiln, and this
 * process as the client. Each run reports throughput, start→close latency and CPU by process.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { KilnAccount, KilnModel, KilnStatus } from '../../domain/search-attributes';
import { cpuBetween, cpuByProcess } from '../cpu';
import { pool } from '../lib';
import type { bareWorkflow, visibleWorkflow } from './workflow';

export interface LoadRun {
  requests: number;
  concurrency: number;
  seconds: number;
  /** Completed per second. */
  throughput: number;
  /** Client-side start → result of each (for Kiln: its e2e). */
  latencies: number[];
  /** CPU seconds by component over the run. */
  cpu: Record<string, number>;
  /** CPU seconds of the components that make up this side's stack. */
  stackCpu: number;
}

/** The visibility work of a prediction that `visibleWorkflow` adds to the floor, piece by piece. */
export interface Visibility {
  startAttributes: boolean;
  patch: boolean;
  finalStatus: boolean;
}

/** The components of the floor's stack: Temporal, its two workers, and its client (this process). */
export const FLOOR_COMPONENTS = ['temporal', 'floor workflow worker', 'floor activity worker', 'load generator'];

function startWorker(role: 'workflows' | 'activities', taskQueue: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'worker.ts'), role, taskQueue], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: process.env,
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`floor ${role} worker exited with ${code}`)));
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().includes('ready')) resolve(child);
    });
  });
}

export class Floor {
  private constructor(
    private client: Client,
    private connection: Connection,
    private workers: ChildProcess[],
    private queue: string,
  ) {}

  static async start(): Promise<Floor> {
    const queue = `bench-floor-${process.pid}`;
    const workers = await Promise.all([startWorker('workflows', queue), startWorker('activities', `${queue}-activity`)]);
    const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
    const client = new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default' });
    const floor = new Floor(client, connection, workers, queue);
    // Warm: the workflow bundle loaded, the sticky queue and the connections up.
    await floor.run(20, 4);
    return floor;
  }

  private pids(): Map<number, string> {
    return new Map([
      [this.workers[0].pid!, 'floor workflow worker'],
      [this.workers[1].pid!, 'floor activity worker'],
    ]);
  }

  /** One workflow, start to result: the bare one, or with `visibility` the floor plus the visibility work it names (`visibleWorkflow`). */
  async once(i: number, visibility?: Visibility): Promise<number> {
    const t0 = performance.now();
    const workflowId = `bench-floor-${process.pid}-${Date.now()}-${i}`;
    const bare = { activityQueue: `${this.queue}-activity`, text: `floor ${i}` };
    if (!visibility) {
      await this.client.workflow.execute<typeof bareWorkflow>('bareWorkflow', { workflowId, taskQueue: this.queue, args: [bare] });
    } else {
      await this.client.workflow.execute<typeof visibleWorkflow>('visibleWorkflow', {
        workflowId,
        taskQueue: this.queue,
        args: [{ ...bare, patch: visibility.patch, finalStatus: visibility.finalStatus }],
        ...(visibility.startAttributes
          ? {
              typedSearchAttributes: [
                { key: KilnAccount, value: 'bench' },
                { key: KilnModel, value: 'bench/floor' },
                { key: KilnStatus, value: 'starting' },
              ],
            }
          : {}),
      });
    }
    return performance.now() - t0;
  }

  /**
   * `requests` bare workflows (or visible ones, see `once`), `concurrency` at once (closed loop, as
   * the Kiln scenarios call the API); the CPU reading goes on `holdMs` after the last (as long as
   * Kiln's waited for its archive), so both sides count as much idle time.
   */
  async run(requests: number, concurrency: number, holdMs = 0, visibility?: Visibility): Promise<LoadRun> {
    return measure(
      requests,
      concurrency,
      FLOOR_COMPONENTS,
      this.pids(),
      (i) => this.once(i, visibility),
      () => sleep(holdMs),
    );
  }

  async stop(): Promise<void> {
    await this.connection.close();
    await Promise.all(
      this.workers.map(
        (w) =>
          new Promise<void>((resolve) => {
            if (w.exitCode !== null) return resolve();
            w.removeAllListeners('exit');
            w.once('exit', () => resolve());
            w.kill('SIGTERM');
          }),
      ),
    );
  }
}

/**
 * Runs `task` closed-loop and reads the CPU of every process around it. `settle`: work the run
 * leaves behind that is still its own (Kiln's copy of its histories): the CPU reading waits for
 * it, the throughput does not.
 */
export async function measure(
  requests: number,
  concurrency: number,
  components: string[],
  extra: Map<number, string>,
  task: (i: number) => Promise<number>,
  settle?: () => Promise<void>,
): Promise<LoadRun> {
  const cpu0 = cpuByProcess(extra);
  const t0 = performance.now();
  const latencies = await pool(requests, concurrency, task);
  const seconds = (performance.now() - t0) / 1000;
  await settle?.();
  const cpu = cpuBetween(cpu0, cpuByProcess(extra));
  const stackCpu = components.reduce((s, c) => s + (cpu[c] ?? 0), 0);
  return { requests, concurrency, seconds, throughput: requests / seconds, latencies, cpu, stackCpu };
}
