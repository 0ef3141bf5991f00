/**
 * `npm run bench -- visibility`: what a prediction's visibility work costs Temporal, measured on
 * the floor's own workflow in one run: bare, then with Kiln's three search attributes at start,
 * with one `patched()` (the SDK upserts `TemporalChangeVersion` beside its marker), with one
 * upsert at the end (the final `KilnStatus`), and with all three, as a prediction has them. The
 * variants take turns, each round starting one further along, so the machine's drift and what
 * one turn's closed workflows leave Temporal to do in the next fall on all alike; each turn is
 * read until half a second after its last workflow.
 */
import { Floor } from './floor/bare';
import { saveResult, table } from './lib';

const VARIANTS = [
  { name: 'floor (bare)', startAttributes: false, patch: false, finalStatus: false },
  { name: '+ search attributes at start', startAttributes: true, patch: false, finalStatus: false },
  { name: '+ one patched()', startAttributes: false, patch: true, finalStatus: false },
  { name: '+ one upsert at the end', startAttributes: false, patch: false, finalStatus: true },
  { name: 'all three (a prediction)', startAttributes: true, patch: true, finalStatus: true },
];

export async function visibilityCost(opts: { requests: number; rounds: number }) {
  const floor = await Floor.start();
  const sums = VARIANTS.map(() => ({ temporal: 0, workers: 0, requests: 0 }));
  try {
    for (let round = 0; round < opts.rounds; round++) {
      for (let k = 0; k < VARIANTS.length; k++) {
        const i = (round + k) % VARIANTS.length;
        const run = await floor.run(Math.ceil(opts.requests / opts.rounds), 16, 500, VARIANTS[i]);
        sums[i].temporal += run.cpu.temporal;
        sums[i].workers += run.cpu['floor workflow worker'] + run.cpu['floor activity worker'];
        sums[i].requests += run.requests;
      }
    }
  } finally {
    await floor.stop();
  }
  const per = (s: number, n: number) => (s * 1000) / n;
  const bare = per(sums[0].temporal, sums[0].requests);
  const rows = VARIANTS.map((v, i) => {
    const temporal = per(sums[i].temporal, sums[i].requests);
    return {
      workflow: v.name,
      'temporal ms/workflow': temporal.toFixed(2),
      'over the floor': i === 0 ? '' : `${temporal - bare >= 0 ? '+' : ''}${(temporal - bare).toFixed(2)}`,
      'workers ms/workflow': per(sums[i].workers, sums[i].requests).toFixed(2),
    };
  });
  table(`Visibility on the floor's workflow: ${sums[0].requests} of each, 16 at once, in ${opts.rounds} turns each`, rows);
  console.log(`saved ${await saveResult('visibility', rows)}`);
}
