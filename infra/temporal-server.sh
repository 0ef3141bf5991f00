#!/usr/bin/env bash
# The production path: Temporal as the full server (frontend, history, matching and worker
# services in one process) persisting to Postgres, instead of the CLI's SQLite dev server.
#   bash infra/temporal-server.sh [start]   builds it if missing, sets up the databases, starts it
#   bash infra/temporal-server.sh stop
# Its Web UI (Temporal's UI server, built from Go modules like the server) runs beside it on
# :8243 (TEMPORAL_SERVER_UI_PORT), as the dev server's does on 8233.
# Safe to run again: databases, schema and namespaces that are already right are left alone.
# Its ports sit beside the dev server's (7233), so both can run on one machine.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

PG_HOST="${KILN_TEMPORAL_PG_HOST:-127.0.0.1}"
PG_PORT="${KILN_TEMPORAL_PG_PORT:-5432}"
PG_USER="${KILN_TEMPORAL_PG_USER:-postgres}"
SERVER_DIR="$DATA/temporal-server"
# How long Temporal keeps a closed workflow's history (the same setting as KILN_TEMPORAL_RETENTION
# in lib/config.ts, which setup applies to the namespace it is given).
RETENTION="${KILN_TEMPORAL_RETENTION:-7d}"
# Closed histories are archived to this S3 bucket (MinIO here) before retention deletes them, so
# a projection can still be rebuilt from them (`temporal workflow show --archived` reads them back).
ARCHIVE_BUCKET="${KILN_ARCHIVE_BUCKET:-kiln-archive}"
ARCHIVE_URI="s3://$ARCHIVE_BUCKET"
S3_ENDPOINT="${S3_ENDPOINT:-http://127.0.0.1:$MINIO_PORT}" S3_REGION="${S3_REGION:-us-east-1}"
PIDFILE="$DATA/pids/temporal-server.pid"
UI_PIDFILE="$DATA/pids/temporal-ui.pid"
ADDRESS="127.0.0.1:$TEMPORAL_SERVER_PORT"
UI_URL="http://127.0.0.1:$TEMPORAL_SERVER_UI_PORT"

server_healthy() { "$TEMPORAL_BIN" operator cluster health --address "$ADDRESS" 2>/dev/null | grep -q SERVING; }

sql_tool() { "$TEMPORAL_SQL_TOOL_BIN" --plugin postgres12 --ep "$PG_HOST" -p "$PG_PORT" -u "$PG_USER" --db "$@"; }
psql_at() { psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d "$1" -Atqc "$2"; }

# ensure_schema DB NAME: NAME is the schema embedded in temporal-sql-tool (the same files as the
# module's schema/postgresql/v12/NAME), so the tool and the schema always match the server build.
ensure_schema() {
  local db=$1 name=$2 schema_log="$DATA/logs/temporal-schema-$1.log"
  if [ -z "$(psql_at postgres "select 1 from pg_database where datname = '$db'")" ]; then
    log "creating Postgres database $db"
    sql_tool "$db" create-database >>"$schema_log" 2>&1 || die "creating $db failed (log: $schema_log)"
  fi
  if [ -z "$(psql_at "$db" "select to_regclass('schema_version')")" ]; then
    sql_tool "$db" setup-schema -v 0.0 >>"$schema_log" 2>&1 || die "setting up the $db schema failed (log: $schema_log)"
  fi
  # Applies only the versions newer than the database's; nothing when it is current.
  sql_tool "$db" update-schema --schema-name "postgresql/v12/$name" >>"$schema_log" 2>&1 ||
    die "updating the $db schema failed (log: $schema_log)"
}

write_config() {
  mkdir -p "$SERVER_DIR/config"
  local p=$TEMPORAL_SERVER_PORT
  # Fair dispatch by fairness key and weight is what admission relies on; it is off by default.
  # It orders tasks within one partition, so a laptop-sized queue keeps one (a cluster serving
  # hundreds of predictions a second raises both counts and accepts approximate fairness).
  cat >"$SERVER_DIR/dynamicconfig.yaml" <<YAML
matching.enableFairness:
  - value: ${KILN_TEMPORAL_FAIRNESS:-true}
matching.numTaskqueueReadPartitions:
  - value: ${KILN_TEMPORAL_PARTITIONS:-1}
matching.numTaskqueueWritePartitions:
  - value: ${KILN_TEMPORAL_PARTITIONS:-1}
limit.maxIDLength:
  - value: 255
YAML
  cat >"$SERVER_DIR/config/kiln.yaml" <<YAML
log:
  stdout: true
  level: ${KILN_TEMPORAL_LOG_LEVEL:-warn}
persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: ${KILN_TEMPORAL_HISTORY_SHARDS:-4}
  datastores:
    postgres-default:
      sql:
        pluginName: postgres12
        databaseName: temporal
        connectAddr: "$PG_HOST:$PG_PORT"
        connectProtocol: tcp
        user: "$PG_USER"
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    postgres-visibility:
      sql:
        pluginName: postgres12
        databaseName: temporal_visibility
        connectAddr: "$PG_HOST:$PG_PORT"
        connectProtocol: tcp
        user: "$PG_USER"
        maxConns: 10
        maxConnLifetime: 1h
        maxIdleConns: 10
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
  metrics:
    prometheus:
      framework: tally
      timerType: histogram
      listenAddress: "127.0.0.1:$((p + 17))"
services:
  frontend:
    rpc: { grpcPort: $p, httpPort: $((p + 10)), membershipPort: $((p - 300)), bindOnLocalHost: true }
  history:
    rpc: { grpcPort: $((p + 1)), membershipPort: $((p - 299)), bindOnLocalHost: true }
  matching:
    rpc: { grpcPort: $((p + 2)), membershipPort: $((p - 298)), bindOnLocalHost: true }
  worker:
    rpc: { grpcPort: $((p + 6)), membershipPort: $((p - 294)), bindOnLocalHost: true }
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "127.0.0.1:$p"
      httpAddress: "127.0.0.1:$((p + 10))"
dcRedirectionPolicy:
  policy: noop
# Temporal's own archival: histories (and visibility records) of closed workflows go to S3 when
# retention ends. The S3 provider reads credentials from the AWS environment the server gets.
archival:
  history: &archival
    state: enabled
    enableRead: true
    provider:
      s3store:
        region: "$S3_REGION"
        endpoint: "$S3_ENDPOINT"
        s3ForcePathStyle: true
  visibility: *archival
namespaceDefaults:
  archival:
    history:
      state: enabled
      URI: "$ARCHIVE_URI"
    visibility:
      state: enabled
      URI: "$ARCHIVE_URI"
dynamicConfigClient:
  filepath: "$SERVER_DIR/dynamicconfig.yaml"
  pollInterval: 10s
YAML
}

