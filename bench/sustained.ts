/**
 * Sustained load: open-loop arrivals at fixed rates on kiln/echo-fixture (a test fixture that
 * sleeps for the asked time instead of inferring, so every millisecond measured is the stack's),
 * to find the highest rate served with p99 under 1 s, and which process spends the CPU.
 * Open loop: requests leave on schedule whether or not earlier ones have finished, as real
 * traffic does, so a stack that falls behind shows it in latency instead of hiding it.
 */
import os from 'node:os';
import { cpuBetween, cpuByProcess } from './cpu';
import { Floor } from './floor/bare';
import { kilnAgainstFloor } from './floor/compare';
import { API_URL, apiToken, ms, percentile, saveResult, table } from './lib';

interface Sample {
  latencyMs: number;
  ok: boolean;
}

async function runRate(token: string, rate: number, seconds: number, sleepMs: number) {
  const total = Math.round(rate * seconds);
  const samples: Promise<Sample>[] = [];
  const cpu0 = cpuByProcess();
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const sent = performance.now();
    samples.push(
      fetch(`${API_URL}/v1/models/kiln/echo-fixture/predictions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', prefer: 'wait=60' },
        body: JSON.stringify({ input: { text: `r${rate}-${i}`, sleep_ms: sleepMs } }),
      }).then(
        async (res) => {
          const body = (await res.json()) as { status?: string };
          return { latencyMs: performance.now() - sent, ok: res.ok && body.status === 'succeeded' };
        },
        () => ({ latencyMs: performance.now() - sent, ok: false }),
      ),
    );
  }
  const sendSeconds = (performance.now() - t0) / 1000;
  const done = await Promise.all(samples);
  const wall = (performance.now() - t0) / 1000;
  const cpu = cpuBetween(cpu0, cpuByProcess());
  const latencies = done.map((s) => s.latencyMs);
  const ok = done.filter((s) => s.ok).length;
  const cores = os.cpus().length;
  return {
    rate,
    offered: Number((total / sendSeconds).toFixed(1)),
    completed: Number((ok / wall).toFixed(1)),
    failed: done.length - ok,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    cpu,
    // Share of the machine (all cores) each component used while this rate ran.
    cpuShare: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, v / (wall * cores)])),
  };
}

export async function sustained(opts: { rates: number[]; seconds: number; sleepMs: number }) {
  const token = await apiToken();
  // Warm: the fixture "model" is placed on a node once.
  await fetch(`${API_URL}/v1/models/kiln/echo-fixture/predictions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', prefer: 'wait=60' },
    body: JSON.stringify({ input: { text: 'warm', sleep_ms: 0 } }),
  });
  const results = [];
  let best: number | undefined;
  for (const rate of opts.rates) {
    const r = await runRate(token, rate, opts.seconds, opts.sleepMs);
    results.push(r);
    const held = r.failed === 0 && r.p99 < 1000 && r.completed >= 0.95 * r.offered;
    console.log(
      `${rate}/s: completed ${r.completed}/s, p50 ${ms(r.p50)}, p99 ${ms(r.p99)}, failed ${r.failed}${held ? '' : '  ← not sustained'}`,
    );
    if (held) best = rate;
    else break;
  }
  table(
    `Sustained open-loop load on kiln/echo-fixture (sleep_ms ${opts.sleepMs}), ${opts.seconds} s per rate`,
    results.map((r) => ({
      'rate /s': r.rate,
      'offered /s': r.offered,
      'completed /s': r.completed,
      failed: r.failed,
      'e2e p50': ms(r.p50),
      'e2e p99': ms(r.p99),
    })),
  );
  table(
    'CPU share of the machine by component (100% = all cores busy)',
    results.map((r) => ({
      'rate /s': r.rate,
      ...Object.fromEntries(Object.entries(r.cpuShare).map(([k, v]) => [k, `${(v * 100).toFixed(1)}%`])),
    })),
  );
  console.log(best === undefined ? 'No rate held p99 < 1 s.' : `Highest rate sustained with p99 < 1 s: ${best}/s`);
  // The floor in the same run: closed loop at 16 at once, Kiln and the bare workflow side by side.
  const floor = await Floor.start();
  try {
    const { kiln, bare } = await kilnAgainstFloor(token, floor, 200, 16);
    console.log(`saved ${await saveResult('sustained', { best, results, floor: { kiln: kiln.throughput, bare: bare.throughput } })}`);
  } finally {
    await floor.stop();
  }
}
