#!/usr/bin/env bash
# Runs one of Kiln's processes in the foreground: `bash infra/run-app.sh api|control-worker|engine-worker`.
# It execs the process, so whoever started this (infra/supervisor.ts, a systemd unit) watches the
# process itself. The environment (ports, database, namespace) comes from the caller.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
. "$KILN_ROOT/infra/app.sh"

case "${1:-}" in
  api) exec_kiln api/index.ts ;;
  control-worker)
    export KILN_METRICS_PORT="${KILN_CONTROL_METRICS_PORT:-9464}"
    exec_kiln workers/control-worker.ts
    ;;
  engine-worker)
    engine_environment
    export KILN_METRICS_PORT="${KILN_ENGINE_METRICS_PORT:-9465}"
    exec_kiln workers/engine-worker.ts
    ;;
  *) die "usage: infra/run-app.sh api|control-worker|engine-worker" ;;
esac
