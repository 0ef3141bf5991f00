#!/usr/bin/env bash
# npm run status: each component of the local stack, up or down (infra/status.ts).
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
[ -f "$KILN_ROOT/dist/infra/status.js" ] || KILN_CODE=tsx
. "$KILN_ROOT/infra/app.sh"
run_kiln infra/status.ts "$@"
