#!/usr/bin/env bash
# Builds node-llama-cpp's addon (llama-addon.node and its llama.cpp libraries) once, from the
# llama.cpp source node-llama-cpp ships, with the CPU options of lib/llama-cpu-build.ts (the same
# as llama.cpp's batched bench), into the per-user cache, and prints the folder. Nothing is written
# under node_modules: the package's llama/ folder is copied to a scratch folder and built there with
# node-llama-cpp's own cmake-js. The engine loads the result unless KILN_LLAMA_SOURCE_BUILD=false
# (engines/llama/backend.ts); the prebuilt stays the fallback. Issue 19: the prebuilt's
# CPU backend runs a 32-token prompt about half as fast as this build on an AVX-512 host.
#
#   llama-addon-build.sh               builds now (waits for a build already under way instead)
#   llama-addon-build.sh --background  npm start's way: returns at once; unless the build is there,
#                                      under way or failed before, builds at the lowest CPU and I/O
#                                      priority, logging to .data/logs/llama-build.log
#
# One build at a time per user (a lock beside the folder; fresh clones share the cache). A failed
# build leaves FOLDER.failed (lib/llama-build-state.ts reads it for npm run status), which the
# background mode does not retry; a build run by hand does, and clears it on success.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

nlc="$KILN_ROOT/node_modules/node-llama-cpp"
[ -f "$nlc/llama/gitRelease.bundle" ] || die "no $nlc/llama/gitRelease.bundle: is node-llama-cpp installed?"
planner=(node --import tsx "$KILN_ROOT/lib/llama-cpu-build.ts")
mapfile -t plan < <(cd "$KILN_ROOT" && "${planner[@]}" options)
variant="${plan[0]}"
cpu_flags=("${plan[@]:1}")
dir=$(cd "$KILN_ROOT" && "${planner[@]}" dir addon)
if [ -f "$dir/llama-addon.node" ]; then echo "$dir"; exit 0; fi
mkdir -p "$(dirname "$dir")"
lock="$dir.lock" failed="$dir.failed" building="$dir.building"

if [ "${1:-}" = --background ]; then
  if [ -f "$failed" ]; then
    log "llama.cpp's source build failed before ($failed): not retried; bash infra/llama-addon-build.sh tries again"
    exit 0
  fi
  # A held lock is a build under way, by this clone or another.
  if ! flock -n "$lock" true; then exit 0; fi
  build_log="$DATA/logs/llama-build.log"
  setsid nohup nice -n 19 ionice -c 3 bash "${BASH_SOURCE[0]}" --locked "$build_log" >"$build_log" 2>&1 </dev/null &
  exit 0
fi

if [ "${1:-}" != --locked ]; then
  exec 9>"$lock"
  if ! flock -n 9; then
    log "waiting for the llama.cpp source build under way ($(cat "$building" 2>/dev/null || echo "lock $lock"))"
    flock 9
  fi
  if [ -f "$dir/llama-addon.node" ]; then echo "$dir"; exit 0; fi
  build_log=""
else
  build_log="$2"
  exec 9>"$lock"
  # Lost a race with another start: that one builds.
  flock -n 9 || exit 0
  if [ -f "$dir/llama-addon.node" ]; then echo "$dir"; exit 0; fi
fi
printf '{"pid":%s,"startedAt":"%s","log":"%s"}\n' "$$" "$(date -u +%FT%TZ)" "$build_log" >"$building"
started=$SECONDS
# Whatever ends this run, the folder is either built or FOLDER.failed says why.
finish() {
  local code=$1
  rm -f "$building"
  if [ -f "$dir/llama-addon.node" ]; then
    rm -f "$failed"
  else
    printf '{"exitCode":%s,"at":"%s","log":"%s"}\n' "$code" "$(date -u +%FT%TZ)" "$build_log" >"$failed"
  fi
}
trap 'finish $?' EXIT
# Stopped by a signal: the exit status says which, and FOLDER.failed records it.
trap 'exit 143' TERM
trap 'exit 130' INT

. "$KILN_ROOT/infra/cmake.sh"
need_cmake "node-llama-cpp's addon"

log "building node-llama-cpp's addon ($variant) from its llama.cpp source (first run only: ~6 min on 2 idle cores)"
work=$(mktemp -d "$(dirname "$dir")/.addon-build.XXXX")
trap 'code=$?; rm -rf "$work"; finish $code' EXIT
# The build tree node-llama-cpp would use (CMakeLists.txt, addon/, cmake/, patches), without the
# bundle itself or earlier local builds; node_modules beside it so its CMakeLists finds node-addon-api.
mkdir "$work/llama"
for entry in "$nlc"/llama/*; do
  case "$(basename "$entry")" in gitRelease.bundle|localBuilds|llama.cpp|xpack|toolchains) continue ;; esac
  cp -r "$entry" "$work/llama/"
done
ln -s "$KILN_ROOT/node_modules" "$work/llama/node_modules"
clone_llama_source "$work/llama/llama.cpp"
# The options node-llama-cpp's own `source build` passes (dist/bindings/utils/compileLLamaCpp.js),
# with the CPU options in place of its GGML_NATIVE=ON; one CPU backend linked in, no dynamic variants.
(
  cd "$work/llama"
  cmake-js compile --log-level warn --config Release --arch=x64 --out build \
    "--runtime-version=$(node -p 'process.versions.node')" "--parallel=$(nproc)" \
    --CDGGML_BUILD_NUMBER=1 --CDCMAKE_CONFIGURATION_TYPES=Release \
    --CDNLC_CURRENT_PLATFORM=linux-x64 --CDNLC_TARGET_PLATFORM=linux-x64 --CDNLC_VARIANT= \
    --CDGGML_METAL=OFF --CDGGML_CCACHE=OFF --CDLLAMA_CURL=OFF --CDLLAMA_HTTPLIB=OFF \
    --CDLLAMA_BUILD_BORINGSSL=OFF --CDLLAMA_OPENSSL=OFF --CDGGML_BACKEND_DL=OFF --CDGGML_CPU_ALL_VARIANTS=OFF \
    "${cpu_flags[@]/#-D/--CD}"
) >"$work/build.log" 2>&1 || { tail -n 30 "$work/build.log" >&2; die "building node-llama-cpp's addon failed"; }
out="$work/result"
mkdir -p "$out"
cp "$work"/llama/build/Release/* "$out/"
for bin_dir in "$work/llama/build/bin" "$work/llama/build/llama.cpp/bin"; do
  [ -d "$bin_dir" ] && cp -n "$bin_dir"/* "$out/" 2>/dev/null || true
done
[ -f "$out/llama-addon.node" ] || die "the addon build left no llama-addon.node (see $work/build.log)"
printf '{"variant":"%s","built":"%s"}\n' "$variant" "$(date -u +%FT%TZ)" >"$out/kiln-build.json"
rm -rf "$dir"
mv "$out" "$dir"
log "node-llama-cpp's addon built in $((SECONDS - started)) s: $dir"
echo "$dir"
