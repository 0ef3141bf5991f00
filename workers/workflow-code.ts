import { existsSync } from 'node:fs';
import path from 'node:path';
import type { WorkerOptions } from '@temporalio/worker';

/** Written by npm run build (infra/build-workflows.ts) at the top of dist/. */
export const WORKFLOW_BUNDLE_FILE = 'workflow-bundle.js';
/** The same workflows with the tracing interceptors in, for a worker that traces (below). */
export const TRACED_WORKFLOW_BUNDLE_FILE = 'workflow-bundle-traced.js';
/**
 * The workflow interceptors of Temporal's OpenTelemetry plugin. The plugin adds them only when the
 * worker bundles workflows itself; a prebuilt bundle must have them in already.
 */
export const TRACING_WORKFLOW_INTERCEPTORS = require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

/** Whether this module runs compiled (from dist/) or from the sources (tsx, jest). */
const compiled = path.extname(__filename) === '.js';

/**
 * The workflow code a worker runs. With `useBuild` (by default when this runs compiled), the
 * bundle the build made (`traced`: the one with the tracing interceptors, for a worker with the
 * OpenTelemetry plugin), so the worker skips webpack at start (3–5 s of CPU and ~100 MB);
 * otherwise (tsx, tests), the worker bundles workflows/ itself, so an edit needs no build.
 */
export function workflowCode({
  useBuild = compiled,
  traced = false,
}: {
  useBuild?: boolean;
  traced?: boolean;
} = {}): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  const file = traced ? TRACED_WORKFLOW_BUNDLE_FILE : WORKFLOW_BUNDLE_FILE;
  const bundle = compiled ? path.join(__dirname, '..', file) : path.join(__dirname, '..', 'dist', file);
  if (useBuild && existsSync(bundle)) return { workflowBundle: { codePath: bundle } };
  return { workflowsPath: require.resolve('../workflows') };
}
