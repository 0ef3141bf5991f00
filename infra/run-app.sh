#!/usr/bin/env bash
# Runs one of Kiln's processes in the foreground: `bash infra/run-app.sh api|control-worker|engine-worker`
# (engine-worker-gpuN on a GPU host: one per GPU).
# It execs the process, so whoever started this (infra/supervisor.ts, a systemd unit) watches the
# process itself. The environment (ports, database, namespace) comes from the caller.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
. "$KILN_ROOT/infra/app.sh"

# The control plane's processes at KILN_CONTROL_NICE: the engine's llama.cpp threads win the CPU
# when both want it (on a CPU host they use every core).
control_plane_priority() {
  local n; n=$(control_nice) || exit 1
  [ "$n" = 0 ] || renice -n "$n" -p $$ >/dev/null
}

# The engine worker at KILN_ENGINE_NICE (-20 to 19): below 0 its llama.cpp threads win the CPU over
# every other process of the host, which takes root (or CAP_SYS_NICE); without it the engine runs
# at the priority it was started with, and says so once.
engine_priority() {
  local n="${KILN_ENGINE_NICE:-0}"
  [[ "$n" =~ ^-?[0-9]+$ ]] && [ "$n" -ge -20 ] && [ "$n" -le 19 ] || die "KILN_ENGINE_NICE must be -20 to 19 (got '$n')"
  [ "$n" = 0 ] || renice -n "$n" -p $$ >/dev/null 2>&1 || log "engine worker: cannot set nice $n (needs root or CAP_SYS_NICE); it runs at $(nice)"
}

case "${1:-}" in
  api)
    control_plane_priority
    exec_kiln api/index.ts
    ;;
  control-worker)
    control_plane_priority
    export KILN_METRICS_PORT="${KILN_CONTROL_METRICS_PORT:-9464}"
    exec_kiln workers/control-worker.ts
    ;;
  engine-worker)
    engine_priority
    engine_environment
    export KILN_METRICS_PORT="${KILN_ENGINE_METRICS_PORT:-9465}"
    exec_kiln workers/engine-worker.ts
    ;;
  engine-worker-gpu*)
    # The engine worker of one GPU (infra/app.sh runs one per GPU): it sees only its card, in
    # nvidia-smi's numbering (PCI bus order; CUDA's own default puts the fastest first), and
    # registers as a node of its own, with a metrics port of its own.
    gpu=${1#engine-worker-gpu}
    [[ "$gpu" =~ ^[0-9]+$ ]] || die "usage: infra/run-app.sh engine-worker-gpuN"
    engine_priority
    engine_environment
    export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES="$gpu"
    export KILN_NODE_ID="${KILN_NODE_ID:-$(hostname)}-gpu$gpu"
    export KILN_METRICS_PORT=$((${KILN_ENGINE_METRICS_PORT:-9465} + gpu))
    exec_kiln workers/engine-worker.ts
    ;;
  *) die "usage: infra/run-app.sh api|control-worker|engine-worker|engine-worker-gpuN" ;;
esac
