#!/usr/bin/env bash
# Builds node-llama-cpp's addon (llama-addon.node and its llama.cpp libraries) once, from the
# llama.cpp source node-llama-cpp ships, with the CPU options of lib/llama-cpu-build.ts (the same
# as llama.cpp's batched bench), into the per-user cache, and prints the folder. Nothing is written
# under node_modules: the package's llama/ folder is copied to a scratch folder and built there with
# node-llama-cpp's own cmake-js. The engine loads the result unless KILN_LLAMA_SOURCE_BUILD=false
# (engines/llama/backend.ts); the prebuilt stays the fallback. Issue 19: the prebuilt's
# CPU backend runs a 32-token prompt about half as fast as this build on an AVX-512 host.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

nlc="$KILN_ROOT/node_modules/node-llama-cpp"
[ -f "$nlc/llama/gitRelease.bundle" ] || die "no $nlc/llama/gitRelease.bundle: is node-llama-cpp installed?"
planner=(node --import tsx "$KILN_ROOT/lib/llama-cpu-build.ts")
mapfile -t plan < <(cd "$KILN_ROOT" && "${planner[@]}" options)
variant="${plan[0]}"
cpu_flags=("${plan[@]:1}")
dir=$(cd "$KILN_ROOT" && "${planner[@]}" dir addon)
if [ -f "$dir/llama-addon.node" ]; then echo "$dir"; exit 0; fi

. "$KILN_ROOT/infra/cmake.sh"
need_cmake "node-llama-cpp's addon"

log "building node-llama-cpp's addon ($variant) from its llama.cpp source (first run only: about half an hour on 2 cores)"
mkdir -p "$(dirname "$dir")"
work=$(mktemp -d "$(dirname "$dir")/.addon-build.XXXX")
trap 'rm -rf "$work"' EXIT
# The build tree node-llama-cpp would use (CMakeLists.txt, addon/, cmake/, patches), without the
# bundle itself or earlier local builds; node_modules beside it so its CMakeLists finds node-addon-api.
mkdir "$work/llama"
for entry in "$nlc"/llama/*; do
  case "$(basename "$entry")" in gitRelease.bundle|localBuilds|llama.cpp|xpack|toolchains) continue ;; esac
  cp -r "$entry" "$work/llama/"
done
ln -s "$KILN_ROOT/node_modules" "$work/llama/node_modules"
git clone -q "$nlc/llama/gitRelease.bundle" "$work/llama/llama.cpp" 2>/dev/null || die "cannot clone $nlc/llama/gitRelease.bundle"
# node-llama-cpp applies its patches after cloning (each one it cannot tell is already upstream).
for patch in "$work"/llama/patches/*.diff; do
  [ -f "$patch" ] || continue
  if git -C "$work/llama/llama.cpp" apply --check --ignore-whitespace "$patch" 2>/dev/null; then
    git -C "$work/llama/llama.cpp" apply --ignore-whitespace "$patch"
  fi
done
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
echo "$dir"
