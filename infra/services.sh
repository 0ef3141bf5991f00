#!/usr/bin/env bash
# Starts Temporal (the dev server, or with KILN_TEMPORAL=server the full server on Postgres),
# MinIO and Postgres if they are not up, and waits until each is healthy. Running it again
# while everything is up changes nothing.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

temporal_healthy() { temporal_serving $TEMPORAL_PORT; }

start_temporal() {
  if temporal_healthy; then return 0; fi
  if port_open $TEMPORAL_PORT; then
    wait_for temporal 60 temporal_healthy
    return 0
  fi
  log "starting Temporal dev server (gRPC :$TEMPORAL_PORT, UI :$TEMPORAL_UI_PORT)"
  start_temporal_dev temporal "$DATA/pids/temporal.pid" $TEMPORAL_PORT $TEMPORAL_UI_PORT "$DATA/temporal.sqlite" default kiln-test
  wait_for temporal 90 temporal_healthy
}

minio_healthy() { curl -fsS "http://127.0.0.1:$MINIO_PORT/minio/health/ready"; }

start_minio() {
  if minio_healthy >/dev/null 2>&1; then return 0; fi
  if ! port_open $MINIO_PORT; then
    log "starting MinIO (S3 API :$MINIO_PORT)"
    mkdir -p "$DATA/minio"
    MINIO_ROOT_USER="$S3_ACCESS_KEY_ID" MINIO_ROOT_PASSWORD="$S3_SECRET_ACCESS_KEY" MINIO_BROWSER=off \
      start_daemon minio "$DATA/pids/minio.pid" nice -n "$nice_level" "$MINIO_BIN" server "$DATA/minio" \
      --address "127.0.0.1:$MINIO_PORT" --console-address "127.0.0.1:$MINIO_CONSOLE_PORT" --quiet
  fi
  wait_for minio 60 minio_healthy
}

postgres_ready() { pg_isready -q -h 127.0.0.1 -p 5432; }

start_postgres() {
  if postgres_ready; then return 0; fi
  log "starting PostgreSQL"
  local version
  for version in $(ls /etc/postgresql 2>/dev/null); do
    nice -n "$nice_level" pg_ctlcluster --skip-systemctl-redirect "$version" main start >>"$DATA/logs/postgres.log" 2>&1 || true
  done
  wait_for postgres 30 postgres_ready
}

# What these scripts start runs at KILN_CONTROL_NICE, as the API and the control worker do (env.sh).
nice_level=$(control_nice) || exit 1

# Arguments pick some of them (the test suite runs its own Temporal and Postgres): services.sh minio
services=" ${*:-postgres temporal minio} "
wants() { [[ "$services" == *" $1 "* ]]; }

pg=""; mn=""; tp=""
if wants postgres || { wants temporal && [ "$KILN_TEMPORAL" = server ]; }; then start_postgres & pg=$!; fi
if wants minio; then start_minio & mn=$!; fi
if wants temporal; then
  if [ "$KILN_TEMPORAL" = server ]; then
    # The full server keeps its state in Postgres, so it starts once Postgres is up.
    wait $pg || die "PostgreSQL did not start (log: $DATA/logs/postgres.log)"
    pg=""
    bash "$KILN_ROOT/infra/temporal-server.sh" start || die "Temporal did not start (log: $DATA/logs/temporal-server.log)"
  else
    start_temporal & tp=$!
  fi
fi
[ -z "$pg" ] || wait $pg || die "PostgreSQL did not start (log: $DATA/logs/postgres.log)"
[ -z "$tp" ] || wait $tp || die "Temporal did not start (log: $DATA/logs/temporal.log)"
[ -z "$mn" ] || wait $mn || die "MinIO did not start (log: $DATA/logs/minio.log)"
