import { existsSync } from 'node:fs';
import path from 'node:path';
import type { WorkerOptions } from '@temporalio/worker';

/** Written by npm run build (infra/build-workflows.ts) at the top of dist/. */
export const WORKFLOW_BUNDLE_FILE = 'workflow-bundle.js';

/** Whether this module runs compiled (from dist/) or from the sources (tsx, jest). */
const compiled = path.extname(__filename) === '.js';

/**
 * The workflow code a worker runs. With `useBuild` (by default when this runs compiled), the
 * bundle the build made, so the worker skips webpack at start (seconds of CPU and ~100 MB);
 * otherwise (tsx, tests), the worker bundles workflows/ itself, so an edit needs no build.
 */
export function workflowCode(useBuild = compiled): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  const bundle = compiled ? path.join(__dirname, '..', WORKFLOW_BUNDLE_FILE) : path.join(__dirname, '..', 'dist', WORKFLOW_BUNDLE_FILE);
  if (useBuild && existsSync(bundle)) return { workflowBundle: { codePath: bundle } };
  return { workflowsPath: require.resolve('../workflows') };
}
