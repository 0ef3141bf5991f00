#!/usr/bin/env bash
# npm run bench -- <scenario>: the benchmarks, on a Kiln of their own. Like the test suite, they get
# their own API and workers (port 8070), database, Temporal namespace and bucket beside the shared
# services, with fixtures on: kiln/echo-fixture is what the orchestration benchmarks measure, and a
# development stack (npm start) serves no fixtures. Their processes are stopped again at the end.
# KILN_BENCH_SLOT=N (1-9) gives a run its own port (8070 - 10N), metrics ports, database, namespace,
# bucket, node id and run directory, so that two checkouts can run stack benchmarks at once.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
# The payload benchmarks measure kiln/remove-background too (AGPL-3.0 weights, fetched on request).
export KILN_OPTIONAL_MODELS="${KILN_OPTIONAL_MODELS:-remove-background}"

bench() { cd "$KILN_ROOT" && node --import tsx bench/index.ts "$@"; }
# Help, llama.cpp beside the engine alone, the embedding quality, the chat agreement with
# llama-server (the engine on a cached model) and the KV snapshot costs need no stack.
case " $* " in *" --skip-api "* | *" --help "* | *" -h "* | "  " | " embedding-quality "* | " chat-agreement "* | " kv-snapshot "*) bench "$@"; exit ;; esac

bash "$KILN_ROOT/infra/install.sh"
bash "$KILN_ROOT/infra/services.sh"
slot="${KILN_BENCH_SLOT:-0}"
[[ "$slot" =~ ^[0-9]$ ]] || die "KILN_BENCH_SLOT must be one digit (got '$slot')"
suffix=""; [ "$slot" = 0 ] || suffix="-$slot"
export KILN_RUN_DIR="$DATA/bench-stack$suffix" KILN_DATA_DIR="$DATA/bench-stack$suffix"
export PORT="${KILN_BENCH_PORT:-$((8070 - slot * 10))}"
export KILN_API_URL="http://127.0.0.1:$PORT"
export KILN_CONTROL_METRICS_PORT=$((9454 - slot * 10)) KILN_ENGINE_METRICS_PORT=$((9455 - slot * 10))
export DATABASE_URL="${KILN_BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/kiln_bench${suffix//-/_}}"
export TEMPORAL_NAMESPACE="kiln-bench$suffix" S3_BUCKET="kiln-bench$suffix" KILN_NODE_ID="bench-node-1$suffix"
export KILN_ENABLE_FIXTURES=true KILN_WEBHOOK_ALLOW_PRIVATE=true KILN_FETCH_ALLOW_PRIVATE=true
. "$KILN_ROOT/infra/app.sh"
trap stop_kiln EXIT
# Always the code of this checkout.
stop_kiln
start_kiln
bench "$@"
