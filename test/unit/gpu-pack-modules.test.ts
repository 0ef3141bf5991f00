/**
 * The packages the GPU check's pack carries: node-llama-cpp and what it needs at run time, as the
 * installed node_modules resolves them, without the prebuilt binaries (its optional dependencies).
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runtimePackages } from '../../infra/gpu-pack-modules';

const root = path.resolve(__dirname, '../..');

describe('runtimePackages', () => {
  it("holds node-llama-cpp, node-addon-api (the addon build's headers) and no prebuilt", () => {
    const packages = runtimePackages(root, 'node-llama-cpp');
    expect(packages).toContain('node_modules/node-llama-cpp');
    expect(packages.filter((p) => p.endsWith('node_modules/node-addon-api'))).toHaveLength(1);
    expect(packages.filter((p) => p.includes('@node-llama-cpp/'))).toEqual([]);
    for (const p of packages) expect(existsSync(path.join(root, p, 'package.json'))).toBe(true);
  });

  it('finds a nested copy before the top-level one, and names a missing dependency', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'kiln-gpu-pack-'));
    try {
      const write = (pkg: string, manifest: object) => {
        mkdirSync(path.join(dir, pkg), { recursive: true });
        writeFileSync(path.join(dir, pkg, 'package.json'), JSON.stringify(manifest));
      };
      write('node_modules/a', { name: 'a', dependencies: { b: '1' }, optionalDependencies: { prebuilt: '1' } });
      write('node_modules/a/node_modules/b', { name: 'b', dependencies: { c: '1' } });
      write('node_modules/b', { name: 'b' });
      write('node_modules/c', { name: 'c' });
      expect(runtimePackages(dir, 'a')).toEqual(['node_modules/a', 'node_modules/a/node_modules/b', 'node_modules/c']);
      write('node_modules/c', { name: 'c', dependencies: { gone: '1' } });
      expect(() => runtimePackages(dir, 'a')).toThrow('gone (a dependency of node_modules/c) is not installed');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
