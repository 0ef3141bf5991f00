/**
 * GBNF for the JSON strings a regular expression (`pattern`) matches, as llama.cpp's
 * json-schema-to-grammar writes them: literals, `.`, classes with ranges and `\d \w \s`, groups,
 * alternation, and `* + ? {n} {n,} {n,m}`. The grammar writes the string as JSON does (a quote or
 * backslash escaped), and every string it writes matches. A pattern without `^`/`$` may have
 * anything before/after what it matches, as JSON Schema reads it. Lookarounds, back references
 * and word boundaries have no grammar: they are refused by name.
 */
import { GRAMMAR_REPETITION_LIMIT } from './limits';

/** A pattern the grammar cannot enforce; its message says why. */
export class PatternError extends Error {}

export interface PatternGrammar {
  /** The expression for the string's characters (without its quotes). */
  expr: string;
  /** `name ::= body` lines the expression refers to. */
  rules: string[];
}

const MAX_PATTERN_LENGTH = 1000;
const MAX_GROUP_DEPTH = 16;

/** Any character of a JSON string, as JSON writes it. */
const JSON_CHAR = '([^"\\\\\\x00-\\x1F\\x7F] | "\\\\" ["\\\\/bfnrt] | "\\\\u" [0-9a-fA-F]{4})';
/** Characters JSON writes as they are, for a class: never a quote, a backslash or a control character. */
const NOT_PLAIN = '"\\\\\\x00-\\x1F\\x7F';

/** One character as GBNF writes it inside a literal or a class. */
function gbnfChar(c: string): string {
  if (/^[a-zA-Z0-9 ]$/.test(c)) return c;
  const code = c.codePointAt(0)!;
  if (code < 0x100) return `\\x${code.toString(16).padStart(2, '0')}`;
  if (code < 0x10000) return `\\u${code.toString(16).padStart(4, '0')}`;
  return `\\U${code.toString(16).padStart(8, '0')}`;
}

/** The character as it appears in the JSON text of a string: escaped where JSON must. */
function jsonLiteral(c: string): string {
  const text = JSON.stringify(c).slice(1, -1);
  return `"${[...text].map(gbnfChar).join('')}"`;
}

type Range = [number, number];
const PLAIN_GAPS: Range[] = [
  [0x00, 0x1f],
  [0x22, 0x22],
  [0x5c, 0x5c],
  [0x7f, 0x7f],
];

/** A set of characters (ranges of code points, not negated) as GBNF: plain ones in a class, the rest as JSON escapes. */
function charSet(ranges: Range[]): string {
  const plain: Range[] = [];
  const special: number[] = [];
  for (const [from, to] of ranges) {
    let start = from;
    for (const [gapFrom, gapTo] of PLAIN_GAPS) {
      if (gapTo < start || gapFrom > to) continue;
      if (gapFrom > start) plain.push([start, gapFrom - 1]);
      for (let c = Math.max(gapFrom, start); c <= Math.min(gapTo, to); c++) special.push(c);
      start = gapTo + 1;
    }
    if (start <= to) plain.push([start, to]);
  }
  const alternatives = [];
  if (plain.length > 0)
    alternatives.push(
      `[${plain.map(([a, b]) => (a === b ? gbnfChar(String.fromCodePoint(a)) : `${gbnfChar(String.fromCodePoint(a))}-${gbnfChar(String.fromCodePoint(b))}`)).join('')}]`,
    );
  alternatives.push(...[...new Set(special)].map((c) => jsonLiteral(String.fromCodePoint(c))));
  return alternatives.length === 1 ? alternatives[0] : `(${alternatives.join(' | ')})`;
}

/** A negated set: the plain characters outside `ranges` (a quote, backslash or control character is never written). */
function negatedSet(ranges: Range[]): string {
  const inner = ranges
    .map(([a, b]) =>
      a === b ? gbnfChar(String.fromCodePoint(a)) : `${gbnfChar(String.fromCodePoint(a))}-${gbnfChar(String.fromCodePoint(b))}`,
    )
    .join('');
  return `[^${inner}${NOT_PLAIN}]`;
}

