/**
 * Values node-llama-cpp's JSON-schema grammar cannot constrain: integers and numbers within a
 * range or of a multipleOf, strings of a pattern or of a format beyond date and time. Each is a
 * GBNF expression of its own, which the engine puts where the schema has the value
 * (engines/llama/grammar.ts). A keyword the grammar cannot enforce gets the reason it is refused.
 */
import { FORMAT_PATTERNS } from './formats';
import { type NumberBounds, numberRangeGbnf } from './number-range';
import { PatternError, patternGrammar } from './pattern';

export interface LeafSchema extends NumberBounds {
  type?: unknown;
  multipleOf?: number;
  pattern?: string;
  format?: string;
}

export interface LeafGrammar {
  /** The value's GBNF, quotes included for a string. */
  expr: string;
  rules: string[];
}

/** At most this many multiples are listed one by one for a multipleOf that is no power of ten. */
const MAX_LISTED_MULTIPLES = 256;

/** Decimal places a multipleOf of 10^-d allows (1 for integers: 0), or undefined for any other step. */
function decimalsOf(step: number): number | undefined {
  for (let d = 0; d <= 15; d++) if (Math.abs(step * 10 ** d - 1) < 1e-9) return d;
  return undefined;
}

const hasBounds = (s: LeafSchema) =>
  s.minimum !== undefined || s.maximum !== undefined || s.exclusiveMinimum !== undefined || s.exclusiveMaximum !== undefined;

const STEP_REFUSED = `multipleOf can be enforced only as 1, a power of ten below 1 (0.1, 0.01…), or a whole number within a range of at most ${MAX_LISTED_MULTIPLES} multiples`;

/** Whether `v` keeps the bounds. */
function within(s: NumberBounds, v: number): boolean {
  return (
    v >= (s.minimum ?? -Infinity) &&
    v <= (s.maximum ?? Infinity) &&
    v > (s.exclusiveMinimum ?? -Infinity) &&
    v < (s.exclusiveMaximum ?? Infinity)
  );
}

/** A number's grammar, or a reason its keywords cannot be enforced. */
function numberLeaf(s: LeafSchema, integer: boolean): LeafGrammar | string {
  const step = s.multipleOf;
  const decimals = step === undefined ? 15 : decimalsOf(step);
  if (decimals !== undefined) {
    const expr = numberRangeGbnf(s, integer ? 0 : decimals);
    return expr === undefined
      ? 'no whole number lies within the range, and the grammar writes a number as a whole part and a fraction'
      : { expr, rules: [] };
  }
  // Another whole step: the multiples within the range, one by one.
  const low = Math.max(s.minimum ?? -Infinity, s.exclusiveMinimum ?? -Infinity);
  const high = Math.min(s.maximum ?? Infinity, s.exclusiveMaximum ?? Infinity);
  if (!Number.isInteger(step) || !Number.isFinite(low) || !Number.isFinite(high) || (high - low) / step! > MAX_LISTED_MULTIPLES + 1)
    return STEP_REFUSED;
  const multiples: number[] = [];
  for (let v = Math.ceil(low / step!) * step!; v <= high; v += step!) if (within(s, v)) multiples.push(v);
  if (multiples.length === 0) return 'no multiple of multipleOf lies within the range';
  return { expr: `(${multiples.map((v) => `"${v}"`).join(' | ')})`, rules: [] };
}

/**
 * The grammar of a value with keywords node-llama-cpp leaves out, a reason they cannot be
 * enforced, or undefined when node-llama-cpp's own grammar covers the value. Its rules are named
 * `<prefix>-N`.
 */
export function leafGrammar(s: LeafSchema, prefix: string): LeafGrammar | string | undefined {
  if (s.type === 'integer' || s.type === 'number') {
    if (!hasBounds(s) && s.multipleOf === undefined) return undefined;
    return numberLeaf(s, s.type === 'integer');
  }
  if (s.type !== 'string') return undefined;
  // With both, the pattern is what the grammar writes (zod writes each format's pattern beside it;
  // JSON Schema 2020-12 reads format as an annotation).
  const pattern = s.pattern ?? FORMAT_PATTERNS[s.format as keyof typeof FORMAT_PATTERNS];
  if (pattern === undefined) return undefined;
  try {
    const { expr, rules } = patternGrammar(pattern, prefix);
    return { expr: `"\\"" ${expr} "\\""`, rules };
  } catch (err) {
    if (err instanceof PatternError) return err.message;
    throw err;
  }
}
