/**
 * The suite's lanes (infra/test.sh): each lane is a stack of its own with one jest worker. `order`
 * sorts the files longest first by their last durations, the order the workers take them in;
 * `summary` turns jest's results into the lines CI reads, and keeps each file's duration for the
 * next order.
 *
 *   test-lanes order FILES_JSON            prints the files of FILES_JSON (jest --listTests --json) as a JSON list, longest first
 *   test-lanes summary DIR TOTAL_S LANES   prints the summary of DIR/{results.json,jest.times}
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expectedDurations, longestFirst } from './test-order';

const ROOT = process.env.KILN_ROOT ?? process.cwd();
/** Durations of a whole run, committed; the last run's durations (kept under .data) win over them. */
const COMMITTED_TIMINGS = path.join(ROOT, 'test', 'timings.json');
const LAST_TIMINGS = path.join(ROOT, '.data', 'test-timings.json');

type Timings = Record<string, number>;

function readTimings(file: string): Timings {
  if (!existsSync(file)) return {};
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Timings;
  } catch {
    return {};
  }
}

const relative = (file: string) => path.relative(ROOT, file);

function order(filesJson: string): void {
  const files = JSON.parse(readFileSync(filesJson, 'utf8')) as string[];
  const timings = { ...readTimings(COMMITTED_TIMINGS), ...readTimings(LAST_TIMINGS) };
  const byPath = new Map(files.map((file) => [relative(file), file]));
  const sorted = longestFirst(expectedDurations([...byPath.keys()], timings)).map((rel) => byPath.get(rel)!);
  console.log(JSON.stringify(sorted));
}

interface JestFileResult {
  name: string;
  startTime: number;
  endTime: number;
}

interface JestResults {
  numPassedTests: number;
  numFailedTests: number;
  numTotalTestSuites: number;
  numRuntimeErrorTestSuites?: number;
  testResults: JestFileResult[];
}

function summary(dir: string, totalSeconds: number, lanes: number): void {
  const resultsAt = path.join(dir, 'results.json');
  const timesAt = path.join(dir, 'jest.times');
  // A jest that wrote nothing (a stack that did not start, checks that failed) counts as one failure.
  const results = existsSync(resultsAt) ? (JSON.parse(readFileSync(resultsAt, 'utf8')) as JestResults) : undefined;
  const [start, end] = existsSync(timesAt) ? readFileSync(timesAt, 'utf8').trim().split(/\s+/).map(Number) : [];
  const jest = start !== undefined && end !== undefined ? end - start : 0;
  console.log(`npm test took ${totalSeconds} s: jest ${jest} s, setup (install check, typecheck, lint, stack) ${totalSeconds - jest} s`);
  const tiers: Record<string, number> = {};
  const timings: Timings = readTimings(LAST_TIMINGS);
  for (const t of results?.testResults ?? []) {
    const tier = /\/test\/(unit|integration|e2e|replay)\//.exec(t.name)?.[1] ?? 'other';
    const seconds = (t.endTime - t.startTime) / 1000;
    tiers[tier] = (tiers[tier] ?? 0) + seconds;
    timings[relative(t.name)] = Math.round(seconds * 10) / 10;
  }
  writeFileSync(LAST_TIMINGS, `${JSON.stringify(timings, null, 2)}\n`);
  // In band on one lane a tier's files add up to its share of the wall time; over several lanes they add up to more.
  const over = lanes > 1 ? ` (file time, over ${lanes} lanes)` : '';
  console.log(
    `by tier: ${Object.entries(tiers)
      .map(([k, v]) => `${k} ${Math.round(v)} s`)
      .join(', ')}${over}`,
  );
  const passed = results?.numPassedTests ?? 0;
  const failed = results ? results.numFailedTests + (results.numRuntimeErrorTestSuites ?? 0) : 1;
  console.log(`by lane: ${lanes} lane(s), ${results?.numTotalTestSuites ?? 0} files`);
  console.log(`${passed} passed, ${failed} failed`);
}

const [command, ...args] = process.argv.slice(2);
if (command === 'order') order(args[0]);
else if (command === 'summary') summary(args[0], Number(args[1]), Number(args[2]));
else {
  console.error('usage: test-lanes order FILES_JSON | summary DIR TOTAL_S LANES');
  process.exit(2);
}
