#!/usr/bin/env bash
# npm run build: compiles what production runs to dist/ (tsconfig.build.json), copies the files it
# reads at run time and bundles the workflows (infra/build-workflows.ts).
#   bash infra/build.sh              always builds
#   bash infra/build.sh --if-changed builds only when the sources differ from the last build's,
#                                    and emits without checking types, as tsx runs the sources:
#                                    npm start and npm test call it this way, and npm test checks
#                                    the types of the whole project beside it (tsc --noEmit)
# tsc is TypeScript 7's native compiler (the typescript-native package): the same JavaScript as
# TypeScript 5.9's, in a fifth of the CPU (docs/development.md#libraries-and-why-each-is-there).
# The typescript package (5.9) stays for its compiler API (tools/long-functions.ts; TypeScript 7 has none).
# The hash of the sources is written last, so a build that failed half way is redone next time.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

STAMP="$KILN_ROOT/dist/.sources.sha256"

# Every file the build reads: a change to any of them (committed or not) means a new build.
sources_hash() {
  cd "$KILN_ROOT"
  find api cli workflows activities workers engines db domain infra lib fixtures tools -type f -print0 |
    sort -z | xargs -0 sha256sum |
    cat - <(sha256sum tsconfig.json tsconfig.build.json package-lock.json) | sha256sum | cut -d' ' -f1
}

build() {
  local started=$SECONDS want check=()
  # Beside the checks and the stacks' start, on one thread: on two cores that is the faster.
  [ "${1:-}" = --if-changed ] && check=(--noCheck --singleThreaded)
  want=$(sources_hash)
  rm -f "$STAMP"
  (cd "$KILN_ROOT" && node_modules/typescript-native/bin/tsc -p tsconfig.build.json "${check[@]}") || die "tsc failed"
  (cd "$KILN_ROOT" && node --import tsx infra/build-workflows.ts) || die "bundling the workflows failed"
  echo "$want" >"$STAMP"
  log "built dist/ in $((SECONDS - started)) s"
}

if [ "${1:-}" = --if-changed ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(sources_hash)" ]; then
  exit 0
fi
[ "${1:-}" = --if-changed ] && log "sources changed since the last build: building dist/"
build "$@"
