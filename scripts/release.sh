#!/usr/bin/env bash
# Builds static acpbridge binaries for the six release targets (Linux, macOS
# and Windows, each on x86_64 and aarch64) and packs each, with the LICENSE
# and the README, into an archive in DIR (default dist/), the binary at the
# archive's root: acpbridge-VERSION-PLATFORM.tar.gz, or .zip for Windows,
# PLATFORM as the ACP Registry names it (linux-x86_64, darwin-aarch64, ...);
# SHA256SUMS beside them, and DIR/agent.json, the registry entry for these
# archives (scripts/registry-entry.sh).
#
#   scripts/release.sh [DIR]      (a relative DIR is relative to where you run it)
#
# VERSION is the release tag at HEAD without its v (tag v1.2.0: 1.2.0), and
# then dist/registry/agent.json, the entry in the repository, is written
# too: tagging and running this script is the one command a release needs.
# Off a tag it is main.go's version and git describe, and the registry entry
# is left alone. Set in the environment for a test build: VERSION,
# PLATFORMS (some of the six), RELEASES_URL (where the archives are
# published; default the project's GitHub releases).
set -euo pipefail
out=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
cd "$(dirname "$0")/.."
release=
if [ -z "${VERSION:-}" ]; then
  if tag=$(git describe --tags --exact-match 2>/dev/null) && [[ $tag =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    VERSION=${tag#v} release=yes
  else
    base=$(sed -n 's/^var version = "\(.*\)"$/\1/p' main.go)
    VERSION="$base-$(git describe --tags --always --dirty 2>/dev/null || echo unknown)"
  fi
fi
PLATFORMS=${PLATFORMS:-darwin-aarch64 darwin-x86_64 linux-aarch64 linux-x86_64 windows-aarch64 windows-x86_64}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for platform in $PLATFORMS; do
  os=${platform%-*}
  case ${platform#*-} in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) echo "unknown platform $platform" >&2; exit 2 ;; esac
  name="acpbridge-$VERSION-$platform"
  exe=acpbridge
  [ "$os" = windows ] && exe=acpbridge.exe
  mkdir -p "$work/$name"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=auto -ldflags="-s -w -X main.version=$VERSION" -o "$work/$name/$exe" .
  cp LICENSE README.md "$work/$name/"
  if [ "$os" = windows ]; then
    (cd "$work/$name" && rm -f "$out/$name.zip" && python3 -c 'import shutil,sys; shutil.make_archive(sys.argv[1], "zip", ".")' "$out/$name")
  else
    tar -C "$work/$name" -czf "$out/$name.tar.gz" "$exe" LICENSE README.md
  fi
done
(cd "$out" && sha256sum acpbridge-"$VERSION"-* > SHA256SUMS && cat SHA256SUMS)
if [[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  scripts/registry-entry.sh "$VERSION" ${RELEASES_URL:+"$RELEASES_URL"} > "$out/agent.json"
  cp dist/registry/icon.svg "$out/icon.svg"
  if [ -n "$release" ]; then
    cp "$out/agent.json" dist/registry/agent.json
    echo "dist/registry/agent.json is now the entry of $VERSION: commit it, and send dist/registry/ to the ACP Registry as acpbridge/"
  fi
fi
