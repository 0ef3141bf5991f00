/**
 * The Responses API against its own targets, through the official `openai` client (unchanged but
 * for its baseURL), on kiln/smollm2-135m-instruct at temperature 0:
 * 1. time to first text delta of a `/responses` stream ÷ that of a `/chat/completions` stream,
 *    same prompt, warm, in interleaved pairs whose order alternates (target ≤ 1.1×);
 * 2. a chain of turns through `previous_response_id`: per turn the input tokens, those reused from
 *    the cache and those evaluated again, beside the tokens the turn added (target: each turn
 *    recomputes ≤ its new tokens + 16).
 * TTFT counts from just before the client sends the create to the first text delta it yields.
 */
import OpenAI from 'openai';
import { API_URL, apiToken, call, ms, percentile, saveResult, table } from './lib';

const MODEL = 'kiln/smollm2-135m-instruct';
const PROMPT = 'Name three things a potter checks before firing a kiln.';
/** Short user turns of one conversation; the chain cycles through them. */
const TURNS = [
  'Hi! I am building a small wood-fired kiln.',
  'What temperature does stoneware need?',
  'How long should the firing take?',
  'And how do I cool it down safely?',
  'Which wood burns best?',
  'Do I need a chimney?',
  'How tall should it be?',
  'What about the door?',
  'Any safety advice?',
  'Thanks! Summarise in one sentence.',
];
/** Each turn may evaluate this many tokens beyond those it added (issue 36's target). */
const RECOMPUTE_SLACK = 16;
const TTFT_TARGET = 1.1;

export interface ResponsesBenchOptions {
  pairs: number;
  tokens: number;
  turns: number;
  turnTokens: number;
}

async function responsesTtft(openai: OpenAI, tokens: number): Promise<number> {
  const t0 = performance.now();
  const stream = await openai.responses.create({ model: MODEL, input: PROMPT, max_output_tokens: tokens, temperature: 0, stream: true });
  let first: number | undefined;
  for await (const e of stream) {
    if (e.type === 'response.output_text.delta' && e.delta !== '') first ??= performance.now();
    if (e.type === 'response.failed') throw new Error(`response ${e.response.id} failed: ${JSON.stringify(e.response.error)}`);
  }
  if (first === undefined) throw new Error('a /responses stream ended without a text delta');
  return first - t0;
}

async function chatTtft(openai: OpenAI, tokens: number): Promise<number> {
  const t0 = performance.now();
  const stream = await openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: PROMPT }],
    max_tokens: tokens,
    temperature: 0,
    stream: true,
  });
  let first: number | undefined;
  for await (const chunk of stream) if (chunk.choices[0]?.delta?.content) first ??= performance.now();
  if (first === undefined) throw new Error('a /chat/completions stream ended without a content delta');
  return first - t0;
}

async function ttftRatio(openai: OpenAI, o: ResponsesBenchOptions) {
  // Warm-up: the model loaded on the node and its prompt's prefix cached, for both paths alike.
  await chatTtft(openai, o.tokens);
  await responsesTtft(openai, o.tokens);
  const runs = { responses: [] as number[], chat: [] as number[] };
  for (let i = 0; i < o.pairs; i++) {
    // Each goes first in half of the pairs, so that neither gets the other's leftovers more often.
    if (i % 2 === 0) {
      runs.responses.push(await responsesTtft(openai, o.tokens));
      runs.chat.push(await chatTtft(openai, o.tokens));
    } else {
      runs.chat.push(await chatTtft(openai, o.tokens));
      runs.responses.push(await responsesTtft(openai, o.tokens));
    }
  }
  const row = (path: string, v: number[]) => ({
    path,
    runs: v.length,
    'TTFT p50': ms(percentile(v, 50)),
    'TTFT p90': ms(percentile(v, 90)),
  });
  const ratio = {
    p50: percentile(runs.responses, 50) / percentile(runs.chat, 50),
    p90: percentile(runs.responses, 90) / percentile(runs.chat, 90),
  };
  const verdict = (r: number) => `${r.toFixed(2)}× (target ≤ ${TTFT_TARGET}×: ${r <= TTFT_TARGET ? 'PASS' : 'MISS'})`;
  table(`Time to first text delta, ${MODEL}, ${o.tokens} tokens at temperature 0, warm, openai client streams`, [
    row('/openai/v1/responses (stream)', runs.responses),
    row('/openai/v1/chat/completions (stream)', runs.chat),
  ]);
  console.log(`/responses ÷ /chat/completions: p50 ${verdict(ratio.p50)}, p90 ${verdict(ratio.p90)}`);
  return { runs, ratio };
}

async function chain(openai: OpenAI, token: string, o: ResponsesBenchOptions) {
  const rows: Array<Record<string, string | number>> = [];
  let previous: { id: string; input: number } | undefined;
  for (let t = 0; t < o.turns; t++) {
    const r = await openai.responses.create({
      model: MODEL,
      input: TURNS[t % TURNS.length],
      previous_response_id: previous?.id,
      max_output_tokens: o.turnTokens,
      temperature: 0,
    });
    if (!r.usage) throw new Error(`response ${r.id} has no usage`);
    const input = r.usage.input_tokens;
    const cached = r.usage.input_tokens_details.cached_tokens;
    // What this turn added to the conversation: the previous turn's output and the new user message, as the template renders them.
    const added = input - (previous?.input ?? 0);
    const computed = input - cached;
    // Where the reused tokens came from (live sequence, disk or object snapshot), as the prediction records it.
    const prediction = await call(token, `/v1/predictions/${r.id.replace(/^resp_/, '')}`);
    rows.push({
      turn: t + 1,
      input,
      cached,
      computed,
      'new (input − previous input)': added,
      output: r.usage.output_tokens,
      tier: String(prediction.metrics?.cache_tier ?? '-'),
      [`computed ≤ new + ${RECOMPUTE_SLACK}`]: computed <= added + RECOMPUTE_SLACK ? 'PASS' : 'MISS',
    });
    previous = { id: r.id, input };
  }
  table(
    `A ${o.turns}-turn chain through previous_response_id, ${MODEL}, ≤ ${o.turnTokens} output tokens a turn at temperature 0 (target: computed ≤ new + ${RECOMPUTE_SLACK})`,
    rows,
  );
  const missed = rows.filter((r) => r[`computed ≤ new + ${RECOMPUTE_SLACK}`] === 'MISS').length;
  console.log(`chain: ${rows.length - missed}/${rows.length} turns within target`);
  return rows;
}

export async function responsesBench(o: ResponsesBenchOptions) {
  const token = await apiToken();
  const openai = new OpenAI({ apiKey: token, baseURL: `${API_URL}/openai/v1`, maxRetries: 0 });
  const ttft = await ttftRatio(openai, o);
  const turns = await chain(openai, token, o);
  console.log(`saved ${await saveResult('responses', { options: o, ttft, turns })}`);
}
