/**
 * What the stack costs while nobody uses it: each process's CPU, as a share of one core, over a
 * window with no predictions, after the stack has settled. The singleton loops (the reconciler's
 * and the replica scaler's looks, every 2 s by default) and the workers' polls are what remain.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { busyShare, cpuBetween, cpuByProcess, machineCpu } from './cpu';
import { saveResult, table } from './lib';

export interface IdleOptions {
  /** Seconds to wait first, for the start's own work (seeding, warm-up, the first looks) to pass. */
  settleSeconds: number;
  /** Seconds measured. */
  seconds: number;
}

export async function idle(o: IdleOptions): Promise<void> {
  await sleep(o.settleSeconds * 1000);
  const machineBefore = machineCpu();
  const before = cpuByProcess();
  await sleep(o.seconds * 1000);
  const byComponent = cpuBetween(before, cpuByProcess());
  const machine = busyShare(machineBefore, machineCpu());
  delete byComponent['load generator'];
  const share = (cpuSeconds: number) => `${((cpuSeconds / o.seconds) * 100).toFixed(1)} %`;
  const total = Object.values(byComponent).reduce((a, b) => a + b, 0);
  table(`An idle stack: CPU over ${o.seconds} s, as a share of one core (after ${o.settleSeconds} s to settle)`, [
    ...Object.entries(byComponent)
      .sort(([, a], [, b]) => b - a)
      .map(([component, seconds]) => ({ process: component, 'share of a core': share(seconds) })),
    { process: 'the stack', 'share of a core': share(total) },
  ]);
  console.log(`the whole machine was ${(machine * 100).toFixed(1)} % busy (all cores)`);
  console.log(`saved ${await saveResult('idle', { ...o, cpuSeconds: byComponent, machineBusy: machine })}`);
}
