/**
 * The packages the GPU check needs at run time (infra/gpu-pack.sh copies them): node-llama-cpp and
 * what its `dependencies` need in turn, found as node resolves them, one folder a line relative to
 * the repository. Its optional dependencies are left out: they are the prebuilt binaries, which the
 * check replaces with its own build.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

function packageDir(name: string, from: string): string | undefined {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (path.dirname(dir) === dir) return undefined;
  }
}

export function runtimePackages(root: string, name: string): string[] {
  const seen = new Set<string>();
  const walk = (dir: string) => {
    if (seen.has(dir)) return;
    seen.add(dir);
    const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    for (const dep of Object.keys(manifest.dependencies ?? {})) {
      const found = packageDir(dep, dir);
      if (!found) throw new Error(`${dep} (a dependency of ${path.relative(root, dir)}) is not installed`);
      walk(found);
    }
  };
  const start = packageDir(name, root);
  if (!start) throw new Error(`${name} is not installed`);
  walk(start);
  return [...seen].map((d) => path.relative(root, d)).sort();
}

if (require.main === module) console.log(runtimePackages(process.cwd(), process.argv[2] ?? 'node-llama-cpp').join('\n'));
