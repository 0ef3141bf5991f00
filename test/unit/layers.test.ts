/**
 * The layer rules (.dependency-cruiser.cjs) are part of the design: prove each one bites, on a
 * small house of its own where every forbidden arrow is drawn once.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const root = path.resolve(__dirname, '../..');
const depcruise = path.join(root, 'node_modules/.bin/depcruise');
const run = promisify(execFile);

/** file → what it imports (relative to the house's root), and whether by type only. */
type House = Record<string, Array<{ to: string; typeOnly?: boolean }>>;

async function violations(house: House): Promise<string[]> {
  const dir = await mkdtemp(path.join(tmpdir(), 'kiln-layers-'));
  try {
    await writeFile(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', strict: true } }),
    );
    const files = new Set([...Object.keys(house), ...Object.values(house).flatMap((deps) => deps.map((d) => d.to))]);
    for (const file of files) {
      const deps = house[file] ?? [];
      const lines = deps.map(({ to, typeOnly }, i) => {
        let spec = path.relative(path.dirname(file), to);
        if (!spec.startsWith('.')) spec = `./${spec}`;
        return typeOnly
          ? `import type { T } from '${spec}';\nexport type U${i} = T;`
          : `import { v } from '${spec}';\nexport const u${i} = v;`;
      });
      await mkdir(path.join(dir, path.dirname(file)), { recursive: true });
      await writeFile(path.join(dir, `${file}.ts`), [...lines, 'export const v = 1;', 'export type T = number;'].join('\n'));
    }
    const folders = [...new Set([...files].map((f) => f.split('/')[0]))];
    const { stdout } = await run(depcruise, ['--config', path.join(root, '.dependency-cruiser.cjs'), '--output-type', 'json', ...folders], {
      cwd: dir,
    }).catch(
      // depcruise exits non-zero when it finds violations; its report is still on stdout.
      (err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }),
    );
    const report = JSON.parse(stdout) as { summary: { violations: Array<{ rule: { name: string } }> } };
    return report.summary.violations.map((v) => v.rule.name).sort();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

jest.setTimeout(60_000);

test.each([
  ['lib-points-down', { 'lib/helper': [{ to: 'db/client' }] }],
  ['domain-points-down', { 'domain/contracts': [{ to: 'db/schema', typeOnly: true }] }],
  ['db-points-down', { 'db/models': [{ to: 'engines/llama/engine' }] }],
  ['engines-points-down', { 'engines/llama/engine': [{ to: 'activities/engine', typeOnly: true }] }],
  ['activities-points-down', { 'activities/engine': [{ to: 'workers/engine-node' }] }],
  ['workflows-points-down', { 'workflows/prediction': [{ to: 'db/predictions', typeOnly: true }] }],
  ['workflows-import-activities-by-type', { 'workflows/prediction': [{ to: 'activities/control' }] }],
  ['api-points-down', { 'api/routes': [{ to: 'engines/llama/memory' }] }],
  ['api-imports-workflows-by-type', { 'api/create': [{ to: 'workflows/prediction' }] }],
  ['no-cycles', { 'db/predictions': [{ to: 'db/usage', typeOnly: true }], 'db/usage': [{ to: 'db/predictions', typeOnly: true }] }],
])('%s fires', async (rule, house) => {
  expect(await violations(house as House)).toEqual(expect.arrayContaining([rule]));
});

test('arrows that point down pass', async () => {
  const house: House = {
    'workers/engine-node': [{ to: 'activities/engine' }, { to: 'engines/llama/engine' }],
    'api/routes': [{ to: 'workflows/prediction', typeOnly: true }, { to: 'db/models' }, { to: 'domain/contracts' }],
    'workflows/prediction': [{ to: 'activities/engine', typeOnly: true }, { to: 'domain/contracts' }],
    'activities/engine': [{ to: 'engines/llama/engine' }, { to: 'db/models' }],
    'engines/llama/engine': [{ to: 'domain/failures' }, { to: 'lib/ids' }],
    'db/models': [{ to: 'domain/statuses' }, { to: 'lib/ids' }],
    'domain/contracts': [{ to: 'lib/ids' }],
  };
  expect(await violations(house)).toEqual([]);
});
