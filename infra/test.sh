#!/usr/bin/env bash
# npm test: the same setup as npm start, then the whole suite against the real stack.
# The suite gets its own API, workers, database, Temporal namespace and bucket, so it never
# touches a running development stack; services it had to start are stopped again at the end,
# unless another checkout's suite is still using them (see suites_dir).
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
# The suite covers kiln/remove-background too, whose weights are AGPL-3.0 and fetched only on request.
export KILN_OPTIONAL_MODELS="${KILN_OPTIONAL_MODELS:-remove-background}"

bash "$KILN_ROOT/infra/install.sh" --with-browser
log "typecheck, lint, layer rules and formatting"
(cd "$KILN_ROOT" && tsc --noEmit && eslint . && npm run --silent layers:check && npm run --silent format:check) || die "typecheck, lint, layer rules or formatting failed"
# The suite runs its own Temporal dev server and Postgres (infra/suite-services.sh), except on the
# full Temporal server (KILN_TEMPORAL=server), which lives in the shared Postgres, or on a database
# named by KILN_TEST_DATABASE_URL. MinIO is shared: the suite has its own bucket in it.
own_temporal=true; [ "$KILN_TEMPORAL" = server ] && own_temporal=false
own_postgres=true; { [ -n "${KILN_TEST_DATABASE_URL:-}" ] || ! $own_temporal; } && own_postgres=false
shared=(minio); $own_temporal || shared+=(temporal); $own_postgres || shared+=(postgres)
ours=()
temporal_svc=""; $own_temporal || temporal_svc="temporal-server temporal-ui"
for svc in $temporal_svc minio; do pid_alive "$DATA/pids/$svc.pid" || ours+=("$svc"); done
bash "$KILN_ROOT/infra/services.sh" "${shared[@]}"
# Only those that were not up before and that this clone now runs.
stop_list=()
for svc in "${ours[@]}"; do pid_alive "$DATA/pids/$svc.pid" && stop_list+=("$svc"); done

export KILN_ENV=test
# One engine worker even on a GPU host: the suite drives it by its name and node id.
export KILN_ENGINE_PER_GPU=false
export KILN_RUN_DIR="$DATA/test" KILN_DATA_DIR="$DATA/test"
# KILN_TEST_SLOT=N (N ≥ 1) gives a checkout its own ports, Temporal, Postgres, bucket and task
# queues, so that two worktrees can run their suites at once.
slot="${KILN_TEST_SLOT:-0}"
[[ "$slot" =~ ^[0-9]$ ]] || die "KILN_TEST_SLOT must be one digit (got '$slot')"
suffix=""; [ "$slot" = 0 ] || suffix="-$slot"
export PORT="${KILN_TEST_PORT:-$((8081 + slot * 10))}"
export KILN_API_URL="http://127.0.0.1:$PORT"
export KILN_CONTROL_METRICS_PORT=$((9474 + slot * 10)) KILN_ENGINE_METRICS_PORT=$((9475 + slot * 10))
pg_port=5432; $own_postgres && pg_port=$((15432 + slot))
export DATABASE_URL="${KILN_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:$pg_port/kiln_test${suffix//-/_}}"
export TEMPORAL_NAMESPACE="kiln-test$suffix" S3_BUCKET="kiln-test$suffix" KILN_NODE_ID="test-node-1$suffix"
export LOG_LEVEL=warn
# Traces go to the port test/e2e/traces.test.ts collects them on, sent within a moment.
export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$((4318 + slot * 10))" OTEL_BSP_SCHEDULE_DELAY=200
# Receivers in the suite listen on loopback; retries come fast so a down receiver is tested in seconds.
# Batches continue as new every 4 chunks, so the suite's batches exercise it.
export KILN_BATCH_CHUNKS_PER_RUN=4
# A small cap on a batch's input file, so the suite can go over it with a 1 MiB upload.
export KILN_BATCH_INPUT_MAX_BYTES=1048576
# Prompts of some 2,400 characters are split between prefill and decode nodes (test/e2e/prefill-split.test.ts):
# the generated models' prompts run one token a character or so, and must fit their 4,096-token context.
export KILN_PREFILL_SPLIT_MIN_TOKENS=600
export KILN_ENABLE_FIXTURES=true KILN_WEBHOOK_ALLOW_PRIVATE=true KILN_FETCH_ALLOW_PRIVATE=true KILN_WEBHOOK_RETRY_SCHEDULE=1s,1s,2s KILN_WEBHOOK_MAX_ATTEMPTS=6
if $own_temporal; then
  export TEMPORAL_ADDRESS="127.0.0.1:$((17233 + slot))" KILN_TEMPORAL_UI_URL="http://127.0.0.1:$((18233 + slot))"
fi
. "$KILN_ROOT/infra/app.sh"
. "$KILN_ROOT/infra/suite-services.sh"

# Suites of several worktrees share MinIO (and the full Temporal server with its Postgres): each
# registers itself here, and the one that started them leaves them up while another still runs.
suites_dir="${TMPDIR:-/tmp}/kiln-test-suites-$(id -u)"
mkdir -p "$suites_dir"
echo "$KILN_ROOT" > "$suites_dir/$$"
other_suites_running() {
  local f pid
  for f in "$suites_dir"/*; do
    [ -e "$f" ] || continue
    pid=$(basename "$f")
    [ "$pid" = "$$" ] && continue
    if kill -0 "$pid" 2>/dev/null; then return 0; else rm -f "$f"; fi
  done
  return 1
}

cleanup() {
  stop_kiln
  ! $own_temporal || stop_suite_temporal
  ! $own_postgres || stop_suite_postgres
  rm -f "$suites_dir/$$"
  if [ "${#stop_list[@]}" -gt 0 ] && other_suites_running; then
    log "leaving ${stop_list[*]} running: another checkout's suite is using them"
    return
  fi
  for svc in "${stop_list[@]}"; do stop_pidfile "$DATA/pids/$svc.pid"; done
}
trap cleanup EXIT

# Always the code of this checkout: restart the suite's own processes, on fresh services and bucket.
stop_kiln
pids=()
! $own_temporal || { start_suite_temporal & pids+=($!); }
! $own_postgres || { start_suite_postgres & pids+=($!); }
for pid in "${pids[@]}"; do wait "$pid" || die "the suite's Temporal or Postgres did not start"; done
run_kiln infra/empty-bucket.ts || die "emptying the suite's bucket $S3_BUCKET failed"
start_kiln

results="$RUN_DIR/jest-results.json"
rm -f "$results"
suite_started=$SECONDS
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
  const [jest, total] = process.argv.slice(2).map(Number);
  console.log(`npm test took ${total} s: jest ${jest} s, setup (install check, typecheck, lint, stack) ${total - jest} s`);
  // The suite runs in band, so the files of a tier add up to its share of the wall time.
  const tiers = {};
  for (const t of r.testResults) {
    const tier = (t.name.match(/\/test\/(unit|integration|e2e|replay)\//) || [, "other"])[1];
    tiers[tier] = (tiers[tier] || 0) + (t.endTime - t.startTime) / 1000;
  }
  console.log("by tier: " + Object.entries(tiers).map(([k, v]) => `${k} ${Math.round(v)} s`).join(", "));
  console.log(`${r.numPassedTests} passed, ${failed} failed`);
' "$results" "$((SECONDS - suite_started))" "$SECONDS"
exit $status
