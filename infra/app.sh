#!/usr/bin/env bash
# Kiln's own processes: the API, the control worker and an engine worker, kept alive by
# infra/supervisor.ts. Sourced by start.sh, stop.sh, test.sh and run-app.sh, which set the
# environment (ports, database, namespace) before calling these.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

# KILN_CODE=dist (npm start, npm test) runs the compiled build (npm run build; install.sh
# rebuilds it when the sources changed); KILN_CODE=tsx runs the TypeScript sources as they are.
KILN_CODE="${KILN_CODE:-dist}"
case "$KILN_CODE" in dist | tsx) ;; *) die "KILN_CODE must be dist or tsx (got '$KILN_CODE')" ;; esac
export KILN_CODE

# One engine worker per GPU where the GPU check of npm start (infra/gpu-install.sh) found GPUs
# that llama.cpp runs on with CUDA (it lists them in gpu-build.json); the one engine-worker
# otherwise. KILN_ENGINE_PER_GPU=false keeps the one (the test suite drives it by name).
engine_programs() {
  local state="${KILN_GPU_STATE_DIR:-$DATA}/gpu-build.json"
  if [ "${KILN_ENGINE_PER_GPU:-true}" = true ] && [ -f "$state" ]; then
    node -e 'console.log(require(process.argv[1]).programs.join(" "))' "$state"
  else
    echo engine-worker
  fi
}
# shellcheck disable=SC2207
KILN_PROGRAMS=(api control-worker $(engine_programs))

# node_command ENTRY: the command line that runs ENTRY (a .ts path from the root) in this mode.
# KILN_NODE_FLAGS goes to every Kiln process's node, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"
# to profile a benchmark's stack (flags NODE_OPTIONS refuses).
node_command() {
  if [ "$KILN_CODE" = dist ]; then
    local compiled="$KILN_ROOT/dist/${1%.ts}.js"
    [ -f "$compiled" ] || die "no $compiled: run npm run build (or KILN_CODE=tsx)"
    echo node ${KILN_NODE_FLAGS:-} --enable-source-maps "$compiled"
  else
    echo node ${KILN_NODE_FLAGS:-} --import tsx "$KILN_ROOT/$1"
  fi
}

exec_kiln() {
  local command
  command=$(node_command "$1")
  # shellcheck disable=SC2086
  exec $command
}

run_kiln() {
  local command
  command=$(node_command "$1")
  shift
  # shellcheck disable=SC2086
  (cd "$KILN_ROOT" && $command "$@")
}

# The engine worker parses untrusted model files, so it runs without any of the local secrets
# (root storage keys, the signing root, the sealing key, the superuser database URL): it gets
# only what setup wrote for it in engine.env (infra/engine-env.ts).
engine_environment() {
  local env_file="${KILN_DATA_DIR:-$DATA}/engine.env"
  [ -f "$env_file" ] || die "no $env_file: setup writes it"
  # shellcheck disable=SC2046
  unset $(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' "$SECRETS") \
    DATABASE_URL S3_ACCESS_KEY_ID S3_SECRET_ACCESS_KEY S3_SESSION_TOKEN \
    KILN_URL_SIGNING_KEY KILN_SECRETS_KEY KILN_SECRETS_PREVIOUS_KEYS KILN_ENGINE_DB_PASSWORD \
    KILN_ENGINE_S3_ACCESS_KEY_ID KILN_ENGINE_S3_SECRET_ACCESS_KEY
  # On a GPU host with a llama.cpp source build: its CMake options, by which node-llama-cpp finds it.
  local gpu_build="${KILN_GPU_STATE_DIR:-$DATA}/gpu-build.env"
  set -a
  # shellcheck disable=SC1090
  . "$env_file"
  # shellcheck disable=SC1090
  [ ! -f "$gpu_build" ] || . "$gpu_build"
  set +a
}

# Starts the supervisor unless it runs, and waits until every program says it serves; a
# program that dies before that fails the start, with the end of its log.
start_kiln() {
  run_kiln infra/setup.ts || die "setup failed (database, bucket, namespace or seed)"
  local pidfile="$RUN_DIR/pids/supervisor.pid" ready="$RUN_DIR/pids/supervisor.ready"
  if pid_alive "$pidfile" && [ -f "$ready" ]; then return 0; fi
  if ! pid_alive "$pidfile"; then
    rm -f "$ready"
    local command
    command=$(node_command infra/supervisor.ts)
    # shellcheck disable=SC2086
    KILN_READY_FILE="$ready" start_daemon supervisor "$pidfile" $command --run-dir "$RUN_DIR" "${KILN_PROGRAMS[@]}"
  fi
  local deadline=$((SECONDS + 180))
  until [ -f "$ready" ]; do
    if ! pid_alive "$pidfile" || [ $SECONDS -ge $deadline ]; then
      local name
      for name in "${KILN_PROGRAMS[@]}" supervisor; do
        echo "--- $RUN_DIR/logs/$name.log" >&2
        tail -n 15 "$RUN_DIR/logs/$name.log" >&2 || true
      done
      stop_pidfile "$pidfile" 20
      die "Kiln's processes did not start (logs in $RUN_DIR/logs/)"
    fi
    sleep 0.3
  done
}

stop_kiln() {
  # It gives its programs 15 s each to stop before it kills them.
  stop_pidfile "$RUN_DIR/pids/supervisor.pid" 20
  rm -f "$RUN_DIR/pids/supervisor.ready"
  # Left by a stack started before the supervisor, or by a supervisor killed with -9.
  local name
  for name in "${KILN_PROGRAMS[@]}"; do stop_pidfile "$RUN_DIR/pids/$name.pid"; done
  # ... or by a stack that ran on more GPUs than this one lists now.
  local pidfile
  for pidfile in "$RUN_DIR"/pids/engine-worker-gpu*.pid; do
    if [ -f "$pidfile" ]; then stop_pidfile "$pidfile"; fi
  done
}
