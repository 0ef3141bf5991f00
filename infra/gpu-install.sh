#!/usr/bin/env bash
# The GPU host part of the install (infra/install.sh runs it on every npm start): where nvidia-smi
# lists GPUs, checks that node-llama-cpp's CUDA prebuilt can load and has machine code for the
# cards, builds llama.cpp from the source node-llama-cpp ships where not (once: the build is
# cached in node_modules/node-llama-cpp/llama/localBuilds), and prints the backend, the GPUs,
# their VRAM and the build. The decision is infra/gpu-build-plan.ts; this only acts on it.
# Without nvidia-smi it removes what an earlier run wrote and does nothing else.
#
#   KILN_GPU_SOURCE_BUILD=false   never build from source (use the prebuilt as it is, or the CPU)
#   KILN_GPU_STATE_DIR            where gpu-build.json and gpu-build.env go (default .data; a
#                                 systemd host: /var/lib/kiln, which the engine unit reads)
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

state_dir="${KILN_GPU_STATE_DIR:-$DATA}"
nvidia_smi="${KILN_NVIDIA_SMI:-nvidia-smi}"
if ! command -v "$nvidia_smi" >/dev/null; then
  rm -f "$state_dir"/gpu-build.json "$state_dir"/gpu-build.env "$state_dir"/gpu-build.pending.env
  exit 0
fi
mkdir -p "$state_dir" "$DATA/logs"

plan() { (cd "$KILN_ROOT" && node --import tsx infra/gpu-install.ts --state-dir "$state_dir"); }

action=$(plan) || die "the GPU check failed"
[ "$action" = ready ] && exit 0

nlc="$KILN_ROOT/node_modules/node-llama-cpp"
release=$(node -p "require('$nlc/llama/binariesGithubRelease.json').release")
build_log="$DATA/logs/gpu-build.log"
log "building llama.cpp with CUDA from node-llama-cpp's source (first run only: about 5 minutes; log in $build_log)"
started=$SECONDS
if (
  cd "$KILN_ROOT"
  set -a
  # shellcheck disable=SC1091
  . "$state_dir/gpu-build.pending.env"
  set +a
  export PATH="$(dirname "$CUDACXX"):$PATH"
  # The source ships as a git bundle of the release the prebuilts were built from: no network.
  if [ ! -d "$nlc/llama/llama.cpp" ]; then
    npx --no node-llama-cpp source download --release "$release" --skipBuild --noUsageExample
  fi
  npx --no node-llama-cpp source build --gpu cuda --noUsageExample
) >"$build_log" 2>&1; then
  log "built llama.cpp in $((SECONDS - started)) s"
else
  tail -n 20 "$build_log" >&2
  # Not tried again on every start: remove the marker (or fix the toolchain and remove it) to retry.
  echo "$build_log" >"$state_dir/gpu-build.failed"
  log "the llama.cpp source build failed: going on without it (remove $state_dir/gpu-build.failed to try again)"
fi
action=$(plan) || die "the GPU check failed"
[ "$action" = ready ] || die "llama.cpp was built but node-llama-cpp's local builds do not show it (see $build_log)"
