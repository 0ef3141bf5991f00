#!/usr/bin/env bash
# The test suite's own Temporal dev server and Postgres cluster, on the ports of its slot, made
# fresh for each run and removed at its end. The chaos tests restart them (test/chaos.ts), so they
# must never be the developer's: a running `npm start`, another worktree's suite and the
# benchmarks keep the shared ones (infra/services.sh). Sourced by test.sh after env.sh.

# The caller sets the ports and the cluster's name (test.sh's lane_env: Temporal 17233 + slot, its
# UI 18233 + slot, Postgres 15432 + slot, cluster kiln-test-<slot>, for lane 0):
# suite_temporal_port, suite_temporal_ui_port, suite_pg_port, suite_pg_cluster.

suite_pg_version() { ls /etc/postgresql 2>/dev/null | sort -V | tail -1; }

suite_pg_ready() { pg_isready -q -h 127.0.0.1 -p "$suite_pg_port"; }

# A Debian cluster (postgresql-common), trusted on loopback only, without the durability a test
# database does not need: a crash of the machine loses nothing a rerun would not make again.
start_suite_postgres() {
  local version; version=$(suite_pg_version)
  command -v pg_createcluster >/dev/null && [ -n "$version" ] \
    || die "the suite runs its own Postgres cluster with Debian's pg_createcluster (postgresql-common), which is not here"
  pg_dropcluster --stop "$version" "$suite_pg_cluster" >/dev/null 2>&1 || true
  log "starting the suite's Postgres (cluster $version/$suite_pg_cluster, :$suite_pg_port)"
  local n; n=$(control_nice) || exit 1
  nice -n "$n" pg_createcluster "$version" "$suite_pg_cluster" -p "$suite_pg_port" \
    -o fsync=off -o synchronous_commit=off -o full_page_writes=off \
    -o max_connections=200 --start -- --auth=trust >"$RUN_DIR/logs/postgres-create.log" 2>&1 \
    || die "creating the suite's Postgres cluster failed (log: $RUN_DIR/logs/postgres-create.log)"
  wait_for postgres 30 suite_pg_ready
}

stop_suite_postgres() {
  local version; version=$(suite_pg_version)
  [ -n "$version" ] && pg_dropcluster --stop "$version" "$suite_pg_cluster" >/dev/null 2>&1 || true
}

suite_temporal_healthy() { temporal_serving "$suite_temporal_port"; }

start_suite_temporal() {
  stop_pidfile "$RUN_DIR/pids/temporal.pid"
  rm -f "$RUN_DIR"/temporal.sqlite*
  log "starting the suite's Temporal dev server (:$suite_temporal_port, UI :$suite_temporal_ui_port)"
  start_temporal_dev temporal "$RUN_DIR/pids/temporal.pid" "$suite_temporal_port" "$suite_temporal_ui_port" \
    "$RUN_DIR/temporal.sqlite" "$TEMPORAL_NAMESPACE"
  wait_for temporal 90 suite_temporal_healthy
}

stop_suite_temporal() {
  stop_pidfile "$RUN_DIR/pids/temporal.pid"
  rm -f "$RUN_DIR"/temporal.sqlite*
}