const DIGIT: Range[] = [[0x30, 0x39]];
const WORD: Range[] = [
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
];
const SPACE: Range[] = [
  [0x09, 0x0d],
  [0x20, 0x20],
];

/** Escapes that stand for one character. */
const CHAR_ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', f: '\f', v: '\v', '0': '\0' };

class PatternParser {
  private pos = 0;
  private depth = 0;
  readonly rules: string[] = [];

  constructor(
    private readonly src: string,
    private readonly prefix: string,
  ) {}

  parse(): string {
    const anchoredStart = this.src.startsWith('^');
    const anchoredEnd = /(^|[^\\])\$$/.test(this.src);
    const body = this.alternation();
    if (this.pos < this.src.length) throw new PatternError(`unexpected "${this.src[this.pos]}" at ${this.pos}`);
    if (anchoredStart && anchoredEnd) return body;
    const any = `${this.rule(JSON_CHAR)}*`;
    return [anchoredStart ? '' : any, body, anchoredEnd ? '' : any].filter(Boolean).join(' ');
  }

  private rule(body: string): string {
    const name = `${this.prefix}-${this.rules.length}`;
    this.rules.push(`${name} ::= ${body}`);
    return name;
  }

  private peek(): string | undefined {
    return this.src[this.pos];
  }

  private alternation(): string {
    const alternatives = [this.sequence()];
    while (this.peek() === '|') {
      this.pos++;
      alternatives.push(this.sequence());
    }
    return alternatives.length === 1 ? alternatives[0] : `(${alternatives.map((a) => a || '""').join(' | ')})`;
  }

  private sequence(): string {
    const items: string[] = [];
    for (let c = this.peek(); c !== undefined && c !== '|' && c !== ')'; c = this.peek()) {
      if (c === '^' && this.pos === 0) {
        this.pos++;
        continue;
      }
      if (c === '$' && this.pos === this.src.length - 1) {
        this.pos++;
        continue;
      }
      if (c === '^' || c === '$') throw new PatternError(`an anchor (${c}) can only begin or end the pattern`);
      items.push(this.quantified(this.atom()));
    }
    return items.join(' ');
  }

