/**
 * Issue 34's prefix-cache hit rate over nodes and scale-to-zero. Multi-turn chats replayed through
 * `/openai/v1/chat/completions` on three model versions (of kiln/smollm2-135m-instruct's weights) and three engine nodes started here, each
 * node with room for one version (their memory differs, so best fit places the versions in the
 * order they are first asked for). A session runs a few turns of every conversation; between
 * sessions every version is unloaded (an idle TTL of a few seconds: scale to zero), and the next session
 * asks for the versions in a rotated order, so each version comes back on another node than it
 * left. Each conversation opens with a context of its own (no prefix shared between them) and
 * each turn resends the whole conversation, as chat clients do. The hit rate is the prompt tokens
 * that came from the cache (`usage.prompt_tokens_details.cached_tokens`) ÷ all prompt tokens,
 * with the KV snapshot tiers (disk and object storage) on, and off beside it.
 */
import { inArray } from 'drizzle-orm';
import { closeDb, createDb } from '../db/client';
import { nodes as nodesTable } from '../db/schema';
import { startEngineNode, stopEngineNode } from './engine-nodes';
import { API_URL, apiToken, call, saveResult, table } from './lib';

export interface KvReplayOptions {
  sessions: number;
  /** Turns of each conversation per session. */
  turns: number;
  /** Conversations per model version. */
  conversations: number;
  /** Words of each conversation's opening context. */
  contextWords: number;
  /** Words of each user turn. */
  turnWords: number;
  /** Tokens of each reply at most. */
  replyTokens: number;
}

const MODELS = 3;
const WEIGHTS = 'kiln/smollm2-135m-instruct';

interface VersionFile {
  path: string;
  sha256: string;
  size: number;
}
/** What each version declares it needs, and each node's room: one version fits a node, two do not. */
const VERSION_MB = 1024;
const nodeMemoryMb = (i: number) => 1536 + 128 * i;
const TARGET = 0.8;
/** Scale to zero soon after a session: a version idle this long is unloaded (nodes look every 5 s). */
const IDLE_TTL_SECONDS = 3;

/** Words of the replayed text. */
const WORDS = (
  'the a kiln fire clay glaze warm cold water stone wood iron gold silver green blue red white black small large old ' +
  'young long short good great little right left open close early late under around every again never always still ' +
  'here near far day night year week morning evening summer winter spring river house garden road bridge tower forest ' +
  'mountain valley island ocean lake storm wind rain snow sun moon star cloud bird horse tree flower bread tea music ' +
  'song story book letter name voice hand heart mind dream potter wheel bowl cup plate vase shelf door chimney smoke'
).split(' ');

/** Deterministic words: the same conversation reads the same on and off. */
function words(seed: number, n: number): string {
  let x = seed >>> 0 || 1;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    x = Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + 0x9e3779b9;
    x = (x ^ (x >>> 12)) >>> 0;
    out.push(WORDS[x % WORDS.length]);
  }
  return out.join(' ');
}

