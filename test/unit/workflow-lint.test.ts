/**
 * The lint rule that keeps I/O out of workflows/ (biome.json's override for workflows/**) is part
 * of the design: prove it bites. Imports of Kiln's own folders are the layer rules' (dependency-
 * cruiser, test/unit/layers.test.ts): activities by type only, nothing of db/, lib/ or engines/.
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const root = path.resolve(__dirname, '../..');
const biome = path.join(root, 'node_modules', '.bin', 'biome');
let dir: string;

beforeAll(async () => {
  // A project of its own with the repository's Biome configuration: the probe never enters the tree.
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-workflow-lint-'));
  await cp(path.join(root, 'biome.json'), path.join(dir, 'biome.json'));
  await mkdir(path.join(dir, 'workflows'));
});

afterAll(() => rm(dir, { recursive: true, force: true }));

interface Diagnostic {
  category: string;
  message: string;
}

/** The restricted-import diagnostics Biome gives `code` as a file of workflows/. */
async function restrictedImports(code: string): Promise<Diagnostic[]> {
  await writeFile(path.join(dir, 'workflows', 'example.ts'), code);
  const out = await promisify(execFile)(biome, ['lint', '--vcs-enabled=false', '--reporter=json', 'workflows/example.ts'], {
    cwd: dir,
  }).then(
    (r) => r.stdout,
    (err: { stdout?: string }) => err.stdout ?? '',
  );
  const report = JSON.parse(out.slice(out.indexOf('{'), out.lastIndexOf('}') + 1)) as { diagnostics: Diagnostic[] };
  return report.diagnostics.filter((d) => d.category === 'lint/style/noRestrictedImports');
}

jest.setTimeout(30_000);

test.each([
  ["import { readFile } from 'node:fs/promises';\nexport const f = readFile;", 'no Node built-ins'],
  ["import { createHash } from 'crypto';\nexport const f = createHash;", 'no Node built-ins'],
  ["import { Client } from '@temporalio/client';\nexport const f = Client;", 'only import @temporalio/workflow'],
  ["import postgres from 'postgres';\nexport const f = postgres;", 'I/O belongs in activities'],
  ["import { S3Client } from '@aws-sdk/client-s3';\nexport const f = S3Client;", 'I/O belongs in activities'],
])('workflows may not import %s', async (code, message) => {
  const found = await restrictedImports(code);
  expect(found).toHaveLength(1);
  expect(found[0].message).toContain(message);
});

test('type-only imports of activities and pure workflow imports are allowed', async () => {
  const code = [
    "import type { createControlActivities } from '../activities/control';",
    "import { proxyActivities } from '@temporalio/workflow';",
    "export const a = proxyActivities<ReturnType<typeof createControlActivities>>({ startToCloseTimeout: '1 minute' });",
  ].join('\n');
  expect(await restrictedImports(code)).toEqual([]);
});
