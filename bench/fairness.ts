/**
 * Fair queuing under a noisy neighbour, with the echo fixture (kiln/echo-fixture: a sleep, so the
 * service time is exact and the engine is the bottleneck). In one run:
 *   - a quiet account's wait alone, then under a flood of a noisy account, with fairness on
 *     (each account its own fairness key) and off (both in one fairness group: one FIFO);
 *   - Jain's index of throughput across 4 equal-weight accounts flooding at once;
 *   - throughput shares of two accounts with weights 2:1.
 * "wait" is started_at − created_at (everything before the engine starts it); "queue" is the
 * engine-measured time in the model's task queue (metrics.queue_time). A second table splits the
 * quiet account's wait by stage, read from each prediction's workflow history, next to how busy
 * the machine's CPU was meanwhile: the stages are queues of tasks (fair-ordered) and the processes
 * that run them (shared by every account). A third table asks whether the model's queue served the
 * quiet account in fair order: for each of its predictions, when a slot next came free after its
 * task entered the queue (no queue that lets work finish can start it sooner) and how many of the
 * noisy account's tasks started between its arrival and its own start.
 * `--jitter`: fixture work varies uniformly by ± that share (mean unchanged): with exact work, a
 * flood that took every slot at once frees them together, a second apart, for as long as it lasts.
 */
import { Client, Connection } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { inArray } from 'drizzle-orm';
import { createAccount, createApiToken, updateAccount } from '../db/accounts';
import { closeDb, createDb, type Db } from '../db/client';
import { predictions } from '../db/schema';
import { predictionWorkflowId } from '../domain/contracts';
import { figure } from '../domain/prediction-metrics';
import { isTerminalStatus } from '../domain/statuses';
import { newId } from '../lib/ids';
import { busyShare, machineCpu } from './cpu';
import { API_URL, call, ms, percentile, saveResult, table } from './lib';

const EventType = temporal.api.enums.v1.EventType;

const ECHO = '/v1/models/kiln/echo-fixture/predictions';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Done {
  id: string;
  account: string;
  created: number;
  started: number;
  completed: number;
  queue: number;
}

/**
 * Waits for predictions by reading their rows straight from Postgres, twice a second, in one
 * query: polling the API for hundreds of predictions would load the very processes measured.
 */
async function finishAll(db: Db, ids: string[]): Promise<Done[]> {
  for (;;) {
    const rows = await db.select().from(predictions).where(inArray(predictions.id, ids));
    const ended = rows.filter((r) => isTerminalStatus(r.status));
    if (ended.length === ids.length) {
      const bad = ended.find((r) => r.status !== 'succeeded');
      if (bad) throw new Error(`prediction ${bad.id} ${bad.status}: ${bad.error}`);
      return rows.map((r) => ({
        id: r.id,
        account: r.accountId,
        created: r.createdAt.getTime(),
        started: r.startedAt!.getTime(),
        completed: r.completedAt!.getTime(),
        queue: (figure(r.metrics, 'queue_time') ?? 0) * 1000,
      }));
    }
    await sleep(500);
  }
}

/** One prediction's fixture work: `sleepMs`, varied by ± `jitter` of it. */
const workOf = (sleepMs: number, jitter: number) => Math.round(sleepMs * (1 + jitter * (2 * Math.random() - 1)));

async function burst(token: string, n: number, sleepMs: number, jitter: number): Promise<string[]> {
  const ids: string[] = [];
  // Sent in waves of 20 so the API is not the bottleneck being measured.
  for (let i = 0; i < n; i += 20) {
    const wave = await Promise.all(
      Array.from({ length: Math.min(20, n - i) }, () => call(token, ECHO, { input: { text: 'x', sleep_ms: workOf(sleepMs, jitter) } })),
    );
    ids.push(...wave.map((p) => p.id));
  }
  return ids;
}

/** The quiet account's calls, and how busy the machine's CPU was while they were made. */
async function spaced(token: string, n: number, gapMs: number, sleepMs: number, jitter: number): Promise<{ ids: string[]; busy: number }> {
  const ids: string[] = [];
  const cpu0 = machineCpu();
  for (let i = 0; i < n; i++) {
    ids.push((await call(token, ECHO, { input: { text: 'quiet', sleep_ms: workOf(sleepMs, jitter) } })).id);
    await sleep(gapMs);
  }
  return { ids, busy: busyShare(cpu0, machineCpu()) };
}

const waits = (d: Done[]) => d.map((x) => x.started - x.created);

/**
 * Predictions per second, the flood's and the quiet account's together, from the first create to
 * the last completion: both scenarios do the same work, and fairness only changes its order (the
 * flood alone would look slower with fairness on, since the quiet account's work goes in between).
 */
