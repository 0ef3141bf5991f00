/**
 * The GBNF that Kiln writes for values (domain/grammar/) as a JavaScript regular expression, for
 * tests: literals, classes, groups, alternation, repetition and rule references (inlined). Not a
 * GBNF parser in general: enough to check what those grammars accept.
 */
const unescape = (s: string) =>
  s.replace(/\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)/g, (_, e: string) => {
    if (e.length > 1) return String.fromCodePoint(parseInt(e.slice(1), 16));
    return ({ n: '\n', t: '\t', r: '\r' } as Record<string, string>)[e] ?? e;
  });
const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function gbnfToRegex(expr: string, rules: string[] = []): RegExp {
  const bodies = new Map(
    rules.map((r) => {
      const at = r.indexOf(' ::= ');
      return [r.slice(0, at), r.slice(at + 5)];
    }),
  );
  const translate = (src: string): string => {
    let out = '';
    let i = 0;
    while (i < src.length) {
      const c = src[i];
      if (c === ' ') i++;
      else if (c === '"') {
        let j = i + 1;
        while (src[j] !== '"') j += src[j] === '\\' ? 2 : 1;
        out += `(?:${escapeRegex(unescape(src.slice(i + 1, j)))})`;
        i = j + 1;
      } else if (c === '[') {
        let j = i + 1;
        while (src[j] !== ']') j += src[j] === '\\' ? 2 : 1;
        out += src.slice(i, j + 1).replace(/\\U([0-9a-fA-F]{8})/g, (_, hex: string) => `\\u{${hex}}`);
        i = j + 1;
      } else if (c === '(') {
        out += '(?:';
        i++;
      } else if ('|)*+?'.includes(c)) {
        out += c;
        i++;
      } else if (c === '{') {
        const j = src.indexOf('}', i);
        out += src.slice(i, j + 1);
        i = j + 1;
      } else {
        const name = /^[\w-]+/.exec(src.slice(i))![0];
        const body = bodies.get(name);
        if (body === undefined) throw new Error(`no rule ${name}`);
        out += `(?:${translate(body)})`;
        i += name.length;
      }
    }
    return out;
  };
  return new RegExp(`^(?:${translate(expr)})$`, 'u');
}
