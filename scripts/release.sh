#!/usr/bin/env bash
# Builds static acpbridge binaries for the six release targets (Linux, macOS
# and Windows, each on amd64 and arm64) into DIR (default dist/), with a
# SHA256SUMS file beside them.
#
#   scripts/release.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
version=$(sed -n 's/^const version = "\(.*\)"$/\1/p' main.go)
mkdir -p "$out"
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do
  os=${target%/*} arch=${target#*/}
  name="acpbridge-$version-$os-$arch"
  [ "$os" = windows ] && name="$name.exe"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags='-s -w' -o "$out/$name" .
done
(cd "$out" && sha256sum acpbridge-"$version"-* > SHA256SUMS && cat SHA256SUMS)
