#!/usr/bin/env bash
# Builds llama.cpp's own `llama-server` once, from the llama.cpp source that node-llama-cpp ships,
# into the per-user cache beside llama-batched-bench, and prints the binary's path
# (infra/llama-tool.sh: the same CPU options as the engine's source build, AMX off). The chat
# agreement benchmark (bench/chat-agreement.ts) sets Kiln's chats beside its answers. The web UI
# is left out (it would be downloaded); the API is all the benchmark needs.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
. "$KILN_ROOT/infra/llama-tool.sh"

build_llama_tool llama-server -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF
