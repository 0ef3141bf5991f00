/**
 * Issue 37's target: another account's request p90 while one account holds SSE streams up to its
 * cap is at most 1.2× its p90 alone. The noisy account keeps one kiln/tiny-llama prediction
 * generating for the whole run (a new one when it ends), so its engine work is there in both
 * phases and only the streams differ. Phases alternate (alone, beside the streams, …) so the
 * machine's drift falls on both alike. The quiet account's request is a read of its own finished
 * prediction: what the streams compete for is the API process and its Postgres pool.
 */
import { createAccount, createApiToken } from '../db/accounts';
import { closeDb, createDb } from '../db/client';
import { newId } from '../lib/ids';
import { API_URL, call, ms, percentile, saveResult, table } from './lib';

export interface StreamIsolationOptions {
  /** Quiet requests per phase and round. */
  requests: number;
  rounds: number;
  /** Tokens each noisy prediction generates (min_tokens = max_tokens). */
  tokens: number;
}

/** The ratio the issue allows: beside the streams ≤ 1.2 × alone. */
const FLOOR = 1.2;

interface HeldStream {
  done: Promise<void>;
  abort: () => void;
}

/** Opens one SSE stream and reads it to its end (or an abort), counting its events. */
function holdStream(url: string, token: string, counts: { events: number; refused: number }): HeldStream {
  const controller = new AbortController();
  const done = (async () => {
    const res = await fetch(url, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' }, signal: controller.signal });
    if (res.status !== 200 || !res.body) {
      counts.refused += 1;
      await res.body?.cancel();
      return;
    }
    const decoder = new TextDecoder();
    for await (const chunk of res.body) counts.events += (decoder.decode(chunk as Uint8Array).match(/^event:/gm) ?? []).length;
  })().catch((err: unknown) => {
    if (!controller.signal.aborted) throw err;
  });
  return { done, abort: () => controller.abort() };
}

export async function streamIsolation(o: StreamIsolationOptions): Promise<void> {
  const db = createDb(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/kiln', { max: 2 });
  const run = newId().slice(-6).toLowerCase();
  const tokenOf = async (name: string) => {
    const a = await createAccount(db, `bench-${name}-${run}`);
    return (await createApiToken(db, a.id, 'bench')).token;
  };
  const noisy = await tokenOf('streams');
  const quiet = await tokenOf('quiet');
  await closeDb(db);
  const cap: number = (await call(noisy, '/v1/account')).limits.max_open_streams;

  const mine = await call(quiet, '/v1/models/kiln/echo-fixture/predictions', { input: { text: 'q' } }, { prefer: 'wait' });
  const quietRead = async () => {
    const t0 = performance.now();
    const res = await fetch(`${API_URL}/v1/predictions/${mine.id}`, { headers: { authorization: `Bearer ${quiet}` } });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`quiet read: ${res.status}`);
    return performance.now() - t0;
  };
  for (let i = 0; i < 20; i++) await quietRead();

  // One noisy prediction generating at all times, in both phases.
  let running = true;
  let current: { id: string; urls: { stream: string } } | undefined;
  const generate = () =>
    call(noisy, '/v1/models/kiln/tiny-llama/predictions', {
      input: { prompt: 'Once upon a time', max_tokens: o.tokens, min_tokens: o.tokens },
      stream: true,
    });
  const generator = (async () => {
    while (running) {
      current = await generate();
      const id = current!.id;
      for (;;) {
        const p = await call(noisy, `/v1/predictions/${id}`);
        if (!running || ['succeeded', 'failed', 'canceled', 'aborted'].includes(p.status)) break;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  })();
  while (!current) await new Promise((resolve) => setTimeout(resolve, 50));

  const counts = { events: 0, refused: 0 };
  let extraRefused = 0;
  /** Holds `cap` streams on whichever prediction is generating, until `stop` is called. */
  const holdCap = () => {
    let holding = true;
    let held: HeldStream[] = [];
    const loop = (async () => {
      while (holding) {
        const url = current!.urls.stream;
        held = Array.from({ length: cap }, () => holdStream(url, noisy, counts));
        await Promise.all(held.map((s) => s.done));
        // The prediction ended: the next one is coming.
        while (holding && current!.urls.stream === url) await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    return async () => {
      holding = false;
      for (const s of held) s.abort();
      await loop;
    };
  };

  const alone: number[] = [];
  const beside: number[] = [];
  for (let round = 0; round < o.rounds; round++) {
    for (let i = 0; i < o.requests; i++) alone.push(await quietRead());
    const stop = holdCap();
    // Every stream open (one more is refused) before the quiet account is timed.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const probe = await fetch(current!.urls.stream, { headers: { authorization: `Bearer ${noisy}` } });
    if (probe.status === 429) extraRefused += 1;
    await probe.body?.cancel();
    for (let i = 0; i < o.requests; i++) beside.push(await quietRead());
    await stop();
  }
  running = false;
  await generator;
  if (current) await call(noisy, `/v1/predictions/${current.id}/cancel`, {}).catch(() => undefined);

  const row = (what: string, t: number[]) => ({
    phase: what,
    requests: t.length,
    p50: ms(percentile(t, 50)),
    p90: ms(percentile(t, 90)),
    p99: ms(percentile(t, 99)),
  });
  table(`another account's GET /v1/predictions/{id}, ${o.rounds} interleaved rounds`, [
    row('alone (the noisy prediction generating)', alone),
    row(`beside ${cap} open streams of it`, beside),
  ]);
  const ratio = percentile(beside, 90) / percentile(alone, 90);
  console.log(
    `p90 beside / alone: ${ratio.toFixed(2)}x (floor ${FLOOR}x: ${ratio <= FLOOR ? 'met' : 'MISSED'}); ` +
      `events delivered to the streams: ${counts.events}; streams refused within the cap: ${counts.refused}; ` +
      `one past the cap answered 429 in ${extraRefused} of ${o.rounds} rounds`,
  );
  const file = await saveResult('stream-isolation', {
    cap,
    rounds: o.rounds,
    requests: o.requests,
    tokens: o.tokens,
    aloneMs: { p50: percentile(alone, 50), p90: percentile(alone, 90), p99: percentile(alone, 99) },
    besideMs: { p50: percentile(beside, 50), p90: percentile(beside, 90), p99: percentile(beside, 99) },
    ratio,
    floor: FLOOR,
    events: counts.events,
    refusedWithinCap: counts.refused,
    pastCapRefused: extraRefused,
  });
  console.log(`saved ${file}`);
}
