#!/usr/bin/env bash
# Kiln's own processes: the API, the control worker and an engine worker. Sourced by start.sh
# and test.sh, which set the environment (ports, database, namespace) before calling these.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

run_ts() { node --import tsx "$@"; }

# start_app NAME ENTRY: starts it unless its pid file names a live process, and waits until the
# process says it is serving (lib/ready.ts writes the file named by KILN_READY_FILE).
start_app() {
  local name=$1 entry=$2
  local pidfile="$RUN_DIR/pids/$name.pid" ready="$RUN_DIR/pids/$name.ready"
  if pid_alive "$pidfile"; then return 0; fi
  rm -f "$ready"
  KILN_READY_FILE="$ready" start_daemon "$name" "$pidfile" node --import tsx "$KILN_ROOT/$entry"
  wait_for_app "$name" 120 test -f "$ready"
}

# Like wait_for, but also notices a process that died, and shows the end of its log.
wait_for_app() {
  local name=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds)) pidfile="$RUN_DIR/pids/$name.pid"
  until "$@" >/dev/null 2>&1; do
    if ! pid_alive "$pidfile" || [ $SECONDS -ge $deadline ]; then
      tail -n 20 "$RUN_DIR/logs/$name.log" >&2 || true
      die "$name is not healthy (log: $RUN_DIR/logs/$name.log)"
    fi
    sleep 0.3
  done
}

# The engine worker parses untrusted model files, so it starts without any of the local secrets
# (root storage keys, the signing root, the sealing key, the superuser database URL): it gets
# only what setup wrote for it in engine.env (infra/engine-env.ts).
start_engine_worker() {
  local env_file="${KILN_DATA_DIR:-$DATA}/engine.env"
  [ -f "$env_file" ] || die "no $env_file: setup writes it"
  (
    # shellcheck disable=SC2046
    unset $(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' "$SECRETS") \
      DATABASE_URL S3_ACCESS_KEY_ID S3_SECRET_ACCESS_KEY S3_SESSION_TOKEN \
      KILN_URL_SIGNING_KEY KILN_SECRETS_KEY KILN_SECRETS_PREVIOUS_KEYS KILN_ENGINE_DB_PASSWORD \
      KILN_ENGINE_S3_ACCESS_KEY_ID KILN_ENGINE_S3_SECRET_ACCESS_KEY
    set -a
    # shellcheck disable=SC1090
    . "$env_file"
    set +a
    start_app engine-worker workers/engine-worker.ts
  )
}

start_kiln() {
  (cd "$KILN_ROOT" && run_ts infra/setup.ts) || die "setup failed (database, bucket, namespace or seed)"
  KILN_METRICS_PORT="${KILN_CONTROL_METRICS_PORT:-9464}" start_app control-worker workers/control-worker.ts &
  local cw=$!
  KILN_METRICS_PORT="${KILN_ENGINE_METRICS_PORT:-9465}" start_engine_worker &
  local ew=$!
  start_app api api/index.ts &
  local ap=$!
  wait $cw || die "the control worker did not start"
  wait $ew || die "the engine worker did not start"
  wait $ap || die "the API did not start"
}

stop_kiln() {
  for name in api control-worker engine-worker; do stop_pidfile "$RUN_DIR/pids/$name.pid"; done
}
