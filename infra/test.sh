#!/usr/bin/env bash
# npm test: the same setup as npm start, then the whole suite against the real stack.
# The suite gets its own API, workers, database, Temporal namespace and bucket, so it never
# touches a running development stack; services it had to start are stopped again at the end.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

bash "$KILN_ROOT/infra/install.sh"
log "typecheck and lint"
(cd "$KILN_ROOT" && tsc --noEmit && eslint .) || die "typecheck or lint failed"
ours=()
for svc in temporal minio; do pid_alive "$DATA/pids/$svc.pid" || ours+=("$svc"); done
bash "$KILN_ROOT/infra/services.sh"
# Only those that were not up before and that this clone now runs.
stop_list=()
for svc in "${ours[@]}"; do pid_alive "$DATA/pids/$svc.pid" && stop_list+=("$svc"); done

export KILN_ENV=test
export KILN_RUN_DIR="$DATA/test" KILN_DATA_DIR="$DATA/test"
export PORT="${KILN_TEST_PORT:-8081}"
export KILN_API_URL="http://127.0.0.1:$PORT"
export KILN_CONTROL_METRICS_PORT=9474 KILN_ENGINE_METRICS_PORT=9475
export DATABASE_URL="${KILN_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/kiln_test}"
export TEMPORAL_NAMESPACE=kiln-test S3_BUCKET=kiln-test KILN_NODE_ID=test-node-1
export LOG_LEVEL=warn
# Receivers in the suite listen on loopback; retries come fast so a down receiver is tested in seconds.
export KILN_ENABLE_FIXTURES=true KILN_WEBHOOK_ALLOW_PRIVATE=true KILN_FETCH_ALLOW_PRIVATE=true KILN_WEBHOOK_RETRY_SCHEDULE=1s,1s,2s KILN_WEBHOOK_MAX_ATTEMPTS=6
. "$KILN_ROOT/infra/app.sh"

cleanup() {
  stop_kiln
  for svc in "${stop_list[@]}"; do stop_pidfile "$DATA/pids/$svc.pid"; done
}
trap cleanup EXIT

# Always the code of this checkout: restart the suite's own processes.
stop_kiln
start_kiln

results="$RUN_DIR/jest-results.json"
rm -f "$results"
set +e
NODE_OPTIONS=--experimental-vm-modules npx jest --runInBand --json --outputFile="$results" "$@"
status=$?
set -e
node -e '
  const fs = require("fs");
  const f = process.argv[1];
  if (!fs.existsSync(f)) { console.log("0 passed, 1 failed"); process.exit(0); }
  const r = JSON.parse(fs.readFileSync(f, "utf8"));
  const failed = r.numFailedTests + (r.numRuntimeErrorTestSuites || 0);
  console.log(`${r.numPassedTests} passed, ${failed} failed`);
' "$results"
exit $status