  private quantified(atom: string): string {
    const c = this.peek();
    let suffix: string | undefined;
    if (c === '*' || c === '+' || c === '?') {
      this.pos++;
      suffix = c;
    } else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.pos));
      if (!m) throw new PatternError(`a "{" at ${this.pos} that is not a repetition count`);
      this.pos += m[0].length;
      const min = Number(m[1]);
      const max = m[2] === undefined ? min : m[3] === '' ? undefined : Number(m[3]);
      if (min > GRAMMAR_REPETITION_LIMIT || (max ?? 0) > GRAMMAR_REPETITION_LIMIT)
        throw new PatternError(`repetition counts must be at most ${GRAMMAR_REPETITION_LIMIT}`);
      if (max !== undefined && max < min) throw new PatternError(`{${min},${max}}: the counts are out of order`);
      suffix = max === min ? `{${min}}` : `{${min},${max ?? ''}}`;
    }
    if (suffix === undefined) return atom;
    // Lazy and possessive forms match the same strings.
    if (this.peek() === '?' || this.peek() === '+') this.pos++;
    // A repeated rule is a name: llama.cpp expands a repetition of a name without multiplying rules.
    return `${/^[\w-]+$/.test(atom) ? atom : this.rule(atom)}${suffix}`;
  }

  private atom(): string {
    const c = this.src[this.pos++];
    if (c === '(') return this.group();
    if (c === '[') return this.charClass();
    if (c === '.')
      return negatedSet([
        [0x0a, 0x0a],
        [0x0d, 0x0d],
      ]);
    if (c === '\\') return this.escape();
    if (c === '*' || c === '+' || c === '?' || c === '{') throw new PatternError(`"${c}" at ${this.pos - 1} repeats nothing`);
    if (c === ')') throw new PatternError(`unbalanced ")" at ${this.pos - 1}`);
    const cp = this.src.codePointAt(this.pos - 1)!;
    if (cp > 0xffff) this.pos++;
    return jsonLiteral(String.fromCodePoint(cp));
  }

  private group(): string {
    if (this.src.startsWith('?:', this.pos)) this.pos += 2;
    else if (this.src.startsWith('?<', this.pos) && !/^\?<[=!]/.test(this.src.slice(this.pos))) {
      const end = this.src.indexOf('>', this.pos);
      if (end < 0) throw new PatternError('an unfinished group name');
      this.pos = end + 1;
    } else if (this.peek() === '?') throw new PatternError('lookaheads and lookbehinds cannot be enforced by the grammar');
    if (++this.depth > MAX_GROUP_DEPTH) throw new PatternError(`groups are nested more than ${MAX_GROUP_DEPTH} deep`);
    const inner = this.alternation();
    this.depth--;
    if (this.src[this.pos++] !== ')') throw new PatternError('a group is not closed');
    return `(${inner || '""'})`;
  }

  private escape(): string {
    const c = this.src[this.pos++];
    if (c === undefined) throw new PatternError('the pattern ends in a backslash');
    if (c === 'd') return charSet(DIGIT);
    if (c === 'w') return charSet(WORD);
    if (c === 's') return charSet(SPACE);
    if (c === 'D') return negatedSet(DIGIT);
    if (c === 'W') return negatedSet(WORD);
    if (c === 'S') return negatedSet(SPACE);
    return jsonLiteral(String.fromCodePoint(this.escapedChar(c)));
  }

  /** The code point an escape other than a class stands for. */
  private escapedChar(c: string): number {
    if (c in CHAR_ESCAPES) return CHAR_ESCAPES[c].codePointAt(0)!;
    if (c === 'u' || c === 'x') {
      const m = (c === 'u' ? /^[0-9a-fA-F]{4}/ : /^[0-9a-fA-F]{2}/).exec(this.src.slice(this.pos));
      if (!m) throw new PatternError(`\\${c} needs hex digits`);
      this.pos += m[0].length;
      return parseInt(m[0], 16);
    }
    if (/[bB]/.test(c)) throw new PatternError('word boundaries (\\b, \\B) cannot be enforced by the grammar');
    if (/[1-9k]/.test(c)) throw new PatternError('back references cannot be enforced by the grammar');
    if (/[a-zA-Z]/.test(c)) throw new PatternError(`\\${c} is not supported`);
    return c.codePointAt(0)!;
  }

  private charClass(): string {
    const negated = this.peek() === '^';
    if (negated) this.pos++;
    const ranges: Range[] = [];
    let first = true;
    while (this.peek() !== ']' || first) {
      first = false;
      const c = this.src[this.pos++];
      if (c === undefined) throw new PatternError('a character class is not closed');
      let from: number;
      if (c === '\\') {
        const e = this.src[this.pos++];
        const named = { d: DIGIT, w: WORD, s: SPACE }[e as 'd' | 'w' | 's'];
        if (named) {
          ranges.push(...named);
          continue;
        }
        if (e === 'D' || e === 'W' || e === 'S') throw new PatternError(`\\${e} inside a class is not supported`);
        from = e === 'b' ? 0x08 : this.escapedChar(e);
      } else from = c.codePointAt(0)!;
      if (this.peek() === '-' && this.src[this.pos + 1] !== ']' && this.src[this.pos + 1] !== undefined) {
        this.pos++;
        let to = this.src.codePointAt(this.pos++)!;
        if (to === 0x5c) to = this.escapedChar(this.src[this.pos++]);
        if (to < from) throw new PatternError('a character range is out of order');
        ranges.push([from, to]);
      } else ranges.push([from, from]);
    }
    this.pos++;
    return negated ? negatedSet(ranges) : charSet(ranges);
  }
}

/** The grammar of the strings `pattern` matches; its rules are named `<prefix>-N`. Throws PatternError. */
export function patternGrammar(pattern: string, prefix: string): PatternGrammar {
  if (pattern.length > MAX_PATTERN_LENGTH) throw new PatternError(`is longer than ${MAX_PATTERN_LENGTH} characters`);
  const parser = new PatternParser(pattern, prefix);
  const expr = parser.parse();
  return { expr, rules: parser.rules };
}