const throughput = (d: Done[]) => d.length / ((Math.max(...d.map((x) => x.completed)) - Math.min(...d.map((x) => x.created))) / 1000);

/** A waiting prediction's `queue.eta_seconds` as GET answered it, and when. */
interface EtaSample {
  id: string;
  readAt: number;
  etaSeconds: number;
  position: number;
}

/** One read of each prediction still waiting: what the API estimated then. */
async function sampleEtas(token: string, ids: string[]): Promise<EtaSample[]> {
  const reads = await Promise.all(ids.map(async (id) => ({ id, readAt: Date.now(), body: await call(token, `/v1/predictions/${id}`) })));
  return reads
    .filter((r) => r.body.queue?.eta_seconds != null)
    .map((r) => ({ id: r.id, readAt: r.readAt, etaSeconds: r.body.queue.eta_seconds, position: r.body.queue.position }));
}

/** Predicted start (read time + estimate) − actual start, in ms and as a share of the actual wait from the read. */
function etaErrors(samples: EtaSample[], done: Done[]) {
  const started = new Map(done.map((d) => [d.id, d.started]));
  return samples.flatMap((s) => {
    const actual = started.get(s.id);
    if (actual === undefined) return [];
    const error = s.readAt + s.etaSeconds * 1000 - actual;
    return [
      { error, share: error / Math.max(1, actual - s.readAt), position: s.position, eta: s.etaSeconds * 1000, wait: actual - s.readAt },
    ];
  });
}

interface Stages {
  /** From the API's row (created_at) to the workflow's start in history: the create's own path. */
  create: number;
  /** The first workflow task's time in the control task queue. */
  controlQueue: number;
  /** The first workflow task itself: admission, placement and scheduling the predict activity. */
  firstTask: number;
  /** The predict activity's time in the model's task queue. */
  modelQueue: number;
  /** When the predict activity entered the model's queue, and when it left it (epoch ms). */
  queuedAt: number;
  startedAt: number;
  /** From the activity's start in history to the engine's `started_at`. */
  engineStart: number;
}

async function stagesOf(client: Client, done: Done[]): Promise<Stages[]> {
  return Promise.all(
    done.map(async ({ id, created, started: engineStarted }) => {
      const events = (await client.workflow.getHandle(predictionWorkflowId(id)).fetchHistory()).events ?? [];
      const at = (type: number, match: (e: temporal.api.history.v1.IHistoryEvent) => boolean = () => true) => {
        const e = events.find((x) => x.eventType === type && match(x));
        if (!e) throw new Error(`prediction ${id}: no ${EventType[type]} in its history`);
        return { id: Number(e.eventId), ms: tsToMs(e.eventTime) };
      };
      const begun = at(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED);
      const scheduled = at(EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED);
      const started = at(EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED);
      const completed = at(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED);
      const predict = at(
        EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'predict',
      );
      const predictStarted = at(
        EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
        (e) => Number(e.activityTaskStartedEventAttributes?.scheduledEventId) === predict.id,
      );
      return {
        create: begun.ms - created,
        controlQueue: started.ms - scheduled.ms,
        firstTask: completed.ms - started.ms,
        modelQueue: predictStarted.ms - predict.ms,
        queuedAt: predict.ms,
        startedAt: predictStarted.ms,
        engineStart: engineStarted - predictStarted.ms,
      };
    }),
  );
}

/**
 * The model queue's order, for the quiet account's predictions under a flood: `slot`, how long
 * after entering the queue a slot next came free (the first start of anyone's prediction after
 * that moment, its own included); `behind`, the time from then to its own start; `jumped`, how
 * many of the flood's predictions started between its arrival and its start.
 */
function queueOrder(quiet: Stages[], flood: Done[], quietDone: Done[]) {
  const starts = [...flood.map((d) => d.started), ...quietDone.map((d) => d.started)].sort((a, b) => a - b);
  return quiet.map((q) => {
    const firstFree = starts.find((t) => t >= q.queuedAt) ?? q.startedAt;
    return {
      slot: firstFree - q.queuedAt,
      behind: Math.max(0, q.startedAt - firstFree),
      jumped: flood.filter((d) => d.started > q.queuedAt && d.started < q.startedAt).length,
    };
  });
}

