#!/usr/bin/env bash
# Kiln's own processes: the API, the control worker and an engine worker. Sourced by start.sh
# and test.sh, which set the environment (ports, database, namespace) before calling these.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

run_ts() { node --import tsx "$@"; }

api_healthy() { curl -fsS "http://127.0.0.1:${PORT:-8080}/healthz"; }
log_says() { grep -q "$2" "$RUN_DIR/logs/$1.log"; }

# start_app NAME ENTRY READY-CHECK...: starts it unless its pid file names a live process.
start_app() {
  local name=$1 entry=$2; shift 2
  local pidfile="$RUN_DIR/pids/$name.pid"
  if pid_alive "$pidfile"; then return 0; fi
  start_daemon "$name" "$pidfile" node --import tsx "$KILN_ROOT/$entry"
  wait_for_app "$name" 120 "$@"
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

start_kiln() {
  (cd "$KILN_ROOT" && run_ts infra/setup.ts) || die "setup failed (database, bucket, namespace or seed)"
  start_app control-worker workers/control-worker.ts log_says control-worker 'control worker up' &
  local cw=$!
  start_app engine-worker workers/engine-worker.ts log_says engine-worker 'engine node up' &
  local ew=$!
  start_app api api/index.ts api_healthy &
  local ap=$!
  wait $cw || die "the control worker did not start"
  wait $ew || die "the engine worker did not start"
  wait $ap || die "the API did not start"
}

stop_kiln() {
  for name in api control-worker engine-worker; do stop_pidfile "$RUN_DIR/pids/$name.pid"; done
}
