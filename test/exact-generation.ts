/**
 * A long greedy kiln/tiny-llama generation whose node fails part-way, as the exact-continuation
 * tests drive it: start one (every token forced), wait until a share of its text has streamed, wait
 * for its end, and check that it ended as an uninterrupted run: the same text, the failed
 * attempt's checkpoint restored (or the prompt prefilled again), no `reset` and one `done`.
 */
import type { Db } from '../db/client';
import type { ModelVersion } from '../db/models';
import { API_URL, modelPathOf, poll, TERMINAL } from './helpers';
import { type FollowedStream, followSse, streamedText } from './sse-follow';

export async function readPrediction(token: string, id: string) {
  const res = await fetch(`${API_URL}/v1/predictions/${id}`, { headers: { authorization: `Bearer ${token}` } });
  return (await res.json()) as any;
}

/** Greedy, every token forced: `tokens` tokens each time, followed on its SSE stream. */
export async function startGreedyGeneration(
  db: Db,
  version: ModelVersion,
  token: string,
  tokens: number,
): Promise<{ id: string; urls: { stream: string }; stream: FollowedStream }> {
  const res = await fetch(`${API_URL}/v1/models/${await modelPathOf(db, version)}/predictions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ input: { prompt: 'The kiln was', max_tokens: tokens, min_tokens: tokens, temperature: 0 } }),
  });
  expect(res.status).toBe(201);
  const p = (await res.json()) as { id: string; urls: { stream: string } };
  return { ...p, stream: followSse(() => p.urls.stream) };
}

export function finishedPrediction(token: string, id: string, timeoutMs: number) {
  return poll(
    () => readPrediction(token, id),
    (p) => TERMINAL.includes(p.status),
    { timeoutMs, intervalMs: 50 },
  );
}

/** Waits until a quarter of `reference`'s text reached the stream's client. */
export async function untilQuarterStreamed(stream: FollowedStream, reference: { output: string[] }): Promise<void> {
  const quarter = reference.output.join('').length / 4;
  await poll(
    async () => streamedText(stream.events).length,
    (n) => n >= quarter,
    { timeoutMs: 120_000, intervalMs: 5 },
  );
}

/**
 * A generation whose first attempt failed on `failedNode` ended as `reference`, uninterrupted:
 * all its tokens, the same text, and one generation for the client (no reset, the text once, one done).
 */
export function expectContinuedExactly(
  p: any,
  {
    reference,
    tokens,
    failedNode,
    stream,
  }: { reference: { output: string[] }; tokens: number; failedNode: string; stream: FollowedStream },
): void {
  expect({ status: p.status, tokens: p.metrics?.output_token_count }).toEqual({ status: 'succeeded', tokens });
  expect(p.logs).toMatch(new RegExp(`Attempt 1 failed on node ${failedNode}`));
  expect(p.logs).toMatch(/Restored the failed attempt's KV checkpoint at token \d+|No KV checkpoint of the failed attempt was usable/);
  const text = (p.output as string[]).join('');
  expect(text).toBe(reference.output.join(''));
  expect(stream.events.filter((e) => e.event === 'reset')).toEqual([]);
  expect(stream.events.filter((e) => e.event === 'done')).toHaveLength(1);
  expect(
    stream.events
      .filter((e) => e.event === 'output')
      .map((e) => e.data)
      .join(''),
  ).toBe(text);
}
