#!/usr/bin/env bash
# Runs the README's five-minute tour verbatim: every ```sh block of that section, in order, in
# one shell (so `export` carries over), stopping at the first command that fails.
# Needs the stack of `npm start` running from this clone.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
script=$(awk '
  /^## Five-minute tour/ { inside = 1; next }
  inside && /^## / { inside = 0 }
  inside && /^```sh$/ { block = 1; n++; print "echo \"--- tour block " n " ---\" >&2"; next }
  inside && block && /^```$/ { block = 0; next }
  inside && block { print }
' README.md)
[ -n "$script" ] || { echo "no tour blocks found in README.md" >&2; exit 1; }
bash -euo pipefail -c "$script"
echo "tour: every block ran" >&2
