#!/usr/bin/env bash
# The GPU check in one call, on a bare CUDA host (nvcc, CMake and a C++ compiler; no node, no npm,
# no network), from the repository's tracked files and the folder `npm run gpu:pack` made
# (infra/gpu-pack.sh, .gpu-pack/). In under 9 minutes on 16 cores and one H100:
#   1. builds llama.cpp with CUDA from the source node-llama-cpp ships: node-llama-cpp's addon and
#      llama-batched-bench, in one CMake tree, for this host's GPU architecture only;
#   2. writes the 0.97 B F16 model (tools/gguf), while the build runs;
#   3. runs llama-batched-bench and Kiln's engine (in-process, no Temporal or Postgres) at 1, 4
#      and 16 streams, and prints engine ÷ llama.cpp for each (issue 19: ≥ 0.8× at 16);
#   4. times one KV snapshot save and restore through the engine's snapshot store.
# Each phase prints a timestamped line, so a run cut off by its time limit shows how far it got.
# With $OUT set (the device call's output folder), the log and the figures (gpu-check.json) go there.
#
#   bash infra/gpu-check.sh [--cpu] [--small]
#     --cpu     the dry run: CUDA off, the CPU build (also KILN_GPU_CHECK_CPU=1)
#     --small   a 4-layer model and shorter runs instead of the 0.97 B one (also KILN_GPU_CHECK_SMALL=1)
#   KILN_GPU_CHECK_THREADS  CPU threads of both sides (default: all cores; 1 with --cpu, as the
#                         CPU batching figures are taken on the shared 2-core boxes)
#   KILN_GPU_PACK         the pack folder (default: .gpu-pack in the repository)
#   KILN_GPU_CHECK_WORK   where it unpacks and builds (default: a fresh folder under /tmp)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pack="${KILN_GPU_PACK:-$root/.gpu-pack}"
cpu="${KILN_GPU_CHECK_CPU:-0}"
small="${KILN_GPU_CHECK_SMALL:-0}"
for arg in "$@"; do
  case "$arg" in
    --cpu) cpu=1 ;;
    --small) small=1 ;;
    *) echo "usage: infra/gpu-check.sh [--cpu] [--small]" >&2; exit 2 ;;
  esac
done

out="${OUT:-}"
if [ -n "$out" ]; then
  mkdir -p "$out"
  exec > >(tee -a "$out/gpu-check.log") 2>&1
fi
started=$SECONDS
say() { printf '[%s +%ds] %s\n' "$(date -u +%H:%M:%S)" $((SECONDS - started)) "$*"; }
fail() {
  say "FAILED: $*"
  [ -n "$out" ] && printf '{"failed": %s}\n' "$(printf '%s' "$*" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))' 2>/dev/null || echo '"see gpu-check.log"')" >"$out/gpu-check.json"
  exit 1
}

# unxz_to FILE: the decompressed bytes on stdout; python3's lzma where xz is missing.
unxz() {
  if command -v xz >/dev/null; then xz -dc "$1"; else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"; fi
}

say "GPU check: $([ "$cpu" = 1 ] && echo 'CPU dry run' || echo CUDA), $([ "$small" = 1 ] && echo 'small model' || echo '0.97 B F16 model'); $(nproc) cores; commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
for f in node.xz llama.cpp.tar.xz kiln.tar.xz; do
  [ -f "$pack/$f" ] || fail "no $pack/$f: run 'npm run gpu:pack' and carry .gpu-pack"
done

# The toolchain, before minutes go into unpacking.
if [ "$cpu" = 1 ]; then
  cuda_options=()
else
  command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || fail "nvidia-smi lists no GPU (the dry run is --cpu)"
  nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
  [ -n "$nvcc" ] || fail "no nvcc (not on PATH, not /usr/local/cuda/bin/nvcc): the CUDA build needs the CUDA toolkit; the prebuilt CUDA binaries do not travel in the pack"
  say "GPU: $(nvidia-smi --query-gpu=name,memory.total,compute_cap,driver_version --format=csv,noheader | head -1); $("$nvcc" --version | tail -1)"
  cuda_options=(-DGGML_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc")
fi
command -v cmake >/dev/null || fail "no cmake"
command -v c++ >/dev/null || command -v g++ >/dev/null || fail "no C++ compiler"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

work="${KILN_GPU_CHECK_WORK:-$(mktemp -d /tmp/kiln-gpu-check.XXXX)}"
mkdir -p "$work/bin" "$work/addon"
say "unpacking into $work"
unxz "$pack/node.xz" >"$work/bin/node"
chmod +x "$work/bin/node"
export PATH="$work/bin:$PATH"
unxz "$pack/kiln.tar.xz" | tar -C "$work" -x
llama="$work/node_modules/node-llama-cpp/llama"
mkdir -p "$llama/llama.cpp"
unxz "$pack/llama.cpp.tar.xz" | tar -C "$llama/llama.cpp" -x
say "node $(node --version); $(node -p "const p=require('$work/pack.json'); 'packed ' + p.packed + ' at ' + p.commit + ', node-llama-cpp ' + p.nodeLlamaCpp + ', llama.cpp ' + p.llamaCpp")"

# The model, on one core while the build takes the others.
if [ "$small" = 1 ]; then
  spec=(--embedding 512 --layers 4 --heads 8 --kv-heads 4 --feed-forward 1408 --context 4096)
  measure_args=(--prompt 64 --tokens 32 --kv-prompt 1000)
else
  spec=(--embedding 2048 --layers 22 --heads 32 --kv-heads 4 --feed-forward 5632 --context 4096)
  measure_args=(--prompt 128 --tokens 128 --kv-prompt 2000)
fi
threads="${KILN_GPU_CHECK_THREADS:-$([ "$cpu" = 1 ] && echo 1 || nproc)}"
model="$work/model.gguf"
say "writing the model in the background: ${spec[*]} F16"
(node "$work/dist/gguf.js" --out "$model" --type F16 "${spec[@]}" --seed 34 --name kiln-gpu-check >"$work/model.log" 2>&1; echo $? >"$work/model.rc") &
model_pid=$!

node "$work/dist/gpu-check.js" options $([ "$cpu" = 1 ] && echo --cpu) >"$work/options.txt" || fail "cannot work out the build options"
mapfile -t options < <(grep '^-D' "$work/options.txt")
[ "${#options[@]}" -gt 0 ] || fail "no build options"
say "configuring llama.cpp: ${options[*]} ${cuda_options[*]}"
build="$work/build"
# The options node-llama-cpp's own source build passes (as infra/llama-addon-build.sh), plus
# llama.cpp's tools for llama-batched-bench (as infra/llama-tool.sh): no server, UI, tests, examples.
cmake -S "$llama" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_JS_INC=$work/include" \
  -DGGML_BUILD_NUMBER=1 -DNLC_CURRENT_PLATFORM=linux-x64 -DNLC_TARGET_PLATFORM=linux-x64 -DNLC_VARIANT= \
  -DGGML_METAL=OFF -DGGML_CCACHE=OFF -DLLAMA_CURL=OFF -DLLAMA_HTTPLIB=OFF -DLLAMA_BUILD_BORINGSSL=OFF \
  -DLLAMA_OPENSSL=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF \
  "${options[@]}" "${cuda_options[@]}" >"$work/configure.log" 2>&1 \
  || { tail -n 40 "$work/configure.log"; fail "cmake configure failed (log: $work/configure.log)"; }
say "building llama-addon and llama-batched-bench on $(nproc) cores"
build_started=$SECONDS
cmake --build "$build" --target llama-addon llama-batched-bench -j "$(nproc)" >"$work/build.log" 2>&1 \
  || { tail -n 40 "$work/build.log"; [ -n "$out" ] && tail -n 400 "$work/build.log" >"$out/build-tail.log"; fail "the build failed (log: $work/build.log)"; }
say "built in $((SECONDS - build_started)) s"
# The addon, llama.cpp's shared libraries and the bench in one folder: they find each other there.
find "$build" \( -name 'llama-addon.node' -o -name '*.so' -o -name '*.so.*' -o -name llama-batched-bench \) \
  \( -type f -o -type l \) -exec cp -L {} "$work/addon/" \;
[ -f "$work/addon/llama-addon.node" ] && [ -x "$work/addon/llama-batched-bench" ] || fail "the build left no llama-addon.node or llama-batched-bench"
# The CUDA runtime beside nvcc too, where the loader's cache does not list it.
cuda_libs=""
if [ "$cpu" != 1 ]; then
  nvcc_dir=$(dirname "$(readlink -f "$nvcc")")
  for dir in "$nvcc_dir/../lib64" "$nvcc_dir/../lib"; do
    [ -d "$dir" ] && cuda_libs="$cuda_libs:$(cd "$dir" && pwd)"
  done
fi
export LD_LIBRARY_PATH="$work/addon$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if [ ! -f "$work/model.rc" ]; then say "waiting for the model"; fi
wait "$model_pid" || true
[ "$(cat "$work/model.rc" 2>/dev/null)" = 0 ] || { cat "$work/model.log"; fail "writing the model failed"; }
say "model: $(tail -n 1 "$work/model.log")"

say "measuring: llama-batched-bench and Kiln's engine at 1, 4 and 16 streams, then a KV snapshot"
json=()
[ -n "$out" ] && json=(--json "$out/gpu-check.json")
node "$work/dist/gpu-check.js" measure --addon "$work/addon" --batched-bench "$work/addon/llama-batched-bench" \
  --model "$model" --streams 1,4,16 "${measure_args[@]}" --threads "$threads" "${json[@]}" $([ "$cpu" = 1 ] && echo --cpu) \
  || fail "the measurements failed"
say "GPU check done in $((SECONDS - started)) s"
[ -n "${KILN_GPU_CHECK_WORK:-}" ] || rm -rf "$work"
