#!/usr/bin/env bash
# Prints acpbridge's ACP Registry entry (agent.json) for release VERSION
# (digits only, X.Y.Z): for each of the six platforms, the archive that
# scripts/release.sh builds for it, published under BASE_URL/vVERSION/, the
# binary at the archive's root, and the args Zed needs (--fanout).
#
#   scripts/registry-entry.sh VERSION [BASE_URL]
#
# BASE_URL defaults to the project's GitHub releases. scripts/release.sh
# runs it for every release; dist/registry/agent.json is its output for the
# newest one.
set -euo pipefail
version=${1:?usage: scripts/registry-entry.sh VERSION [BASE_URL]}
base=${2:-https://github.com/acpbridge/acpbridge/releases/download}
if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "scripts/registry-entry.sh: the registry takes versions of digits only (X.Y.Z), not $version" >&2
  exit 2
fi
platforms=(darwin-aarch64 darwin-x86_64 linux-aarch64 linux-x86_64 windows-aarch64 windows-x86_64)
cat <<HEAD
{
  "id": "acpbridge",
  "name": "acpbridge",
  "version": "$version",
  "description": "A coding agent on any OpenAI-compatible model (OpenAI, Ollama, OpenRouter, ...): each thread in a process of its own, sessions that survive a crash.",
  "repository": "https://github.com/acpbridge/acpbridge",
  "authors": ["The acpbridge authors"],
  "license": "Apache-2.0",
  "distribution": {
    "binary": {
HEAD
for i in "${!platforms[@]}"; do
  p=${platforms[$i]}
  ext=tar.gz cmd=./acpbridge
  case $p in windows-*) ext=zip cmd=./acpbridge.exe ;; esac
  sep=,
  [ "$i" -eq $((${#platforms[@]} - 1)) ] && sep=
  cat <<TARGET
      "$p": {
        "archive": "$base/v$version/acpbridge-$version-$p.$ext",
        "cmd": "$cmd",
        "args": ["--fanout"]
      }$sep
TARGET
done
cat <<TAIL
    }
  }
}
TAIL
