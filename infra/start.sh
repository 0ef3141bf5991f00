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
# CPU hosts: which llama.cpp the engine runs (engines/llama/backend.ts decides the same way;
# GPU hosts had theirs printed by gpu-install.sh).
llama_line=""
if ! command -v "${KILN_NVIDIA_SMI:-nvidia-smi}" >/dev/null; then
  addon=$(cd "$KILN_ROOT" && node --import tsx lib/llama-cpu-build.ts dir addon 2>/dev/null || true)
  case "${KILN_LLAMA_SOURCE_BUILD:-auto}" in false | 0) addon="" ;; esac
  if [ -n "$addon" ] && [ -f "$addon/llama-addon.node" ]; then
    llama_line="llama.cpp    built for this CPU ($addon)"
  else
    llama_line="llama.cpp    prebuilt (KILN_LLAMA_SOURCE_BUILD=true npm start builds one for this CPU, ~30 min once: about twice the prompt speed)"
  fi
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
