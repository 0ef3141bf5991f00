#!/usr/bin/env bash
# npm start: installs what is missing, starts Temporal, MinIO and Postgres, then the API and the
# workers, seeds the example models, and prints where everything is. Safe to run again.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
started=$SECONDS
bash "$KILN_ROOT/infra/install.sh"
bash "$KILN_ROOT/infra/services.sh"
. "$KILN_ROOT/infra/app.sh"
export KILN_DATA_DIR="$DATA" PORT="${PORT:-8080}"
# The local stack delivers webhooks to receivers on this machine; production refuses loopback.
export KILN_WEBHOOK_ALLOW_PRIVATE="${KILN_WEBHOOK_ALLOW_PRIVATE:-true}"
# Inputs on this machine (a file server on localhost, say) are fine locally.
export KILN_FETCH_ALLOW_PRIVATE="${KILN_FETCH_ALLOW_PRIVATE:-true}"
start_kiln

token=$(cat "$DATA/api-token")
temporal_line="Temporal UI  http://127.0.0.1:$TEMPORAL_UI_PORT/namespaces/default/workflows"
[ "$KILN_TEMPORAL" = server ] && temporal_line="Temporal UI  $KILN_TEMPORAL_UI_URL/namespaces/default/workflows   (full server on Postgres, $TEMPORAL_ADDRESS)"
# CPU hosts: which llama.cpp the engine runs, as it said when it loaded it (GPU hosts had theirs
# printed by gpu-install.sh). Without a build for this CPU, npm start makes one in the background,
# after the stack is up so that this start does not wait; the engine switches to it when next idle.
llama_line=""
if ! command -v "${KILN_NVIDIA_SMI:-nvidia-smi}" >/dev/null; then
  running=$(node -e 'try { const s = require(process.argv[1]); console.log(`${s.binary.startsWith("source build") ? "built for this CPU" : s.binary}, ${s.threads} thread(s)`) } catch {}' "$RUN_DIR/pids/engine-worker.llama.json")
  case "${KILN_LLAMA_SOURCE_BUILD:-auto}" in
    false | 0) llama_line="llama.cpp    ${running:-prebuilt} (KILN_LLAMA_SOURCE_BUILD=false)" ;;
    *)
      case "$running" in
        "built for this CPU"*) llama_line="llama.cpp    $running" ;;
        *)
          bash "$KILN_ROOT/infra/llama-addon-build.sh" --background
          build=$(cd "$KILN_ROOT" && node --import tsx lib/llama-build-state.ts 2>/dev/null || true)
          case "$build" in
            *'"state":"failed"'*) llama_line="llama.cpp    ${running:-prebuilt}: the build for this CPU failed (npm run status says where its log is; bash infra/llama-addon-build.sh tries again)" ;;
            *'"state":"built"'*) llama_line="llama.cpp    ${running:-prebuilt}; built for this CPU since: the engine switches to it when next idle" ;;
            *) llama_line="llama.cpp    ${running:-prebuilt} for now; building it for this CPU in the background (~6 min, at low priority, log .data/logs/llama-build.log): the engine switches to it when next idle" ;;
          esac
          ;;
      esac
      ;;
  esac
fi
cat <<INFO

  Kiln is running ($((SECONDS - started)) s).

  API          http://127.0.0.1:$PORT          (reference: http://127.0.0.1:$PORT/docs)
  Playground   http://127.0.0.1:$PORT/#token=$token
  $temporal_line
  API token    $token   (also in .data/api-token)
  ${llama_line}

  Try it:
    curl -s -X POST http://127.0.0.1:$PORT/v1/models/kiln/smollm2-135m-instruct/predictions \\
      -H "Authorization: Bearer \$(cat .data/api-token)" -H 'Content-Type: application/json' \\
      -H 'Prefer: wait' -d '{"input": {"messages": [{"role": "user", "content": "Name three primary colors."}], "temperature": 0}}'

  Logs in .data/logs/. Stop everything with: npm run stop
INFO
