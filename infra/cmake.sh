# need_cmake WHAT: CMake on PATH, installed with apt-get where it is missing (the llama.cpp
# source builds: infra/llama-tool.sh, infra/llama-addon-build.sh). Sourced, not run.
need_cmake() {
  command -v cmake >/dev/null && return 0
  command -v apt-get >/dev/null || die "building $1 needs CMake (and apt-get is not available to install it)"
  log "installing CMake with apt (to build $1)"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq cmake >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq cmake >/dev/null; }; } \
    || die "apt-get install cmake failed"
}
