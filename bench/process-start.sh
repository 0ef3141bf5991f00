#!/usr/bin/env bash
# npm start's processes, one at a time: start time (spawn to ready file) and resident memory
# (VmRSS 3 s after ready), run from the sources (tsx) and from the build (dist/, npm run build).
# Floor: a bare `node -e` that writes its ready file. Own database, namespace and bucket
# (kiln_measure_<slot>), so it never touches a running stack.   ROUNDS=3 bash bench/process-start.sh
. "$(dirname "${BASH_SOURCE[0]}")/../infra/env.sh"
slot=${KILN_TEST_SLOT:-0}; suffix=""; [ "$slot" = 0 ] || suffix="-$slot"
export KILN_ENV=test KILN_RUN_DIR="$DATA/measure" KILN_DATA_DIR="$DATA/measure"
export PORT=$((8081 + slot * 10 + 5)) KILN_CONTROL_METRICS_PORT=0 KILN_ENGINE_METRICS_PORT=0
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/kiln_measure${suffix//-/_}"
export TEMPORAL_NAMESPACE="kiln-measure$suffix" S3_BUCKET="kiln-measure$suffix" KILN_NODE_ID="measure-node$suffix"
export KILN_CONTROL_QUEUE="measure-control$suffix" LOG_LEVEL=warn KILN_ENABLE_FIXTURES=true
mkdir -p "$KILN_RUN_DIR"
bash "$KILN_ROOT/infra/build.sh" --if-changed
(cd "$KILN_ROOT" && node --import tsx infra/setup.ts) >"$KILN_RUN_DIR/setup.log" 2>&1 || { cat "$KILN_RUN_DIR/setup.log"; exit 1; }
rounds=${ROUNDS:-3}
measure() { # MODE NAME -> "ms rss_kib"
  local mode=$1 name=$2 ready="$KILN_RUN_DIR/$2.ready" t0 pid
  rm -f "$ready"
  t0=$(date +%s%N)
  if [ "$name" = floor ]; then
    KILN_READY_FILE="$ready" node -e 'require("fs").writeFileSync(process.env.KILN_READY_FILE, String(process.pid)); setInterval(() => {}, 1000)' &
  else
    KILN_CODE=$mode KILN_READY_FILE="$ready" bash "$KILN_ROOT/infra/run-app.sh" "$name" >"$KILN_RUN_DIR/$mode-$name.log" 2>&1 &
  fi
  pid=$!
  until [ -f "$ready" ] && [ -s "$ready" ]; do kill -0 $pid 2>/dev/null || { echo "$name died" >&2; cat "$KILN_RUN_DIR/$mode-$name.log" >&2; return 1; }; sleep 0.02; done
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  sleep 3
  local rss; rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  kill -TERM $pid; wait $pid 2>/dev/null || true
  echo "$ms $rss"
}
printf '%-15s %-5s %-6s %8s %10s\n' process mode round ms rss_MiB
for r in $(seq 1 "$rounds"); do
  for name in floor api control-worker engine-worker; do
    for mode in tsx dist; do
      [ "$name" = floor ] && [ "$mode" = dist ] && continue
      read -r ms rss < <(measure "$mode" "$name")
      printf '%-15s %-5s %-6s %8s %10s\n' "$name" "$mode" "$r" "$ms" "$((rss / 1024))"
    done
  done
done
