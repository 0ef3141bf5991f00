// @ts-check
import tseslint from 'typescript-eslint';

/** Anything that does I/O or is not deterministic: none of it may run inside a workflow. */
const workflowForbidden = [
  { group: ['node:*'], message: 'Workflows are deterministic: no Node built-ins. Do it in an activity.' },
  {
    group: ['fs', 'fs/*', 'path', 'os', 'crypto', 'http', 'https', 'net', 'child_process', 'stream', 'worker_threads', 'dns', 'timers'],
    message: 'Workflows are deterministic: no Node built-ins. Do it in an activity.',
  },
  {
    group: ['@temporalio/client', '@temporalio/worker', '@temporalio/activity', '@temporalio/testing'],
    message: 'Workflows only import @temporalio/workflow and @temporalio/common.',
  },
  {
    group: ['postgres', 'drizzle-orm', 'drizzle-orm/*', '@aws-sdk/*', 'express', 'pino', 'node-llama-cpp', 'onnxruntime-node'],
    message: 'I/O belongs in activities.',
  },
  {
    group: [
      '../activities',
      '../activities/*',
      '../db/*',
      '../lib/*',
      '../api/*',
      '../workers/*',
      '../infra/*',
      '../engines',
      '../engines/*',
    ],
    allowTypeImports: true,
    message:
      'Workflows import activities (and other I/O modules) by type only: `import type`. Deterministic data and rules live in domain/.',
  },
];

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', '.data/', 'db/migrations/', 'scratch/', 'coverage/'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': 'off',
      '@typescript-eslint/no-restricted-imports': ['error', { patterns: workflowForbidden }],
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
