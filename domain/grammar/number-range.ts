/**
 * GBNF for JSON numbers within `minimum`/`maximum` (or their exclusive forms) and a number of
 * decimals. What it writes always lies in the range: whole numbers in it, and a fraction after a
 * whole part only where every fraction keeps the value inside (so 1.5 within [1, 2], but no
 * fraction after the last whole number). A range with no whole number in it has no grammar here.
 */
import { GRAMMAR_INTEGER_LIMIT, integerRangeGbnf } from './integer-range';

export interface NumberBounds {
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
}

/** The smallest and largest whole numbers the bounds allow (clamped to the grammar's 15 digits). */
export function wholeBounds(b: NumberBounds): [number, number] {
  const lows = [-GRAMMAR_INTEGER_LIMIT];
  if (b.minimum !== undefined) lows.push(Math.ceil(b.minimum));
  if (b.exclusiveMinimum !== undefined) lows.push(Math.floor(b.exclusiveMinimum) + 1);
  const highs = [GRAMMAR_INTEGER_LIMIT];
  if (b.maximum !== undefined) highs.push(Math.floor(b.maximum));
  if (b.exclusiveMaximum !== undefined) highs.push(Math.ceil(b.exclusiveMaximum) - 1);
  return [Math.max(...lows), Math.min(...highs)];
}

/**
 * The numbers in the bounds with at most `decimals` digits after the point (15 unless a
 * multipleOf says fewer; 0 for integers); undefined when no whole number lies in the bounds.
 */
export function numberRangeGbnf(bounds: NumberBounds, decimals = 15): string | undefined {
  const [lo, hi] = wholeBounds(bounds);
  const whole = integerRangeGbnf(lo, hi);
  if (whole === undefined) return undefined;
  if (decimals === 0) return whole;
  const fraction = `"." [0-9]{1,${decimals}}`;
  const alternatives = [whole];
  // k.f lies in [k, k + 1): inside when lo <= k and k + 1 <= hi.
  const positive = integerRangeGbnf(Math.max(lo, 0), hi - 1);
  if (positive && Math.max(lo, 0) <= hi - 1) alternatives.push(`${positive} ${fraction}`);
  // -m.f lies in (-(m + 1), -m]: inside when -(m + 1) >= lo and -m <= hi.
  const mLow = Math.max(0, -hi);
  const mHigh = -lo - 1;
  if (mLow <= mHigh) alternatives.push(`"-" ${integerRangeGbnf(mLow, mHigh)} ${fraction}`);
  return `(${alternatives.join(' | ')})`;
}
