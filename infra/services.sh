#!/usr/bin/env bash
# Starts Temporal (the dev server, or with KILN_TEMPORAL=server the full server on Postgres),
# MinIO and Postgres if they are not up, and waits until each is healthy. Running it again
# while everything is up changes nothing.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

temporal_healthy() { "$TEMPORAL_BIN" operator cluster health --address "127.0.0.1:$TEMPORAL_PORT" 2>/dev/null | grep -q SERVING; }

start_temporal() {
  if temporal_healthy; then return 0; fi
  if port_open $TEMPORAL_PORT; then
    wait_for temporal 60 temporal_healthy
    return 0
  fi
  log "starting Temporal dev server (gRPC :$TEMPORAL_PORT, UI :$TEMPORAL_UI_PORT)"
  start_daemon temporal "$DATA/pids/temporal.pid" "$TEMPORAL_BIN" server start-dev \
    --ip 127.0.0.1 --port $TEMPORAL_PORT --ui-port $TEMPORAL_UI_PORT \
    --db-filename "$DATA/temporal.sqlite" \
    --sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=normal \
    --namespace default --namespace kiln-test \
    --dynamic-config-value matching.enableFairness=${KILN_TEMPORAL_FAIRNESS:-true} \
    --dynamic-config-value matching.numTaskqueueReadPartitions=${KILN_TEMPORAL_PARTITIONS:-1} \
    --dynamic-config-value matching.numTaskqueueWritePartitions=${KILN_TEMPORAL_PARTITIONS:-1} \
    --search-attribute KilnAccount=Keyword \
    --search-attribute KilnModel=Keyword \
    --search-attribute KilnStatus=Keyword \
    --log-level warn
  wait_for temporal 90 temporal_healthy
}

minio_healthy() { curl -fsS "http://127.0.0.1:$MINIO_PORT/minio/health/ready"; }

start_minio() {
  if minio_healthy >/dev/null 2>&1; then return 0; fi
  if ! port_open $MINIO_PORT; then
    log "starting MinIO (S3 API :$MINIO_PORT)"
    mkdir -p "$DATA/minio"
    MINIO_ROOT_USER="$S3_ACCESS_KEY_ID" MINIO_ROOT_PASSWORD="$S3_SECRET_ACCESS_KEY" MINIO_BROWSER=off \
      start_daemon minio "$DATA/pids/minio.pid" "$MINIO_BIN" server "$DATA/minio" \
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
    pg_ctlcluster --skip-systemctl-redirect "$version" main start >>"$DATA/logs/postgres.log" 2>&1 || true
  done
  wait_for postgres 30 postgres_ready
}

start_postgres &
pg=$!
start_minio &
mn=$!
if [ "$KILN_TEMPORAL" = server ]; then
  # The full server keeps its state in Postgres, so it starts once Postgres is up.
  wait $pg || die "PostgreSQL did not start (log: $DATA/logs/postgres.log)"
  bash "$KILN_ROOT/infra/temporal-server.sh" start || die "Temporal did not start (log: $DATA/logs/temporal-server.log)"
else
  start_temporal &
  tp=$!
  wait $pg || die "PostgreSQL did not start (log: $DATA/logs/postgres.log)"
  wait $tp || die "Temporal did not start (log: $DATA/logs/temporal.log)"
fi
wait $mn || die "MinIO did not start (log: $DATA/logs/minio.log)"
