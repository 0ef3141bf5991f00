#!/usr/bin/env bash
# Builds llama.cpp's own `llama-batched-bench` once, from the llama.cpp source that node-llama-cpp
# ships (llama/gitRelease.bundle: the same llama.cpp Kiln's engine embeds), into the per-user
# cache beside the Go binaries, and prints the binary's path. The batching benchmark's floor.
# CUDA where nvcc and a GPU exist; on CPU, the instruction sets /proc/cpuinfo lists, never
# -march=native: a native build picks AMX kernels that die with SIGILL on some VMs (issue 19).
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

nlc="$KILN_ROOT/node_modules/node-llama-cpp"
[ -f "$nlc/llama/gitRelease.bundle" ] || die "no $nlc/llama/gitRelease.bundle: is node-llama-cpp installed?"
nlc_version=$(node -p "require('$nlc/package.json').version")
tag=$(node -p "require('$nlc/llama/llama.cpp.info.json').tag")

cuda=off
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
  [ -n "$nvcc" ] && cuda=on
fi

cpu_flags=()
if [ "$cuda" = on ]; then
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
  cpu_flags+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=${arch:-native}")
  variant="cuda-sm${arch}"
else
  # The x86 instruction sets ggml can use, from what this CPU has (lib/llama-cpu-build.ts: the
  # same options node-llama-cpp's addon is built with by infra/llama-addon-build.sh). AMX stays off.
  mapfile -t plan < <(cd "$KILN_ROOT" && node --import tsx lib/llama-cpu-build.ts options)
  variant="${plan[0]}"
  cpu_flags+=("${plan[@]:1}")
fi

dir="$KILN_CACHE/bin/llama-cpp-$tag-nlc$nlc_version-$(printf %s "$variant" | sha256sum | cut -c1-12)"
bin="$dir/llama-batched-bench"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi

. "$KILN_ROOT/infra/cmake.sh"
need_cmake llama-batched-bench

log "building llama-batched-bench ($variant) from node-llama-cpp $nlc_version's llama.cpp $tag (first run only: minutes)"
mkdir -p "$KILN_CACHE/bin"
work=$(mktemp -d "$KILN_CACHE/bin/.llama-build.XXXX")
trap 'rm -rf "$work"' EXIT
git clone -q "$nlc/llama/gitRelease.bundle" "$work/src" 2>/dev/null || die "cannot clone $nlc/llama/gitRelease.bundle"
# Static, one binary; only the tool (the app target and the web UI would fetch or fail offline).
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  "${cpu_flags[@]}" >"$work/configure.log" 2>&1 || { tail -n 30 "$work/configure.log" >&2; die "cmake configure failed"; }
cmake --build "$work/build" --target llama-batched-bench -j "$(nproc)" >"$work/build.log" 2>&1 \
  || { tail -n 30 "$work/build.log" >&2; die "building llama-batched-bench failed"; }
mkdir -p "$dir"
mv "$work/build/bin/llama-batched-bench" "$bin"
echo "$bin"
