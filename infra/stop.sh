#!/usr/bin/env bash
# npm run stop: stops Kiln's processes and the services that Kiln started (Postgres is the machine's).
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
. "$KILN_ROOT/infra/app.sh"
stop_kiln
KILN_RUN_DIR="$DATA/test" RUN_DIR="$DATA/test"
[ -d "$RUN_DIR/pids" ] && stop_kiln
stop_pidfile "$DATA/pids/minio.pid"
stop_pidfile "$DATA/pids/temporal.pid"
stop_pidfile "$DATA/pids/temporal-ui.pid"
stop_pidfile "$DATA/pids/temporal-server.pid"
log "stopped"