# The namespaces npm start and npm test use by default, with the search attributes the
# predictions carry; infra/setup.ts does the same for whichever namespace it is given.
ensure_namespace() {
  local ns=$1 existing
  if "$TEMPORAL_BIN" operator namespace describe --address "$ADDRESS" -n "$ns" >/dev/null 2>&1; then
    "$TEMPORAL_BIN" operator namespace update --address "$ADDRESS" -n "$ns" --retention "$RETENTION" \
      --history-archival-state enabled --visibility-archival-state enabled >/dev/null
  else
    "$TEMPORAL_BIN" operator namespace create --address "$ADDRESS" -n "$ns" --retention "$RETENTION" \
      --history-archival-state enabled --history-uri "$ARCHIVE_URI" \
      --visibility-archival-state enabled --visibility-uri "$ARCHIVE_URI" >/dev/null
  fi
  # A new namespace reaches the frontend's namespace cache within seconds, not at once.
  wait_for temporal-server 30 "$TEMPORAL_BIN" operator search-attribute list --address "$ADDRESS" -n "$ns"
  existing=$("$TEMPORAL_BIN" operator search-attribute list --address "$ADDRESS" -n "$ns")
  for sa in KilnAccount KilnModel KilnStatus; do
    grep -qw "$sa" <<<"$existing" ||
      "$TEMPORAL_BIN" operator search-attribute create --address "$ADDRESS" -n "$ns" --name "$sa" --type Keyword >/dev/null
  done
}

# The archival provider checks that the bucket exists when a namespace names it.
ensure_archive_bucket() {
  local s3=(--aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_ACCESS_KEY_ID:$S3_SECRET_ACCESS_KEY")
  wait_for minio 60 curl -fsS "$S3_ENDPOINT/minio/health/ready"
  curl -fsS -o /dev/null -I "${s3[@]}" "$S3_ENDPOINT/$ARCHIVE_BUCKET" 2>/dev/null ||
    curl -fsS -o /dev/null -X PUT "${s3[@]}" "$S3_ENDPOINT/$ARCHIVE_BUCKET" || die "cannot create the archive bucket $ARCHIVE_BUCKET"
}

start() {
  if ! server_healthy; then start_server; fi
  ensure_archive_bucket
  for ns in default kiln-test; do ensure_namespace "$ns"; done
  start_ui
}

ui_healthy() { curl -fsS -o /dev/null "$UI_URL/" 2>/dev/null; }

start_ui() {
  if ui_healthy; then return 0; fi
  if ! pid_alive "$UI_PIDFILE"; then
    [ -x "$TEMPORAL_UI_SERVER_BIN" ] || bash "$KILN_ROOT/infra/install.sh" temporal-server
    mkdir -p "$SERVER_DIR/ui/config"
    # The UI's own config file (--env kiln reads config/kiln.yaml); the browser talks to this
    # server only, which calls the frontend over gRPC.
    cat >"$SERVER_DIR/ui/config/kiln.yaml" <<YAML
temporalGrpcAddress: "$ADDRESS"
host: 127.0.0.1
port: $TEMPORAL_SERVER_UI_PORT
enableUi: true
defaultNamespace: default
notifyOnNewVersion: false
cors:
  cookieInsecure: true
  allowOrigins: []
YAML
    log "starting the Temporal UI ($UI_URL)"
    start_daemon temporal-ui "$UI_PIDFILE" "$TEMPORAL_UI_SERVER_BIN" --root "$SERVER_DIR/ui" --config config --env kiln start
  fi
  wait_for temporal-ui 60 ui_healthy
}

start_server() {
  bash "$KILN_ROOT/infra/install.sh" temporal-server
  pg_isready -q -h "$PG_HOST" -p "$PG_PORT" || die "Postgres is not up on $PG_HOST:$PG_PORT (bash infra/services.sh starts it)"
  ensure_schema temporal temporal
  ensure_schema temporal_visibility visibility
  if ! pid_alive "$PIDFILE"; then
    write_config
    log "starting Temporal server on Postgres (gRPC :$TEMPORAL_SERVER_PORT)"
    AWS_ACCESS_KEY_ID="$S3_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$S3_SECRET_ACCESS_KEY" AWS_REGION="$S3_REGION" \
      start_daemon temporal-server "$PIDFILE" "$TEMPORAL_SERVER_BIN" \
      --root "$SERVER_DIR" --config config --env kiln --allow-no-auth start
  fi
  wait_for temporal-server 120 server_healthy
}

case "${1:-start}" in
  start) start ;;
  stop)
    stop_pidfile "$UI_PIDFILE"
    stop_pidfile "$PIDFILE"
    ;;
  *) die "usage: infra/temporal-server.sh [start|stop]" ;;
esac
