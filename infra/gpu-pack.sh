#!/usr/bin/env bash
# `npm run gpu:pack`: puts what infra/gpu-check.sh needs on a bare CUDA host (no npm, no network)
# into .gpu-pack/ (git-ignored), to be carried there beside the repository's tracked files:
#   node.xz            this node binary (linux x64)
#   llama.cpp.tar.xz   the llama.cpp source node-llama-cpp ships (its git bundle, checked out, with
#                      node-llama-cpp's patches applied), without its vocab models, docs and web UI
#   kiln.tar.xz        node-llama-cpp and its runtime dependencies without the prebuilt binaries,
#                      N-API headers for the addon build, and the check's code bundled with esbuild
#                      (dist/gpu-check.js: Kiln's engine and the measurements; dist/gguf.js: the
#                      model writer, tools/gguf)
# Prints the sizes and fails when the pack and the tracked files together reach 64 MiB, the most a
# device call carries. node.xz and llama.cpp.tar.xz are reused while node and node-llama-cpp stay.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

LIMIT=$((64 * 2 ** 20))
pack="${KILN_GPU_PACK:-$KILN_ROOT/.gpu-pack}"
nlc="$KILN_ROOT/node_modules/node-llama-cpp"
[ -f "$nlc/llama/gitRelease.bundle" ] || die "no $nlc/llama/gitRelease.bundle: is node-llama-cpp installed?"
command -v xz >/dev/null || die "packing needs xz"
mkdir -p "$pack"
work=$(mktemp -d "$pack/.work.XXXX")
trap 'rm -rf "$work"' EXIT
# xz's threads: all cores, at most 8 (the memory it takes grows with them).
threads=$(nproc)
[ "$threads" -gt 8 ] && threads=8

node_bin=$(readlink -f "$(command -v node)")
node_key="$(node -p 'process.version + " " + process.platform + "-" + process.arch') $(sha256sum "$node_bin" | cut -c1-16)"
if [ "$(cat "$pack/node.key" 2>/dev/null)" != "$node_key" ] || [ ! -f "$pack/node.xz" ]; then
  log "packing node ($node_key)"
  xz -T"$threads" -6 -c "$node_bin" >"$work/node.xz"
  mv "$work/node.xz" "$pack/node.xz"
  echo "$node_key" >"$pack/node.key"
fi

tag=$(node -p "require('$nlc/llama/llama.cpp.info.json').tag")
nlc_version=$(node -p "require('$nlc/package.json').version")
source_key="llama.cpp $tag nlc $nlc_version $(cat "$nlc"/llama/patches/*.diff 2>/dev/null | sha256sum | cut -c1-16)"
if [ "$(cat "$pack/llama.cpp.key" 2>/dev/null)" != "$source_key" ] || [ ! -f "$pack/llama.cpp.tar.xz" ]; then
  log "packing llama.cpp's source ($source_key)"
  clone_llama_source "$work/llama.cpp"
  # Left out: the vocab test models, docs and web UI assets; the build the check configures uses none.
  tar -C "$work/llama.cpp" -c --exclude=./.git --exclude=./models --exclude=./docs --exclude=./media \
    --exclude=./tools/ui --exclude=./tools/server/public . | xz -T"$threads" -6 >"$work/llama.cpp.tar.xz"
  mv "$work/llama.cpp.tar.xz" "$pack/llama.cpp.tar.xz"
  echo "$source_key" >"$pack/llama.cpp.key"
fi

log "packing node-llama-cpp's runtime packages, the N-API headers and the check's code"
stage="$work/kiln"
mkdir -p "$stage/node_modules" "$stage/dist" "$stage/include"
mapfile -t packages < <(cd "$KILN_ROOT" && node --import tsx infra/gpu-pack-modules.ts node-llama-cpp)
for dir in "${packages[@]}"; do
  mkdir -p "$stage/$(dirname "$dir")"
  # A nested package came along with the one it is nested in.
  [ -e "$stage/$dir" ] || cp -a "$KILN_ROOT/$dir" "$stage/$dir"
done
# The source bundle is in llama.cpp.tar.xz already, unpacked; no local builds or downloads travel.
rm -rf "$stage"/node_modules/node-llama-cpp/llama/{gitRelease.bundle,localBuilds,llama.cpp,xpack/store}
node_include="$(dirname "$(dirname "$node_bin")")/include/node"
[ -f "$node_include/node_api.h" ] || die "no N-API headers at $node_include (node-addon-api builds against them)"
cp "$node_include"/node_api.h "$node_include"/node_api_types.h "$node_include"/js_native_api.h \
  "$node_include"/js_native_api_types.h "$stage/include/"
# require.main is the bundle in a bundle: a module's own "run as a script" block would run in it.
(cd "$KILN_ROOT" && esbuild bench/gpu-check.ts tools/gguf/gguf-cli.ts --bundle --platform=node --target=node20 \
  --format=cjs --external:node-llama-cpp --define:require.main=undefined --log-level=warning \
  --outdir="$stage/dist" --entry-names='[name]')
mv "$stage/dist/gguf-cli.js" "$stage/dist/gguf.js"
node -p "JSON.stringify({ packed: new Date().toISOString(), commit: '$(git -C "$KILN_ROOT" rev-parse --short HEAD)', node: process.version, nodeLlamaCpp: '$nlc_version', llamaCpp: '$tag' }, null, 2)" >"$stage/pack.json"
tar -C "$stage" -c . | xz -T"$threads" -6 >"$pack/kiln.tar.xz"
rm -rf "$work"
trap - EXIT

pack_bytes=$(du -cb "$pack"/node.xz "$pack"/llama.cpp.tar.xz "$pack"/kiln.tar.xz "$pack"/*.key | tail -1 | cut -f1)
tree_bytes=$(cd "$KILN_ROOT" && git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
for f in node.xz llama.cpp.tar.xz kiln.tar.xz; do log "  $f: $(mib "$(stat -c %s "$pack/$f")")"; done
log "pack $(mib "$pack_bytes") + working tree $(mib "$tree_bytes") = $(mib $((pack_bytes + tree_bytes))) of the 64 MiB a device call carries"
[ $((pack_bytes + tree_bytes)) -lt "$LIMIT" ] || die "too big to carry: $(mib $((pack_bytes + tree_bytes))) ≥ 64 MiB"
echo "$pack"
