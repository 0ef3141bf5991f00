/**
 * Kiln next to the floor in one invocation: the same closed-loop load on kiln/echo-fixture (through
 * the HTTP API, `Prefer: wait`) and on the bare workflow, CPU per prediction by process and in
 * total, throughput and latency, and the ratios the targets are stated in.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { archivedThrough } from '../../activities/history-archive';
import { predictionWorkflowId } from '../../domain/contracts';
import { config } from '../../lib/config';
import { Storage } from '../../lib/storage';
import { API_URL, ms, percentile, table } from '../lib';
import { FLOOR_COMPONENTS, type Floor, type LoadRun, measure } from './bare';

/**
 * The processes of Kiln's stack (the HTTP load generator is not one of them). MinIO is one: it
 * holds the history archive and payloads stored by reference. The floor uses none.
 */
export const KILN_COMPONENTS = ['temporal', 'postgres', 'minio', 'api', 'control-worker', 'engine-worker'];

export interface KilnRun extends LoadRun {
  /** total_time − predict_time of each prediction, ms. */
  overheads: number[];
  /** How long the reading waited after the last answer for the archive's copy of its histories. */
  settleMs: number;
}

export async function echoPrediction(token: string, text: string, sleepMs: number) {
  const res = await fetch(`${API_URL}/v1/models/kiln/echo-fixture/predictions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', prefer: 'wait=60' },
    body: JSON.stringify({ input: { text, sleep_ms: sleepMs } }),
  });
  const body = (await res.json()) as { id: string; status?: string; metrics?: { total_time: number; predict_time: number } };
  if (!res.ok || body.status !== 'succeeded') throw new Error(`prediction ${body.id}: ${res.status} ${body.status}`);
  return body;
}

/**
 * Until the reconciler has copied the histories of `ids`' runs to the bucket: its mark passes the
 * last of their close times. A prediction's cost includes its archived history, and a reading
 * that stopped at the last answer would leave that copy to whatever ran next (the floor's turn).
 */
export async function historiesArchived(ids: string[]): Promise<void> {
  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
  try {
    const client = new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default' });
    const closed = await Promise.all(
      ids.map(async (id) => {
        const handle = client.workflow.getHandle(predictionWorkflowId(id));
        await handle.result();
        return handle.describe();
      }),
    );
    const last = Math.max(...closed.map((d) => d.closeTime?.getTime() ?? 0));
    const storage = Storage.fromConfig(config());
    const deadline = Date.now() + 30_000;
    for (;;) {
      const through = (await archivedThrough(storage))?.getTime() ?? 0;
      if (through >= last) return;
      if (Date.now() > deadline) {
        console.warn('the history archive did not catch up within 30 s: its copying is partly left out');
        return;
      }
      await sleep(200);
    }
  } finally {
    await connection.close();
  }
}

/** `requests` echo-fixture predictions, `concurrency` at once. */
export async function runKiln(token: string, requests: number, concurrency: number, sleepMs = 0): Promise<KilnRun> {
  const overheads: number[] = [];
  // The runs that answered last: the others closed before them.
  const last: string[] = [];
  let settleMs = 0;
  const run = await measure(
    requests,
    concurrency,
    KILN_COMPONENTS,
    new Map(),
    async (i) => {
      const t0 = performance.now();
      const p = await echoPrediction(token, `floor ${i}`, sleepMs);
      overheads.push((p.metrics!.total_time - p.metrics!.predict_time) * 1000);
      last.push(p.id);
      if (last.length > concurrency) last.shift();
      return performance.now() - t0;
    },
    async () => {
      const t0 = performance.now();
      await historiesArchived(last);
      settleMs = performance.now() - t0;
    },
  );
  return { ...run, overheads, settleMs };
}

const perOp = (run: LoadRun, component: string) => ((run.cpu[component] ?? 0) * 1000) / run.requests;
const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}×` : '-');

/**
 * Both sides, then the table: Kiln's figures, the floor's beside them, and Kiln ÷ floor. They take
 * turns, `rounds` times, each with its share of `requests`: on a shared VM the machine's speed
 * drifts from one minute to the next (the same side measured twice in a row differed by a third),
 * and taking turns gives both sides the same drift.
 */
export async function kilnAgainstFloor(token: string, floor: Floor, requests: number, concurrency: number, rounds = 1) {
  const kilnRuns: KilnRun[] = [];
  const bareRuns: LoadRun[] = [];
  for (let r = 0; r < rounds; r++) {
    const share = Math.floor(requests / rounds) + (r < requests % rounds ? 1 : 0);
    const kiln = await runKiln(token, share, concurrency);
    kilnRuns.push(kiln);
    bareRuns.push(await floor.run(share, concurrency, kiln.settleMs));
  }
  const kiln = {
    ...mergeRuns(kilnRuns),
    overheads: kilnRuns.flatMap((k) => k.overheads),
    settleMs: kilnRuns.reduce((a, k) => a + k.settleMs, 0),
  };
  const bare = mergeRuns(bareRuns);
  const turns = `${rounds > 1 ? `, in ${rounds} turns each` : ''}; CPU read until Kiln's histories were archived (${(kiln.settleMs / 1000).toFixed(1)} s in all) and as long after the floor's`;
  printComparison(
    `Kiln (kiln/echo-fixture, sleep_ms 0, Prefer: wait) against the bare-Temporal floor: ${requests} each${turns}, ${concurrency} at once`,
    kiln,
    bare,
  );
  return { kiln, bare };
}

/** Runs of one side as one: counts and CPU added up, throughput over their summed time. */
function mergeRuns(runs: LoadRun[]): LoadRun {
  const requests = runs.reduce((a, r) => a + r.requests, 0);
  const seconds = runs.reduce((a, r) => a + r.seconds, 0);
  const cpu: Record<string, number> = {};
  for (const r of runs) for (const [k, v] of Object.entries(r.cpu)) cpu[k] = (cpu[k] ?? 0) + v;
  return {
    requests,
    concurrency: runs[0].concurrency,
    seconds,
    throughput: requests / seconds,
    latencies: runs.flatMap((r) => r.latencies),
    cpu,
    stackCpu: runs.reduce((a, r) => a + r.stackCpu, 0),
  };
}

export function printComparison(title: string, kiln: KilnRun, bare: LoadRun): void {
  const rows: Array<Record<string, string | number>> = [];
  const row = (process: string, k: string, f: string) => rows.push({ process, 'kiln ms/prediction': k, 'floor ms/workflow': f });
  for (const c of [
    'temporal',
    'postgres',
    'minio',
    'api',
    'control-worker',
    'engine-worker',
    'floor workflow worker',
    'floor activity worker',
  ]) {
    row(c, KILN_COMPONENTS.includes(c) ? perOp(kiln, c).toFixed(2) : '-', FLOOR_COMPONENTS.includes(c) ? perOp(bare, c).toFixed(2) : '-');
  }
  // The floor's client is its API; Kiln's HTTP client is not part of Kiln.
  row('load generator', `(${perOp(kiln, 'load generator').toFixed(2)}, not counted)`, perOp(bare, 'load generator').toFixed(2));
  // Shown, not counted: other checkouts' databases and the server's own processes share the machine.
  row(
    'postgres (others)',
    `(${perOp(kiln, 'postgres (others)').toFixed(2)}, not counted)`,
    `(${perOp(bare, 'postgres (others)').toFixed(2)}, not counted)`,
  );
  const kilnCpu = (kiln.stackCpu * 1000) / kiln.requests;
  const bareCpu = (bare.stackCpu * 1000) / bare.requests;
  rows.push({
    process: 'TOTAL (stack)',
    'kiln ms/prediction': kilnCpu.toFixed(2),
    'floor ms/workflow': bareCpu.toFixed(2),
    'kiln ÷ floor': ratio(kilnCpu, bareCpu),
  });
  // The Temporal server may serve other stacks at the same time (a shared machine): without it, each side's own processes.
  const kilnOwn = kilnCpu - perOp(kiln, 'temporal');
  const bareOwn = bareCpu - perOp(bare, 'temporal');
  rows.push({
    process: 'TOTAL without temporal',
    'kiln ms/prediction': kilnOwn.toFixed(2),
    'floor ms/workflow': bareOwn.toFixed(2),
    'kiln ÷ floor': ratio(kilnOwn, bareOwn),
  });
  table(`${title}\nCPU per prediction by process (from /proc)`, rows);
  table('Throughput and latency', [
    {
      side: 'kiln',
      'per s': kiln.throughput.toFixed(1),
      'e2e p50': ms(percentile(kiln.latencies, 50)),
      'e2e p99': ms(percentile(kiln.latencies, 99)),
      'total−predict p50': ms(percentile(kiln.overheads, 50)),
      'total−predict p99': ms(percentile(kiln.overheads, 99)),
    },
    {
      side: 'floor',
      'per s': bare.throughput.toFixed(1),
      'e2e p50': ms(percentile(bare.latencies, 50)),
      'e2e p99': ms(percentile(bare.latencies, 99)),
      'total−predict p50': '(start→close = e2e)',
      'total−predict p99': '',
    },
  ]);
  console.log(
    `ratios: CPU/prediction ${ratio(kilnCpu, bareCpu)} (target ≤ 1.3×; without temporal ${ratio(kilnOwn, bareOwn)}), throughput ${ratio(kiln.throughput, bare.throughput)} (target ≥ 0.8×), ` +
      `total−predict p50 ÷ floor start→close p50 ${ratio(percentile(kiln.overheads, 50), percentile(bare.latencies, 50))}, ` +
      `e2e p50 ÷ floor ${ratio(percentile(kiln.latencies, 50), percentile(bare.latencies, 50))}`,
  );
}
