/**
 * The part of npm run build (infra/build.sh) that tsc does not do: copies the files the compiled
 * code reads at run time beside it, and bundles the workflow code once (and once more with the
 * tracing interceptors), so that a compiled control worker starts without running webpack
 * (workers/workflow-code.ts loads the bundle).
 */
import { cpSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { TRACED_WORKFLOW_BUNDLE_FILE, TRACING_WORKFLOW_INTERCEPTORS, WORKFLOW_BUNDLE_FILE } from '../workers/workflow-code';

const ROOT = path.resolve(__dirname, '..');
const DIST = path.join(ROOT, 'dist');
/** Read at run time relative to the code that reads them (api/app.ts, db/client.ts). */
const ASSETS = ['api/playground', 'db/migrations'];

async function main() {
  for (const asset of ASSETS) {
    rmSync(path.join(DIST, asset), { recursive: true, force: true });
    cpSync(path.join(ROOT, asset), path.join(DIST, asset), { recursive: true });
  }
  const quiet = () => undefined;
  const logger = {
    log: quiet,
    trace: quiet,
    debug: quiet,
    info: quiet,
    warn: (m: string) => console.warn(m),
    error: (m: string) => console.error(m),
  };
  const workflowsPath = path.join(DIST, 'workflows/index.js');
  for (const [file, workflowInterceptorModules] of [
    [WORKFLOW_BUNDLE_FILE, []],
    [TRACED_WORKFLOW_BUNDLE_FILE, [TRACING_WORKFLOW_INTERCEPTORS]],
  ] as const) {
    const { code } = await bundleWorkflowCode({ workflowsPath, workflowInterceptorModules: [...workflowInterceptorModules], logger });
    writeFileSync(path.join(DIST, file), code);
    console.log(`workflow bundle: dist/${file} (${(code.length / 1024).toFixed(0)} KiB)`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