export async function fairness(opts: { flood: number; quiet: number; sleepMs: number; jitter: number; gapMs?: number }) {
  // Quiet means the same share of the engine in every regime: 200 ms of work every 300 ms asks for
  // two thirds of one slot of eight, and so does 1 s every 1.5 s. At a fixed 300 ms, 1 s of work
  // asked for 3.3 slots, 83% of a fair half: the account then queued behind its own work.
  const gapMs = opts.gapMs ?? Math.max(300, Math.round(opts.sleepMs * 1.5));
  if (!(opts.jitter >= 0 && opts.jitter < 1))
    throw new Error(`--jitter is a share of the work, from 0 up to (not including) 1: got ${opts.jitter}`);
  const db = createDb(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/kiln', { max: 2 });
  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
  const client = new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default' });
  const run = newId().slice(0, 6);
  const account = async (name: string, settings: Parameters<typeof updateAccount>[2] = {}) => {
    const a = await createAccount(db, `bench-${name}-${run}`);
    await updateAccount(db, a.id, { maxRunning: 1000, maxQueued: 10_000, rateLimits: { 'echo-fixture': 100_000 }, ...settings });
    return (await createApiToken(db, a.id, 'bench')).token;
  };
  try {
    // Warm the fixture up so no scenario pays for placement.
    const warm = await account('warm');
    await call(warm, ECHO, { input: { text: 'warm' } }, { prefer: 'wait' });

    const quietSolo = await account('quiet-solo');
    const soloCalls = await spaced(quietSolo, opts.quiet, gapMs, opts.sleepMs, opts.jitter);
    const solo = { done: await finishAll(db, soloCalls.ids), ids: soloCalls.ids, busy: soloCalls.busy };

    const underFlood = async (sameGroup: boolean) => {
      const group = sameGroup ? `bench-fifo-${run}-${newId().slice(0, 4)}` : null;
      const noisy = await account(sameGroup ? 'noisy-fifo' : 'noisy-fair', { fairnessGroup: group });
      const quiet = await account(sameGroup ? 'quiet-fifo' : 'quiet-fair', { fairnessGroup: group });
      const flood = burst(noisy, opts.flood, opts.sleepMs, opts.jitter).then(async (ids) => ({
        ids,
        // Every tenth of the flood, read once as soon as the flood is in: estimates across the whole queue.
        etas: await sampleEtas(
          noisy,
          ids.filter((_, i) => i % 10 === 9),
        ),
      }));
      await sleep(500);
      const calls = await spaced(quiet, opts.quiet, gapMs, opts.sleepMs, opts.jitter);
      const { ids: noisyIds, etas } = await flood;
      const q = await finishAll(db, calls.ids);
      return { done: q, ids: calls.ids, busy: calls.busy, flood: await finishAll(db, noisyIds), etas };
    };
    const fair = await underFlood(false);
    const fifo = await underFlood(true);

    const row = (name: string, { done: d }: { done: Done[] }) => ({
      scenario: name,
      'wait p50': ms(percentile(waits(d), 50)),
      'wait p99': ms(percentile(waits(d), 99)),
      'queue p50': ms(
        percentile(
          d.map((x) => x.queue),
          50,
        ),
      ),
      'queue p99': ms(
        percentile(
          d.map((x) => x.queue),
          99,
        ),
      ),
    });
    const quietRows = [
      row('quiet alone', solo),
      row(`quiet under a ${opts.flood}-prediction flood, fairness on`, fair),
      row(`quiet under the flood, fairness off (one FIFO)`, fifo),
    ];
    const work = opts.jitter > 0 ? `${opts.sleepMs} ms ± ${Math.round(opts.jitter * 100)}%` : `${opts.sleepMs} ms`;
    table(`Quiet account (${opts.quiet} predictions ${gapMs} ms apart, each ${work} of fixture work, 8 engine slots)`, quietRows);
    const ratio = percentile(waits(fair.done), 99) / percentile(waits(solo.done), 99);
    const ratioOff = percentile(waits(fifo.done), 99) / percentile(waits(solo.done), 99);
    console.log(`p99 wait under flood / alone: fairness on ${ratio.toFixed(2)}×, off ${ratioOff.toFixed(2)}×`);
    const throughputOn = throughput([...fair.flood, ...fair.done]);
    const throughputOff = throughput([...fifo.flood, ...fifo.done]);
    console.log(
      `throughput under the flood (flood and quiet together): fairness on ${throughputOn.toFixed(2)}/s, off ${throughputOff.toFixed(2)}/s (on ÷ off ${(throughputOn / throughputOff).toFixed(2)}×)`,
    );

    const etaRow = (name: string, errors: ReturnType<typeof etaErrors>) => {
      const abs = errors.map((e) => Math.abs(e.error));
      const shares = errors.map((e) => Math.abs(e.share));
      return {
        scenario: name,
        samples: errors.length,
        '|error| p50 / p90': `${ms(percentile(abs, 50))} / ${ms(percentile(abs, 90))}`,
        '|error| ÷ actual wait p50 / p90': `${(percentile(shares, 50) * 100).toFixed(0)}% / ${(percentile(shares, 90) * 100).toFixed(0)}%`,
        'floor (p50)': '±25%',
        'mean signed error': ms(errors.reduce((a, e) => a + e.error, 0) / Math.max(1, errors.length)),
      };
    };
    const fairEta = etaErrors(fair.etas, fair.flood);
    const fifoEta = etaErrors(fifo.etas, fifo.flood);
    const etaRows = [etaRow('flood, fairness on', fairEta), etaRow('flood, fairness off', fifoEta)];
    table('Queue ETA: predicted start (read + eta_seconds) − actual start, for every tenth flood prediction read once', etaRows);

    // Each scenario's histories are read once, for both tables.
    const [soloStages, fairStages, fifoStages] = [
      await stagesOf(client, solo.done),
      await stagesOf(client, fair.done),
      await stagesOf(client, fifo.done),
    ];
    const p50p99 = <T>(items: T[], pick: (x: T) => number) =>
      `${percentile(items.map(pick), 50).toFixed(0)} / ${percentile(items.map(pick), 99).toFixed(0)} ms`;
    const stageRow = (name: string, run: { busy: number }, stages: Stages[]) => {
      const both = (pick: (s: Stages) => number) => p50p99(stages, pick);
      return {
        scenario: name,
        'create → workflow start p50 / p99': both((s) => s.create),
        'control queue p50 / p99': both((s) => s.controlQueue),
        'first workflow task': both((s) => s.firstTask),
        'model queue': both((s) => s.modelQueue),
        'then the engine': both((s) => s.engineStart),
        'machine CPU busy': `${(run.busy * 100).toFixed(0)}%`,
      };
    };
    const stageRows = [
      stageRow('quiet alone', solo, soloStages),
      stageRow('under the flood, fairness on', fair, fairStages),
      stageRow('under the flood, fairness off', fifo, fifoStages),
    ];
    table('Where the quiet account’s wait went (from workflow history), and the CPU while its calls were made', stageRows);

    const orderRow = (name: string, run: { done: Done[]; flood: Done[] }, stages: Stages[]) => {
      const order = queueOrder(stages, run.flood, run.done);
      const both = (pick: (o: (typeof order)[number]) => number) => p50p99(order, pick);
      return {
        scenario: name,
        'model queue p50 / p99': both((o) => o.slot + o.behind),
        'until a slot came free': both((o) => o.slot),
        'then until its start': both((o) => o.behind),
        'flood started ahead of it (max)': Math.max(...order.map((o) => o.jumped)),
      };
    };
    const orderRows = [orderRow('fairness on', fair, fairStages), orderRow('fairness off', fifo, fifoStages)];
    table(
      `The model queue's order for the quiet account under the flood (one slot interval: ${(opts.sleepMs / 8).toFixed(0)} ms)`,
      orderRows,
    );

    // Shares while every account still has a backlog: count starts up to the moment the first
    // account has had all its predictions started.
    const contention = async (weights: number[], perAccount: number) => {
      const tokens = await Promise.all(weights.map((w, i) => account(`share${i}-w${w}`, { fairnessWeight: w })));
      const ids = await Promise.all(tokens.map((t) => burst(t, perAccount, opts.sleepMs, opts.jitter)));
      const done = await Promise.all(ids.map((list) => finishAll(db, list)));
      const cutoff = Math.min(...done.map((d) => Math.max(...d.map((x) => x.started))));
      return done.map((d) => d.filter((x) => x.started <= cutoff).length);
    };
    const equal = await contention([1, 1, 1, 1], Math.ceil(opts.flood / 4));
    const sum = equal.reduce((a, b) => a + b, 0);
    const jain = (sum * sum) / (equal.length * equal.reduce((a, b) => a + b * b, 0));
    const weighted = await contention([2, 1], Math.ceil(opts.flood / 2));
    const shareRatio = weighted[0] / weighted[1];
    table('Throughput under contention', [
      { accounts: '4 × weight 1', 'started before the first drained': equal.join(' / '), result: `Jain's index ${jain.toFixed(3)}` },
      { accounts: 'weights 2 : 1', 'started before the first drained': weighted.join(' / '), result: `ratio ${shareRatio.toFixed(2)} : 1` },
    ]);
    const file = await saveResult('fairness', {
      api: API_URL,
      quiet: quietRows,
      stages: stageRows,
      order: orderRows,
      eta: etaRows,
      // Each estimate read: its position then, the estimate and the actual wait from the read (ms).
      etaSamples: {
        on: fairEta.map(({ position, eta, wait }) => ({ position, eta, wait })),
        off: fifoEta.map(({ position, eta, wait }) => ({ position, eta, wait })),
      },
      jitter: opts.jitter,
      gapMs,
      p99Ratio: { on: ratio, off: ratioOff },
      throughput: { on: throughputOn, off: throughputOff },
      jain,
      equalShares: equal,
      weightedShares: weighted,
      shareRatio,
    });
    console.log(`saved ${file}`);
  } finally {
    await closeDb(db);
    await connection.close();
  }
}
