# Shared settings of the infra scripts. Sourced, not run.
# Binaries built from Go modules live in a per-user cache keyed by version, outside the clone,
# so fresh clones and CI reuse them. Runtime data lives in the clone's .data/.
set -euo pipefail

KILN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export KILN_ROOT
export PATH="$KILN_ROOT/node_modules/.bin:$PATH:/usr/local/go/bin"
# The AWS SDK warns on every start that it will want Node 22 in 2027; we know.
export AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true

TEMPORAL_CLI_VERSION="v1.5.1"
MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
KILN_CACHE="${KILN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln}"
export KILN_CACHE
TEMPORAL_BIN="$KILN_CACHE/bin/temporal-$TEMPORAL_CLI_VERSION/temporal"
MINIO_BIN="$KILN_CACHE/bin/minio-$MINIO_VERSION/minio"
export TEMPORAL_BIN MINIO_BIN
# The full Temporal server (production path, opt-in): the release the CLI above embeds.
TEMPORAL_SERVER_VERSION="v1.29.1"
TEMPORAL_SERVER_BIN="$KILN_CACHE/bin/temporal-server-$TEMPORAL_SERVER_VERSION/temporal-server"
TEMPORAL_SQL_TOOL_BIN="$KILN_CACHE/bin/temporal-sql-tool-$TEMPORAL_SERVER_VERSION/temporal-sql-tool"
# The Web UI beside the full server: the UI server release the CLI above embeds in its dev server.
TEMPORAL_UI_SERVER_VERSION="v2.42.1"
TEMPORAL_UI_SERVER_BIN="$KILN_CACHE/bin/temporal-ui-server-$TEMPORAL_UI_SERVER_VERSION/temporal-ui-server"

DATA="$KILN_ROOT/.data"
# Tests run their own API and workers under .data/test; services are shared.
RUN_DIR="${KILN_RUN_DIR:-$DATA}"
mkdir -p "$DATA/logs" "$DATA/pids" "$RUN_DIR/logs" "$RUN_DIR/pids"

TEMPORAL_PORT=7233
TEMPORAL_UI_PORT=8233
# KILN_TEMPORAL=server runs Kiln on the full Temporal server on Postgres (infra/temporal-server.sh)
# instead of the dev server; its frontend listens beside the dev server's, so both can be up.
KILN_TEMPORAL="${KILN_TEMPORAL:-dev}"
TEMPORAL_SERVER_PORT=7243
TEMPORAL_SERVER_UI_PORT=8243
case "$KILN_TEMPORAL" in
  # The UI of the server in use: the API links each prediction to its workflow there (urls.temporal_ui).
  dev) export KILN_TEMPORAL_UI_URL="${KILN_TEMPORAL_UI_URL:-http://127.0.0.1:$TEMPORAL_UI_PORT}" ;;
  server)
    export TEMPORAL_ADDRESS="${TEMPORAL_ADDRESS:-127.0.0.1:$TEMPORAL_SERVER_PORT}"
    export KILN_TEMPORAL_UI_URL="${KILN_TEMPORAL_UI_URL:-http://127.0.0.1:$TEMPORAL_SERVER_UI_PORT}"
    ;;
  *) echo "kiln: KILN_TEMPORAL must be dev or server (got '$KILN_TEMPORAL')" >&2; exit 1 ;;
esac
MINIO_PORT=9000
MINIO_CONSOLE_PORT=9001

# Local secrets (MinIO root credentials, signing and sealing keys) are made once per user, never committed. They live
# beside the binaries so that whichever clone started MinIO, every clone can reach it.
SECRETS="$KILN_CACHE/local-secrets.env"
mkdir -p "$KILN_CACHE"
random_hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }
ensure_secret() {
  grep -q "^$1=" "$SECRETS" 2>/dev/null || (umask 077; echo "$1=$2" >>"$SECRETS")
}
ensure_secret S3_ACCESS_KEY_ID "kiln$(random_hex 6)"
ensure_secret S3_SECRET_ACCESS_KEY "$(random_hex 24)"
ensure_secret KILN_URL_SIGNING_KEY "$(random_hex 32)"
# What a metrics scraper sends as its bearer token for the API's /metrics.
ensure_secret KILN_METRICS_TOKEN "$(random_hex 24)"
# What an operator sends to the API's codec server (/codec), which shows payloads stored by reference in the Temporal UI and CLI.
ensure_secret KILN_OPERATOR_TOKEN "$(random_hex 24)"
# Seals the webhook secrets stored in Postgres (AES-256-GCM); 32 bytes, hex.
ensure_secret KILN_SECRETS_KEY "$(random_hex 32)"
# The engine's own Postgres role (kiln_engine), made by setup.
ensure_secret KILN_ENGINE_DB_PASSWORD "$(random_hex 24)"
set -a
# shellcheck disable=SC1090
. "$SECRETS"
set +a

log() { printf '\033[1mkiln\033[0m %s\n' "$*" >&2; }
die() { printf '\033[31mkiln: %s\033[0m\n' "$*" >&2; exit 1; }

# wait_for NAME SECONDS COMMAND...: polls COMMAND until it succeeds; names the component that did not come up.
wait_for() {
  local name=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      die "$name is not healthy after ${seconds}s (log: $DATA/logs/$name.log)"
    fi
    sleep 0.3
  done
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# start_daemon NAME PIDFILE COMMAND...: detached from this shell (own session, no inherited
# stdio), so that CI and terminals never wait on it.
start_daemon() {
  local name=$1 pidfile=$2; shift 2
  local logfile="$(dirname "$(dirname "$pidfile")")/logs/$name.log"
  [ -f "$logfile" ] && mv "$logfile" "$logfile.1"
  setsid nohup "$@" >"$logfile" 2>&1 </dev/null &
  echo $! >"$pidfile"
}

# KILN_CONTROL_NICE, checked: the nice (0-19) of the control plane the local stack starts (the API,
# the control worker, and the Temporal dev server, MinIO and Postgres where these scripts start them),
# so that the engine's llama.cpp threads win a core when both want it.
control_nice() {
  local n="${KILN_CONTROL_NICE:-0}"
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -le 19 ] || die "KILN_CONTROL_NICE must be 0 to 19 (got '$n')"
  echo "$n"
}

# start_temporal_dev NAME PIDFILE PORT UI_PORT DB_FILE NAMESPACE...: the Temporal CLI's dev
# server, with fairness on and Kiln's search attributes; its state lives in DB_FILE (SQLite).
start_temporal_dev() {
  local name=$1 pidfile=$2 port=$3 ui_port=$4 db_file=$5; shift 5
  local namespaces=() ns
  for ns in "$@"; do namespaces+=(--namespace "$ns"); done
  local n; n=$(control_nice) || exit 1
  start_daemon "$name" "$pidfile" nice -n "$n" "$TEMPORAL_BIN" server start-dev \
    --ip 127.0.0.1 --port "$port" --ui-port "$ui_port" \
    --db-filename "$db_file" \
    --sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=normal \
    "${namespaces[@]}" \
    --dynamic-config-value matching.enableFairness=${KILN_TEMPORAL_FAIRNESS:-true} \
    --dynamic-config-value matching.numTaskqueueReadPartitions=${KILN_TEMPORAL_PARTITIONS:-1} \
    --dynamic-config-value matching.numTaskqueueWritePartitions=${KILN_TEMPORAL_PARTITIONS:-1} \
    --search-attribute KilnAccount=Keyword \
    --search-attribute KilnModel=Keyword \
    --search-attribute KilnStatus=Keyword \
    --log-level warn
}

# clone_llama_source DEST: the llama.cpp source node-llama-cpp ships (its git bundle) checked out
# in DEST, with node-llama-cpp's patches applied as its own build applies them after cloning: each
# one it cannot tell is already upstream.
clone_llama_source() {
  local dest=$1 nlc="$KILN_ROOT/node_modules/node-llama-cpp" patch
  [ -f "$nlc/llama/gitRelease.bundle" ] || die "no $nlc/llama/gitRelease.bundle: is node-llama-cpp installed?"
  git clone -q "$nlc/llama/gitRelease.bundle" "$dest" 2>/dev/null || die "cannot clone $nlc/llama/gitRelease.bundle"
  for patch in "$nlc"/llama/patches/*.diff; do
    [ -f "$patch" ] || continue
    if git -C "$dest" apply --check --ignore-whitespace "$patch" 2>/dev/null; then
      git -C "$dest" apply --ignore-whitespace "$patch"
    fi
  done
}

temporal_serving() { "$TEMPORAL_BIN" operator cluster health --address "127.0.0.1:$1" 2>/dev/null | grep -q SERVING; }

# stop_pidfile PIDFILE [SECONDS]: TERM, then KILL after SECONDS (15).
stop_pidfile() {
  local pidfile=$1 seconds=${2:-15}
  [ -f "$pidfile" ] || return 0
  local pid; pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((seconds * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}
