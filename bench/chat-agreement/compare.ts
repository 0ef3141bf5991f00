/** The pure part of the chat agreement benchmark (bench/chat-agreement.ts): scoring and where two outputs part. */

export interface Conversation {
  name: string;
  messages: Array<{ role: 'system' | 'user' | 'assistant'; content: string }>;
  /** Accepted answers; none for an open-ended conversation. */
  expected?: string[];
  /** word: an answer is a whole word of the reply; exact: the reply is the answer, less punctuation and spaces. */
  match?: 'word' | 'exact';
  /** Where Kiln differs from llama-server by design, why: shown, and left out of the totals. */
  deliberate?: string;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Whether a reply gives one of the expected answers (case-insensitive); undefined where none is expected. */
export function answerMatches(reply: string, c: Pick<Conversation, 'expected' | 'match'>): boolean | undefined {
  if (!c.expected?.length) return undefined;
  const text = reply.toLowerCase();
  if (c.match === 'exact') {
    const bare = text.replace(/[^\p{L}\p{N}]+/gu, ' ').trim();
    return c.expected.some((a) => bare === a.toLowerCase());
  }
  return c.expected.some((a) => new RegExp(`(^|[^\\p{L}\\p{N}])${escape(a.toLowerCase())}($|[^\\p{L}\\p{N}])`, 'u').test(text));
}

/** The first index at which two sequences differ (the shorter's length where one starts the other); undefined if equal. */
export function firstDifference<T>(a: ArrayLike<T>, b: ArrayLike<T>): number | undefined {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? undefined : n;
}

/**
 * The generation step at which a reply leaves one whose tokens' texts are `pieces`: the first
 * token whose text does not continue `reply` (pieces.length where the reply goes on after them).
 */
export function partingStep(pieces: readonly string[], reply: string): number {
  let at = 0;
  for (let i = 0; i < pieces.length; i++) {
    if (!reply.startsWith(pieces[i], at)) return i;
    at += pieces[i].length;
  }
  return pieces.length;
}

/** One line of text for a table cell: newlines shown as \n, cut to `n` characters. */
export function clip(text: string, n: number): string {
  const flat = JSON.stringify(text).slice(1, -1);
  return flat.length > n ? `${flat.slice(0, n - 1)}…` : flat;
}

/** `part` of `whole` as a percentage with one decimal, and the counts. */
export function share(part: number, whole: number): string {
  return whole === 0 ? '-' : `${((100 * part) / whole).toFixed(1)} % (${part}/${whole})`;
}
