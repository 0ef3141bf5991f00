/** Every route an Express app serves, found by walking its router stack (nested routers included). */
import type express from 'express';

export interface ServedRoute {
  method: string;
  /** In OpenAPI form: `/v1/predictions/{id}`. */
  path: string;
}

interface Layer {
  rawPath?: string | string[];
  route?: { path: string | string[]; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

const openApiPath = (expressPath: string) => expressPath.replace(/:(\w+)/g, '{$1}');

function walk(stack: Layer[], prefix: string, out: ServedRoute[]) {
  for (const layer of stack) {
    if (layer.route) {
      for (const path of [layer.route.path].flat()) {
        for (const [method, on] of Object.entries(layer.route.methods)) {
          if (on && method !== '_all') out.push({ method, path: openApiPath(prefix + path) });
        }
      }
    } else if (layer.handle?.stack) {
      const mount = typeof layer.rawPath === 'string' && layer.rawPath !== '/' ? layer.rawPath : '';
      walk(layer.handle.stack, prefix + mount, out);
    }
  }
}

export function servedRoutes(app: express.Express): ServedRoute[] {
  const out: ServedRoute[] = [];
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack, '', out);
  return out;
}