interface Message {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

interface Turn {
  session: number;
  model: number;
  conversation: number;
  turn: number;
  promptTokens: number;
  cachedTokens: number;
  tier: string;
}

interface PhaseResult {
  snapshots: boolean;
  turns: Turn[];
  /** Session → model → the node that served it. */
  placements: string[][];
}

/** One turn: the whole conversation so far plus a new user message; the reply joins the conversation. */
async function chat(token: string, model: string, messages: Message[], o: KvReplayOptions, seed: number) {
  messages.push({ role: 'user', content: words(seed, o.turnWords) });
  const res = await call(token, '/openai/v1/chat/completions', { model, messages, max_tokens: o.replyTokens, temperature: 0 });
  if (!res.choices) throw new Error(`chat: ${JSON.stringify(res)}`);
  messages.push({ role: 'assistant', content: res.choices[0].message.content ?? '' });
  const prediction = await call(token, `/v1/predictions/${String(res.id).replace(/^chatcmpl-/, '')}`);
  return {
    promptTokens: res.usage.prompt_tokens as number,
    cachedTokens: (res.usage.prompt_tokens_details?.cached_tokens ?? 0) as number,
    tier: String(prediction.metrics?.cache_tier ?? 'none'),
  };
}

/** The versions each node holds, by the nodes' registry. */
async function loadedOn(db: ReturnType<typeof createDb>, nodeIds: string[]): Promise<Map<string, string[]>> {
  const rows = await db.select().from(nodesTable).where(inArray(nodesTable.id, nodeIds));
  return new Map(rows.map((r) => [r.id, (r.loaded ?? []).map((l) => l.versionId)]));
}

async function phase(token: string, o: KvReplayOptions, snapshots: boolean, run: string): Promise<PhaseResult> {
  const label = snapshots ? 'on' : 'off';
  // The weights of kiln/smollm2-135m-instruct (a trained chat model: a reply tokenizes again as it
  // was generated), as versions of models of this run's own: one per phase and model, their
  // settings apart so that no two are the same version.
  const files = (await call(token, `/v1/models/${WEIGHTS}/versions`)).results[0].files as VersionFile[];
  const account = await call(token, '/v1/account');
  const models: string[] = [];
  for (let m = 0; m < MODELS; m++) {
    const name = `kv-replay-${label}-${m}-${run}`;
    await call(token, '/v1/models', { owner: account.username, name, visibility: 'private', task: 'text-generation' });
    await call(token, `/v1/models/${account.username}/${name}/versions`, {
      files,
      settings: { contextSize: 4096 + 64 * (m + (snapshots ? 0 : MODELS)), sequences: 4, idleTtlSeconds: IDLE_TTL_SECONDS },
      memory_bytes: VERSION_MB * 2 ** 20,
    });
    models.push(`${account.username}/${name}`);
  }
  const versions: string[] = [];
  for (const model of models) versions.push((await call(token, `/v1/models/${model}/versions`)).results[0].id as string);
  const nodeIds = Array.from({ length: MODELS }, (_, i) => `kvr-${label}-${i}-${run}`);
  const tiers: Record<string, string> = snapshots
    ? { KILN_KV_SNAPSHOT_DISK_MB: '2048', KILN_KV_SNAPSHOT_OBJECT_MB: '8192' }
    : { KILN_KV_SNAPSHOT_DISK_MB: '0', KILN_KV_SNAPSHOT_OBJECT_MB: '0' };
  const children = await Promise.all(
    nodeIds.map((id, i) =>
      startEngineNode({ id, env: { KILN_ENGINE_THREADS: '1', KILN_NODE_MEMORY_MB: String(nodeMemoryMb(i)), ...tiers } }),
    ),
  );
  const db = createDb(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/kiln', { max: 2 });
  const result: PhaseResult = { snapshots, turns: [], placements: [] };
  try {
    const conversations = models.map((_, m) =>
      Array.from({ length: o.conversations }, (_, c): Message[] => [{ role: 'system', content: words(1000 * m + c + 1, o.contextWords) }]),
    );
    const turnOf = async (session: number, m: number, c: number, t: number) => {
      const seed = 1_000_000 + 10_000 * m + 100 * c + 10 * session + t;
      const r = await chat(token, models[m], conversations[m][c], o, seed);
      result.turns.push({ session, model: m, conversation: c, turn: t, ...r });
    };
    for (let session = 0; session < o.sessions; session++) {
      // Each version is first asked for in a rotated order: best fit puts the first on the smallest
      // node. Its conversations go on at once, so that it is not idle while the next one loads.
      const order = Array.from({ length: MODELS }, (_, i) => (i + session) % MODELS);
      const running: Array<Promise<void>> = [];
      const placed: string[] = [];
      for (const m of order) {
        await turnOf(session, m, 0, 0);
        const held = await loadedOn(db, nodeIds);
        placed[m] = [...held].find(([, loaded]) => loaded.includes(versions[m]))?.[0] ?? 'none';
        running.push(
          ...conversations[m].map(async (_, c) => {
            for (let t = c === 0 ? 1 : 0; t < o.turns; t++) await turnOf(session, m, c, t);
          }),
        );
      }
      await Promise.all(running);
      result.placements.push(placed);
      // Scale to zero: every version unloaded before the next session.
      const t0 = Date.now();
      while ([...(await loadedOn(db, nodeIds)).values()].some((v) => v.length > 0)) {
        if (Date.now() - t0 > 60_000) throw new Error('the versions were not unloaded within 60 s of idling');
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  } finally {
    await closeDb(db);
    await Promise.all(children.map(stopEngineNode));
  }
  return result;
}

const rate = (turns: Turn[]) =>
  turns.reduce((n, t) => n + t.cachedTokens, 0) /
  Math.max(
    1,
    turns.reduce((n, t) => n + t.promptTokens, 0),
  );
const pct = (v: number) => `${(v * 100).toFixed(1)} %`;

export async function kvReplay(o: KvReplayOptions): Promise<void> {
  const token = await apiToken();
  const run = Date.now().toString(36);
  const on = await phase(token, o, true, run);
  const off = await phase(token, o, false, run);
  const rows = [on, off].map((p) => {
    const first = p.turns.filter((t) => t.session > 0 && t.turn === 0);
    const tiers = new Map<string, number>();
    for (const t of p.turns) tiers.set(t.tier, (tiers.get(t.tier) ?? 0) + t.cachedTokens);
    return {
      'KV snapshots': p.snapshots ? 'on (disk + object storage)' : 'off',
      turns: p.turns.length,
      'prompt tokens': p.turns.reduce((n, t) => n + t.promptTokens, 0),
      'cached tokens': p.turns.reduce((n, t) => n + t.cachedTokens, 0),
      'hit rate': pct(rate(p.turns)),
      "sessions' first turns after scale-to-zero": pct(rate(first)),
      'cached tokens by tier': [...tiers].map(([tier, n]) => `${tier} ${n}`).join(', '),
      target: p.snapshots ? `≥ ${pct(TARGET)}: ${rate(p.turns) >= TARGET ? 'met' : 'not met'}` : '-',
    };
  });
  for (const p of [on, off])
    table(
      `where each version was served, snapshots ${p.snapshots ? 'on' : 'off'} (session × version)`,
      p.placements.map((nodes, session) => ({ session: session + 1, ...Object.fromEntries(nodes.map((n, m) => [`version ${m + 1}`, n])) })),
    );
  table(
    `${MODELS} versions on ${MODELS} nodes, ${o.conversations} conversations each, ${o.sessions} sessions of ${o.turns} turns, scale to zero between sessions`,
    rows,
  );
  console.log(`\nresult: ${await saveResult('kv-replay', { options: o, on, off, rows, url: API_URL })}`);
}
