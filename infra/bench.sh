#!/usr/bin/env bash
# npm run bench -- <scenario>: the benchmarks, with the local stack's settings and secrets.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
export KILN_DATA_DIR="${KILN_DATA_DIR:-$DATA}"
cd "$KILN_ROOT" && exec node --import tsx bench/index.ts "$@"
