/**
 * The layer rules (.dependency-cruiser.cjs) are part of the design: prove each one bites, on a
 * small house of its own where every forbidden arrow is drawn once.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const repo = path.resolve(__dirname, '../..');
const cruiser = path.join(__dirname, '..', 'cruise-houses.mjs');
const run = promisify(execFile);

/** file → what it imports (relative to the house's root), and whether by type only. */
type House = Record<string, Array<{ to: string; typeOnly?: boolean }>>;

/** Writes `house` under `dir`: one small TypeScript file per module, importing what the house says. */
async function writeHouse(dir: string, house: House): Promise<void> {
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
}

/** The rules each house violates, by the layer rules in .dependency-cruiser.cjs, all cruised in one process. */
async function violationsOf(houses: House[]): Promise<string[][]> {
  const root = await mkdtemp(path.join(tmpdir(), 'kiln-layers-'));
  try {
    const dirs = houses.map((_, i) => path.join(root, `house-${i}`));
    for (const [i, house] of houses.entries()) {
      await mkdir(dirs[i]);
      await writeHouse(dirs[i], house);
    }
    const { stdout } = await run(process.execPath, [cruiser, path.join(repo, '.dependency-cruiser.cjs'), ...dirs]);
    const found = JSON.parse(stdout) as Record<string, string[]>;
    return dirs.map((dir) => found[dir]);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** Each rule with a house that draws its forbidden arrow once. */
const firing: Array<[string, House]> = [
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
];

/** A house whose every arrow points down. */
const downward: House = {
  'workers/engine-node': [{ to: 'activities/engine' }, { to: 'engines/llama/engine' }],
  'api/routes': [{ to: 'workflows/prediction', typeOnly: true }, { to: 'db/models' }, { to: 'domain/contracts' }],
  'workflows/prediction': [{ to: 'activities/engine', typeOnly: true }, { to: 'domain/contracts' }],
  'activities/engine': [{ to: 'engines/llama/engine' }, { to: 'db/models' }],
  'engines/llama/engine': [{ to: 'domain/failures' }, { to: 'lib/ids' }],
  'db/models': [{ to: 'domain/statuses' }, { to: 'lib/ids' }],
  'domain/contracts': [{ to: 'lib/ids' }],
};

let found: string[][];
beforeAll(async () => {
  found = await violationsOf([...firing.map(([, house]) => house), downward]);
}, 60_000);

test.each(firing.map(([rule], i) => [rule, i] as const))('%s fires', (rule, i) => {
  expect(found[i]).toEqual(expect.arrayContaining([rule]));
});

test('arrows that point down pass', () => {
  expect(found[firing.length]).toEqual([]);
});
