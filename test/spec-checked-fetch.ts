/**
 * A `fetch` for API clients (replicate, openai) that checks each response against the route
 * contracts `/openapi.json` is generated from: the operation must be documented, the status
 * among its responses, and a JSON body must parse with that response's schema and carry no
 * field the schema does not name. Tests read `problems` (empty when everything matched).
 */
import { isDeepStrictEqual } from 'node:util';
import type { ResponseConfig } from '@asteasolutions/zod-to-openapi';
import type { z } from 'zod';
import { routeContracts } from '../api/openapi';
import type { RouteContract } from '../api/route-contract';

interface MediaType {
  schema?: unknown;
}

const matcher = (c: RouteContract) => new RegExp(`^${c.path.replace(/\{\w+\}/g, '[^/]+')}$`);
const compiled = routeContracts.map((c) => ({ contract: c, re: matcher(c) }));

function contractFor(method: string, path: string): RouteContract | undefined {
  return compiled.find(({ contract, re }) => contract.method === method && re.test(path))?.contract;
}

/** Paths (a.b.0.c) present in `body` but dropped by the schema's parse: fields the schema does not declare. */
function undeclared(body: unknown, parsed: unknown, at = ''): string[] {
  if (isDeepStrictEqual(body, parsed)) return [];
  if (Array.isArray(body) && Array.isArray(parsed)) return body.flatMap((b, i) => undeclared(b, parsed[i], `${at}${i}.`));
  if (body && parsed && typeof body === 'object' && typeof parsed === 'object') {
    return Object.keys(body).flatMap((k) =>
      k in parsed ? undeclared((body as Record<string, unknown>)[k], (parsed as Record<string, unknown>)[k], `${at}${k}.`) : [`${at}${k}`],
    );
  }
  return [`${at.replace(/\.$/, '')} (changed by the schema)`];
}

export interface SpecCheckedFetch {
  fetch: typeof fetch;
  /** One line per response that does not match the spec. */
  problems: string[];
  /** `METHOD /path-template status` of every response checked. */
  seen: string[];
}

export function specCheckedFetch(): SpecCheckedFetch {
  const problems: string[] = [];
  const seen: string[] = [];
  const checked: typeof fetch = async (input, init) => {
    const request = new Request(input, init);
    const res = await fetch(input, init);
    const method = request.method.toLowerCase();
    const path = new URL(request.url).pathname;
    const contract = contractFor(method, path);
    const what = `${method.toUpperCase()} ${path} ${res.status}`;
    if (!contract) {
      problems.push(`${what}: no operation in the spec`);
      return res;
    }
    seen.push(`${method.toUpperCase()} ${contract.path} ${res.status}`);
    const response = contract.responses[String(res.status)] as ResponseConfig | undefined;
    if (!response) {
      problems.push(`${what}: status not among the operation's responses`);
      return res;
    }
    const type = res.headers.get('content-type')?.split(';')[0] ?? '';
    const media = (response.content as Record<string, MediaType | undefined> | undefined)?.[type];
    if (type !== '' && !media) problems.push(`${what}: ${type} not among the response's content types`);
    if (type === 'application/json' && media?.schema) {
      const body: unknown = await res.clone().json();
      const result = (media.schema as z.ZodType).safeParse(body);
      if (!result.success) problems.push(`${what}: ${result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
      else for (const field of undeclared(body, result.data)) problems.push(`${what}: undeclared field ${field}`);
    }
    return res;
  };
  return { fetch: checked, problems, seen };
}
