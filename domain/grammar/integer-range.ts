/**
 * GBNF for the JSON integers in a range, digit by digit (as llama.cpp's json-schema-to-grammar
 * writes `minimum`/`maximum`): no leading zeros, at most 15 digits, so that every value fits a
 * double exactly, as the rest of the grammar's numbers do (engines/llama/grammar.ts).
 */

/** The widest integer the grammar writes. */
export const GRAMMAR_INTEGER_LIMIT = 999_999_999_999_999;

const digitClass = (lo: string, hi: string) => (lo === hi ? `"${lo}"` : `[${lo}-${hi}]`);
const anyDigits = (n: number) => (n === 0 ? '' : n === 1 ? '[0-9]' : `[0-9]{${n}}`);

/** Strings of digits of one length between `lo` and `hi` (leading zeros as they are). */
function sameLength(lo: string, hi: string): string[] {
  if (lo.length === 0) return [''];
  if (lo === hi) return [`"${lo}"`];
  const rest = lo.length - 1;
  if (lo[0] === hi[0]) return sameLength(lo.slice(1), hi.slice(1)).map((tail) => join(`"${lo[0]}"`, tail));
  if (/^0*$/.test(lo.slice(1)) && /^9*$/.test(hi.slice(1))) return [join(digitClass(lo[0], hi[0]), anyDigits(rest))];
  const out = sameLength(lo.slice(1), '9'.repeat(rest)).map((tail) => join(`"${lo[0]}"`, tail));
  const first = Number(lo[0]) + 1;
  const last = Number(hi[0]) - 1;
  if (first <= last) out.push(join(digitClass(String(first), String(last)), anyDigits(rest)));
  out.push(...sameLength('0'.repeat(rest), hi.slice(1)).map((tail) => join(`"${hi[0]}"`, tail)));
  return out;
}

const join = (a: string, b: string) => [a, b].filter(Boolean).join(' ');

/** Alternatives for the integers from `lo` to `hi`, both at least 0, written without leading zeros. */
function naturals(lo: number, hi: number): string[] {
  const out: string[] = [];
  const loText = String(lo);
  const hiText = String(hi);
  for (let digits = loText.length; digits <= hiText.length; digits++) {
    const from = digits === loText.length ? loText : `1${'0'.repeat(digits - 1)}`;
    const to = digits === hiText.length ? hiText : '9'.repeat(digits);
    out.push(...sameLength(from, to));
  }
  return out;
}

/** A GBNF expression for the integers in [min, max] (each side clamped to the 15-digit limit); undefined when none is. */
export function integerRangeGbnf(min = -GRAMMAR_INTEGER_LIMIT, max = GRAMMAR_INTEGER_LIMIT): string | undefined {
  const lo = Math.max(min, -GRAMMAR_INTEGER_LIMIT);
  const hi = Math.min(max, GRAMMAR_INTEGER_LIMIT);
  if (lo > hi) return undefined;
  const alternatives: string[] = [];
  if (lo < 0) alternatives.push(`"-" (${naturals(Math.max(1, -Math.min(hi, -1)), -lo).join(' | ')})`);
  if (hi >= 0) alternatives.push(...naturals(Math.max(lo, 0), hi));
  return `(${alternatives.join(' | ')})`;
}
