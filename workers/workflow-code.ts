import type { WorkerOptions } from '@temporalio/worker';
import { existsSync } from 'node:fs';
import path from 'node:path';

/** Written by npm run build (infra/build-workflows.ts) at the top of dist/. */
export const WORKFLOW_BUNDLE_FILE = 'workflow-bundle.js';

/**
 * The workflow code a worker runs. Compiled (dist/), it is the bundle the build made, so the
 * worker skips webpack at start (seconds of CPU and ~100 MB); from the sources (tsx, tests), the
 * worker bundles workflows/ itself, so an edit needs no build.
 */
export function workflowCode(): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  const bundle = path.join(__dirname, '..', WORKFLOW_BUNDLE_FILE);
  if (path.extname(__filename) === '.js' && existsSync(bundle)) return { workflowBundle: { codePath: bundle } };
  return { workflowsPath: require.resolve('../workflows') };
}
