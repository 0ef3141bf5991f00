#!/usr/bin/env bash
# Builds llama.cpp's own `llama-batched-bench` once, from the llama.cpp source that node-llama-cpp
# ships, into the per-user cache, and prints the binary's path (infra/llama-tool.sh). The batching
# benchmark's floor.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
. "$KILN_ROOT/infra/llama-tool.sh"

build_llama_tool llama-batched-bench -DLLAMA_BUILD_SERVER=OFF
