#!/usr/bin/env bash
# npm test: the same setup as npm start, then the whole suite against real stacks, in lanes.
# A lane is a stack of its own (API, workers, Temporal dev server, Postgres cluster, database,
# namespace, bucket, ports) that runs its share of the test files in band, so a file that restarts a
# process, counts rows or reads metrics sees only its own lane. KILN_TEST_LANES (1–5, default 4) sets
# how many; the files are split over them by their last durations (infra/test-lanes.ts). The suite
# never touches a running development stack; services it had to start are stopped again at the end,
# unless another checkout's suite is still using them (see suites_dir).
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
# The suite covers kiln/remove-background too, whose weights are AGPL-3.0 and fetched only on request.
export KILN_OPTIONAL_MODELS="${KILN_OPTIONAL_MODELS:-remove-background}"

bash "$KILN_ROOT/infra/install.sh" --with-browser --no-build
# The checks run side by side, each on one thread, beside the build and the lanes' stacks as they
# start (the build's tsc and the stacks' start leave a core idle for part of their time); each
# lane waits for them before its tests (wait_for_checks). A check's output is shown only when it fails.
log "typecheck, layer rules, and lint and formatting (Biome), beside the build and the stacks' start"
checks=("npm run --silent typecheck -- --singleThreaded" "npm run --silent layers:check" "npm run --silent format:check")
checks_dir=$(mktemp -d)
# Replaced by cleanup (below) once the stacks are up; either removes the checks' logs.
trap 'rm -rf "$checks_dir"' EXIT
(
  pids=()
  for i in "${!checks[@]}"; do
    # shellcheck disable=SC2086
    (cd "$KILN_ROOT" && ${checks[$i]} >"$checks_dir/$i.log" 2>&1) &
    pids+=($!)
  done
  : >"$checks_dir/failed"
  for i in "${!checks[@]}"; do wait "${pids[$i]}" || echo "$i" >>"$checks_dir/failed"; done
  touch "$checks_dir/done"
) &
# wait_for_checks: 0 once the checks are done and all passed.
wait_for_checks() {
  until [ -e "$checks_dir/done" ]; do sleep 0.2; done
  [ ! -s "$checks_dir/failed" ]
}
# report_checks: each failed check's output; 1 when one failed.
report_checks() {
  wait_for_checks && return 0
  local i
  while read -r i; do
    echo "--- ${checks[$i]}" >&2
    cat "$checks_dir/$i.log" >&2
  done <"$checks_dir/failed"
  return 1
}
bash "$KILN_ROOT/infra/build.sh" --if-changed
# Each lane runs its own Temporal dev server and Postgres (infra/suite-services.sh), except on the
# full Temporal server (KILN_TEMPORAL=server), which lives in the shared Postgres, or on a database
# named by KILN_TEST_DATABASE_URL: those run one lane. MinIO is shared: each lane has its own bucket in it.
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
# One CPU thread per engine: the lanes' engines (and the extra nodes tests start) share a small
# host's cores, and a thread per core each cost the suite a fifth more CPU (a fresh-clone run took
# 640 s and 1,135 CPU-s with one thread, against 776 s and 1,425 CPU-s with two, on two cores).
# The generated models' text then does not depend on the host's core count either.
export KILN_ENGINE_THREADS="${KILN_ENGINE_THREADS:-1}"
export LOG_LEVEL=warn
# Traces are sent within a moment of their end (test/e2e/traces.test.ts collects them).
export OTEL_BSP_SCHEDULE_DELAY=200
# Receivers in the suite listen on loopback; retries come fast so a down receiver is tested in seconds.
# Batches continue as new every 4 chunks, so the suite's batches exercise it.
export KILN_BATCH_CHUNKS_PER_RUN=4
# A small cap on a batch's input file, so the suite can go over it with a 1 MiB upload.
export KILN_BATCH_INPUT_MAX_BYTES=1048576
# Prompts of some 2,400 characters are split between prefill and decode nodes (test/e2e/prefill-split.test.ts):
# the generated models' prompts run one token a character or so, and must fit their 4,096-token context.
export KILN_PREFILL_SPLIT_MIN_TOKENS=600
export KILN_ENABLE_FIXTURES=true KILN_WEBHOOK_ALLOW_PRIVATE=true KILN_FETCH_ALLOW_PRIVATE=true KILN_WEBHOOK_RETRY_SCHEDULE=1s,1s,2s KILN_WEBHOOK_MAX_ATTEMPTS=6

# KILN_TEST_SLOT=N (N ≥ 1) gives a checkout its own ports, Temporal, Postgres, bucket and task
# queues, so that two worktrees can run their suites at once.
slot="${KILN_TEST_SLOT:-0}"
[[ "$slot" =~ ^[0-9]$ ]] || die "KILN_TEST_SLOT must be one digit (got '$slot')"
lanes="${KILN_TEST_LANES:-4}"
[[ "$lanes" =~ ^[1-5]$ ]] || die "KILN_TEST_LANES must be 1 to 5 (got '$lanes')"
# Files named on the command line run in one lane, unless KILN_TEST_LANES asks for more.
[ $# -eq 0 ] || [ -n "${KILN_TEST_LANES:-}" ] || lanes=1
if [ "$lanes" -gt 1 ] && ! { $own_temporal && $own_postgres; }; then
  log "one lane: the full Temporal server and a named database are shared, not made per lane"
  lanes=1
fi

# lane_env K: the environment of lane K of this slot. Lane 0 has the slot's own ports and names
# (8081 + 10 × slot, ...); lane K ≥ 1 has ports of its own number n = 4 × slot + K − 1 in ranges no
# slot uses (API 8200 + 10n, metrics 9200 + 10n, OTLP 4400 + 10n, Temporal 17300 + n, its UI
# 18300 + n, Postgres 15500 + n) and names suffixed -l<K>. Tests start extra APIs on PORT + 1..9.
. "$KILN_ROOT/infra/suite-services.sh"
lane_env() {
  local k=$1 suffix="" otel metrics n
  [ "$slot" = 0 ] || suffix="-$slot"
  export KILN_TEST_LANE="$k"
  if [ "$k" = 0 ]; then
    PORT="${KILN_TEST_PORT:-$((8081 + slot * 10))}" metrics=$((9474 + slot * 10)) otel=$((4318 + slot * 10))
    suite_temporal_port=$((17233 + slot)) suite_temporal_ui_port=$((18233 + slot)) suite_pg_port=$((15432 + slot))
    RUN_DIR="$DATA/test"
  else
    n=$((4 * slot + k - 1)) suffix="$suffix-l$k"
    PORT=$((8200 + 10 * n)) metrics=$((9200 + 10 * n)) otel=$((4400 + 10 * n))
    suite_temporal_port=$((17300 + n)) suite_temporal_ui_port=$((18300 + n)) suite_pg_port=$((15500 + n))
    RUN_DIR="$DATA/test-l$k"
    # Hosts of infra/netns-hosts.sh, on a subnet of the lane's own (it reads KILN_TEST_LANE).
    export KILN_NETNS_PREFIX="kiln${slot}l$k"
  fi
  suite_pg_cluster="kiln-test-$slot${suffix#"-$slot"}"
  export PORT KILN_API_URL="http://127.0.0.1:$PORT"
  export KILN_CONTROL_METRICS_PORT=$metrics KILN_ENGINE_METRICS_PORT=$((metrics + 1))
  export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$otel"
  export KILN_RUN_DIR="$RUN_DIR" KILN_DATA_DIR="$RUN_DIR"
  mkdir -p "$RUN_DIR/logs" "$RUN_DIR/pids"
  local pg_port=5432; $own_postgres && pg_port=$suite_pg_port
  export DATABASE_URL="${KILN_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:$pg_port/kiln_test${suffix//-/_}}"
  export TEMPORAL_NAMESPACE="kiln-test$suffix" S3_BUCKET="kiln-test$suffix" KILN_NODE_ID="test-node-1$suffix"
  if $own_temporal; then
    export TEMPORAL_ADDRESS="127.0.0.1:$suite_temporal_port" KILN_TEMPORAL_UI_URL="http://127.0.0.1:$suite_temporal_ui_port"
  fi
}
. "$KILN_ROOT/infra/app.sh"

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

stop_lane() {
  lane_env "$1"
  stop_kiln
  ! $own_temporal || stop_suite_temporal
  ! $own_postgres || stop_suite_postgres
}

cleanup() {
  local k pids=()
  for k in $(seq 0 $((lanes - 1))); do (stop_lane "$k") & pids+=($!); done
  wait "${pids[@]}" || true
  rm -f "$suites_dir/$$"
  rm -rf "$checks_dir"
  if [ "${#stop_list[@]}" -gt 0 ] && other_suites_running; then
    log "leaving ${stop_list[*]} running: another checkout's suite is using them"
    return
  fi
  for svc in "${stop_list[@]}"; do stop_pidfile "$DATA/pids/$svc.pid"; done
}
trap cleanup EXIT

lanes_dir="$DATA/test-lanes"
rm -rf "$lanes_dir"
mkdir -p "$lanes_dir"
if [ "$lanes" -gt 1 ]; then
  (cd "$KILN_ROOT" && jest --listTests --json "$@") >"$lanes_dir/files.json" || die "jest could not list the test files"
  lanes=$(run_kiln infra/test-lanes.ts plan "$lanes" "$lanes_dir" <"$lanes_dir/files.json") || die "planning the lanes failed"
else
  : >"$lanes_dir/lane-0.files"
fi

# run_lane K: lane K's stack, always the code of this checkout on fresh services and bucket, then jest
# on the lane's files (on the command line's arguments with one lane). Its results and the times jest
# started and ended go to $lanes_dir; its stack is stopped as soon as its files are done.
run_lane() {
  local k=$1 pids=() pid status
  shift
  lane_env "$k"
  # shellcheck disable=SC2064
  trap "stop_lane $k" EXIT
  stop_kiln
  ! $own_temporal || { start_suite_temporal & pids+=($!); }
  ! $own_postgres || { start_suite_postgres & pids+=($!); }
  for pid in "${pids[@]}"; do wait "$pid" || die "the suite's Temporal or Postgres did not start"; done
  run_kiln infra/empty-bucket.ts || die "emptying the suite's bucket $S3_BUCKET failed"
  start_kiln
  wait_for_checks || { echo "typecheck, lint, layer rules or formatting failed: no tests run"; return 1; }
  local args=("$@")
  if [ "$lanes" -gt 1 ]; then
    mapfile -t args <"$lanes_dir/lane-$k.files"
    args=(--runTestsByPath "${args[@]}")
  fi
  echo "$(date +%s)" >"$lanes_dir/lane-$k.times"
  # The lane's tests and the processes they start (extra engine nodes and APIs, with their logs and
  # model caches) keep their temp files in a folder of the lane's own: removed once its files pass,
  # kept for a look when one failed (and removed by the slot's next run).
  local lane_tmp="${TMPDIR:-/tmp}/kiln-test-$slot-lane-$k"
  rm -rf "$lane_tmp" && mkdir -p "$lane_tmp"
  set +e
  (cd "$KILN_ROOT" && TMPDIR="$lane_tmp" NODE_OPTIONS=--experimental-vm-modules jest --runInBand --json --outputFile="$lanes_dir/lane-$k.results.json" "${args[@]}")
  status=$?
  set -e
  if [ "$status" = 0 ]; then rm -rf "$lane_tmp"; else log "lane $k's temp files (logs of the processes its tests started) are in $lane_tmp"; fi
  echo "$(cat "$lanes_dir/lane-$k.times") $(date +%s)" >"$lanes_dir/lane-$k.times"
  return $status
}

if [ "$lanes" = 1 ]; then
  (run_lane 0 "$@") && status=0 || status=$?
else
  lane_pids=()
  for k in $(seq 0 $((lanes - 1))); do
    # Each line of a lane's output says which lane it came from.
    { (run_lane "$k") && echo 0 >"$lanes_dir/lane-$k.status" || echo $? >"$lanes_dir/lane-$k.status"; } 2>&1 | sed -u "s/^/[lane $k] /" &
    lane_pids+=($!)
  done
  wait "${lane_pids[@]}" || true
  status=0
  for k in $(seq 0 $((lanes - 1))); do
    s=$(cat "$lanes_dir/lane-$k.status" 2>/dev/null || echo 1)
    [ "$s" = 0 ] || status=$s
  done
fi
report_checks || die "typecheck, lint, layer rules or formatting failed"
run_kiln infra/test-lanes.ts summary "$lanes_dir" "$SECONDS" "$lanes"
exit $status
