/** The ESLint rule that keeps I/O out of workflows/ is part of the design: prove it bites. */
import path from 'node:path';
import { ESLint } from 'eslint';

const root = path.resolve(__dirname, '../..');
const lint = async (code: string) => {
  const eslint = new ESLint({ cwd: root });
  const [result] = await eslint.lintText(code, { filePath: path.join(root, 'workflows/example.ts') });
  return result.messages.filter((m) => m.ruleId === '@typescript-eslint/no-restricted-imports');
};

jest.setTimeout(30_000);

test.each([
  ["import { readFile } from 'node:fs/promises';\nexport const f = readFile;"],
  ["import { createControlActivities } from '../activities/control';\nexport const f = createControlActivities;"],
  ["import { createDb } from '../db/client';\nexport const f = createDb;"],
  ["import { Client } from '@temporalio/client';\nexport const f = Client;"],
])('workflows may not import %s', async (code) => {
  expect(await lint(code)).toHaveLength(1);
});

test('type-only imports of activities and pure workflow imports are allowed', async () => {
  const code = [
    "import type { createControlActivities } from '../activities/control';",
    "import { proxyActivities } from '@temporalio/workflow';",
    "export const a = proxyActivities<ReturnType<typeof createControlActivities>>({ startToCloseTimeout: '1 minute' });",
  ].join('\n');
  expect(await lint(code)).toHaveLength(0);
});
