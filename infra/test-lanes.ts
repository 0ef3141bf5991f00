/**
 * The suite's lanes (infra/test.sh): each lane is a stack of its own that runs its share of the test
 * files in band. `plan` splits the files over the lanes by their expected duration; `summary` adds the
 * lanes' jest results up into the lines CI reads, and keeps each file's duration for the next plan.
 *
 *   test-lanes plan LANES DIR < files.json      writes DIR/lane-<k>.files (one path a line), prints the lane count
 *   test-lanes summary DIR TOTAL_S LANES         prints the summary; DIR/lane-<k>.{files,results.json,times}
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type LaneFile, partitionByDuration } from './test-partition';

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

function plan(lanes: number, dir: string): void {
  const files = JSON.parse(readFileSync(0, 'utf8')) as string[];
  const timings = { ...readTimings(COMMITTED_TIMINGS), ...readTimings(LAST_TIMINGS) };
  const known = Object.values(timings).sort((a, b) => a - b);
  // A file never timed is taken as a median one.
  const fallback = known.length > 0 ? known[Math.floor(known.length / 2)] : 5;
  const planned: LaneFile[] = files.map((file) => ({ file, seconds: timings[relative(file)] ?? fallback }));
  const split = partitionByDuration(planned, lanes);
  split.forEach((lane, k) => writeFileSync(path.join(dir, `lane-${k}.files`), lane.files.map((f) => `${f}\n`).join('')));
  for (const [k, lane] of split.entries()) {
    console.error(`lane ${k}: ${lane.files.length} files, about ${Math.round(lane.seconds)} s by the last timings`);
  }
  console.log(split.length);
}

interface JestFileResult {
  name: string;
  startTime: number;
  endTime: number;
}

interface JestResults {
  numPassedTests: number;
  numFailedTests: number;
  numRuntimeErrorTestSuites?: number;
  testResults: JestFileResult[];
}

interface LaneOutcome {
  lane: number;
  files: number;
  passed: number;
  failed: number;
  jestSeconds?: number;
  results?: JestResults;
  start?: number;
  end?: number;
}

function laneOutcome(dir: string, lane: number): LaneOutcome {
  const filesAt = path.join(dir, `lane-${lane}.files`);
  const files = existsSync(filesAt) ? readFileSync(filesAt, 'utf8').split('\n').filter(Boolean).length : 0;
  const resultsAt = path.join(dir, `lane-${lane}.results.json`);
  const timesAt = path.join(dir, `lane-${lane}.times`);
  // A lane whose stack did not start, or whose jest wrote nothing, failed: each of its files counts as one failure.
  if (!existsSync(resultsAt)) return { lane, files, passed: 0, failed: Math.max(files, 1) };
  const results = JSON.parse(readFileSync(resultsAt, 'utf8')) as JestResults;
  const [start, end] = existsSync(timesAt) ? readFileSync(timesAt, 'utf8').trim().split(/\s+/).map(Number) : [];
  return {
    lane,
    files,
    passed: results.numPassedTests,
    failed: results.numFailedTests + (results.numRuntimeErrorTestSuites ?? 0),
    results,
    start,
    end,
    jestSeconds: start !== undefined && end !== undefined ? end - start : undefined,
  };
}

function summary(dir: string, totalSeconds: number, lanes: number): void {
  const outcomes = Array.from({ length: lanes }, (_, k) => laneOutcome(dir, k));
  const starts = outcomes.flatMap((o) => (o.start === undefined ? [] : [o.start]));
  const ends = outcomes.flatMap((o) => (o.end === undefined ? [] : [o.end]));
  const jest = starts.length > 0 ? Math.max(...ends) - Math.min(...starts) : 0;
  console.log(`npm test took ${totalSeconds} s: jest ${jest} s, setup (install check, typecheck, lint, stack) ${totalSeconds - jest} s`);
  const tiers: Record<string, number> = {};
  const timings: Timings = readTimings(LAST_TIMINGS);
  for (const o of outcomes) {
    for (const t of o.results?.testResults ?? []) {
      const tier = /\/test\/(unit|integration|e2e|replay)\//.exec(t.name)?.[1] ?? 'other';
      const seconds = (t.endTime - t.startTime) / 1000;
      tiers[tier] = (tiers[tier] ?? 0) + seconds;
      timings[relative(t.name)] = Math.round(seconds * 10) / 10;
    }
  }
  writeFileSync(LAST_TIMINGS, `${JSON.stringify(timings, null, 2)}\n`);
  // In band on one lane a tier's files add up to its share of the wall time; over several lanes they add up to more.
  const over = lanes > 1 ? ` (file time, over ${lanes} lanes)` : '';
  console.log(
    `by tier: ${Object.entries(tiers)
      .map(([k, v]) => `${k} ${Math.round(v)} s`)
      .join(', ')}${over}`,
  );
  console.log(
    `by lane: ${outcomes
      .map(
        (o) =>
          `lane ${o.lane} ${o.jestSeconds === undefined ? 'no jest run' : `jest ${o.jestSeconds} s`} (${o.files} files, ${o.passed} passed, ${o.failed} failed)`,
      )
      .join('; ')}`,
  );
  const passed = outcomes.reduce((n, o) => n + o.passed, 0);
  const failed = outcomes.reduce((n, o) => n + o.failed, 0);
  console.log(`${passed} passed, ${failed} failed`);
}

const [command, ...args] = process.argv.slice(2);
if (command === 'plan') plan(Number(args[0]), args[1]);
else if (command === 'summary') summary(args[0], Number(args[1]), Number(args[2]));
else {
  console.error('usage: test-lanes plan LANES DIR < files.json | summary DIR TOTAL_S LANES');
  process.exit(2);
}
