#!/usr/bin/env bash
# compare.sh BIN [DIR]: the comparison docs/scenarios.md describes, on
# testdata/scenarios/coding.txtar: acpbridge (plain and --fanout), the
# multi-session test agent in Go (testdata/multiagent) and the one on the
# TypeScript SDK (multi.mjs), each run REPEAT times (default 10) after a
# warm-up, with the table on stdout and report.md, the charts and
# runs.json in DIR (default: a temporary directory, named at the end).
set -euo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
out=${2:-$(mktemp -d)/report}
multi=$(mktemp -d)/multiagent
(cd "$root" && go build -o "$multi" ./testdata/multiagent)
"$bin" scenario run --timeout 30s --repeat "${REPEAT:-10}" --report "$out" --json "$out/runs.json" \
  --agent "acpbridge='$bin'" --agent "fanout='$bin' --fanout" \
  --agent "go-multi='$multi'" --agent "ts-multi=node '$here/multi.mjs'" \
  "$root/testdata/scenarios/coding.txtar"
