# build_llama_tool TARGET [CMAKE_OPTION...]: builds one of llama.cpp's own tools (a CMake target,
# e.g. llama-batched-bench, llama-server) once, from the llama.cpp source node-llama-cpp ships
# (llama/gitRelease.bundle: the same llama.cpp Kiln's engine embeds), into the per-user cache beside
# the Go binaries, and prints the binary's path. Static, one binary. CUDA where nvcc and a GPU
# exist; on CPU, the instruction sets /proc/cpuinfo lists (lib/llama-cpu-build.ts, the options
# node-llama-cpp's addon is built with by infra/llama-addon-build.sh), AMX off, never
# -march=native: a native build picks AMX kernels that die with SIGILL on some VMs (issue 19).
# Sourced by infra/llama-batched-bench.sh and infra/llama-server.sh, after env.sh; not run.
build_llama_tool() {
  local target="$1"
  shift
  local nlc="$KILN_ROOT/node_modules/node-llama-cpp"
  [ -f "$nlc/llama/gitRelease.bundle" ] || die "no $nlc/llama/gitRelease.bundle: is node-llama-cpp installed?"
  local nlc_version tag
  nlc_version=$(node -p "require('$nlc/package.json').version")
  tag=$(node -p "require('$nlc/llama/llama.cpp.info.json').tag")

  local cuda=off nvcc=""
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
    [ -n "$nvcc" ] && cuda=on
  fi

  local cpu_flags=() variant plan arch
  if [ "$cuda" = on ]; then
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
    cpu_flags+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=${arch:-native}")
    variant="cuda-sm${arch}"
  else
    mapfile -t plan < <(cd "$KILN_ROOT" && node --import tsx lib/llama-cpu-build.ts options)
    variant="${plan[0]}"
    cpu_flags+=("${plan[@]:1}")
  fi

  # The folder is named as it always was (lib/llama-cpu-build.ts buildDir 'bench'): the tools of one
  # llama.cpp, node-llama-cpp and variant share it.
  local dir bin
  dir="$KILN_CACHE/bin/llama-cpp-$tag-nlc$nlc_version-$(printf %s "$variant" | sha256sum | cut -c1-12)"
  bin="$dir/$target"
  if [ -x "$bin" ]; then echo "$bin"; return 0; fi

  . "$KILN_ROOT/infra/cmake.sh"
  need_cmake "$target"

  log "building $target ($variant) from node-llama-cpp $nlc_version's llama.cpp $tag (first run only: minutes)"
  mkdir -p "$KILN_CACHE/bin"
  local work
  work=$(mktemp -d "$KILN_CACHE/bin/.llama-build.XXXX")
  # shellcheck disable=SC2064 # the folder is known now
  trap "rm -rf '$work'" EXIT
  git clone -q "$nlc/llama/gitRelease.bundle" "$work/src" 2>/dev/null || die "cannot clone $nlc/llama/gitRelease.bundle"
  # Only the tool: no tests or examples; the unified app target, the web UI and HTTPS would fetch
  # or fail offline.
  cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    "$@" "${cpu_flags[@]}" >"$work/configure.log" 2>&1 || { tail -n 30 "$work/configure.log" >&2; die "cmake configure failed"; }
  cmake --build "$work/build" --target "$target" -j "$(nproc)" >"$work/build.log" 2>&1 \
    || { tail -n 30 "$work/build.log" >&2; die "building $target failed"; }
  mkdir -p "$dir"
  mv "$work/build/bin/$target" "$bin"
  echo "$bin"
}
