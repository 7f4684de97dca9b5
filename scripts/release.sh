#!/usr/bin/env bash
# Builds static acpbridge binaries for the six release targets (Linux, macOS
# and Windows, each on amd64 and arm64) and packs each, with the LICENSE and
# the README, into an archive in DIR (default dist/): .tar.gz, or .zip for
# Windows; SHA256SUMS beside them. Names carry `git describe` (a tag, or
# the release and the commit), which --version prints too.
#
#   scripts/release.sh [DIR]      (a relative DIR is relative to where you run it)
set -euo pipefail
out=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
cd "$(dirname "$0")/.."
base=$(sed -n 's/^var version = "\(.*\)"$/\1/p' main.go)
version=$(git describe --tags --always --dirty 2>/dev/null || echo "$base")
case $version in v*) ;; *) version="$base-$version" ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do
  os=${target%/*} arch=${target#*/}
  name="acpbridge-$version-$os-$arch"
  exe=acpbridge
  [ "$os" = windows ] && exe=acpbridge.exe
  mkdir -p "$work/$name"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=auto -ldflags="-s -w -X main.version=$version" -o "$work/$name/$exe" .
  cp LICENSE README.md "$work/$name/"
  if [ "$os" = windows ]; then
    (cd "$work" && rm -f "$out/$name.zip" && python3 -c 'import shutil,sys; shutil.make_archive(sys.argv[1], "zip", ".", sys.argv[2])' "$out/$name" "$name")
  else
    tar -C "$work" -czf "$out/$name.tar.gz" "$name"
  fi
done
(cd "$out" && sha256sum acpbridge-"$version"-* > SHA256SUMS && cat SHA256SUMS)
