/**
 * `npm run bench -- floor`: Kiln's cheapest prediction next to the least Temporal itself asks
 * for, in one invocation on the same server: kiln/echo-fixture (sleep_ms 0) through the HTTP API
 * and the bare one-activity workflow (bench/floor), closed loop at the same concurrency.
 */
import { Floor } from './floor/bare';
import { echoPrediction, kilnAgainstFloor } from './floor/compare';
import { apiToken, saveResult } from './lib';

export async function floorScenario(opts: { requests: number; concurrency: number[]; rounds: number }) {
  const token = await apiToken();
  // Warm: the fixture "model" is placed on a node once, and the API's connections are up.
  for (let i = 0; i < 10; i++) await echoPrediction(token, 'warm', 0);
  const floor = await Floor.start();
  const results = [];
  try {
    for (const concurrency of opts.concurrency) {
      const { kiln, bare } = await kilnAgainstFloor(token, floor, opts.requests, concurrency, opts.rounds);
      results.push({
        concurrency,
        kiln: { ...kiln, latencies: undefined, overheads: undefined },
        floor: { ...bare, latencies: undefined },
      });
    }
  } finally {
    await floor.stop();
  }
  console.log(`saved ${await saveResult('floor', results)}`);
}
