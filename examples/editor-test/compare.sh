#!/usr/bin/env bash
# compare.sh BIN OUT [SCENARIO]: the comparison docs/scenarios.md
# describes (default testdata/scenarios/coding.txtar): acpbridge (plain
# and --fanout), the multi-session test agent in Go (testdata/multiagent,
# built into OUT) and the one on the TypeScript SDK (multi.mjs; npm ci
# here installs the SDK), each run REPEAT times (default 10) after a
# warm-up, the table on stdout and report.md, the charts, runs.json and
# runs.csv in OUT. It writes nothing outside OUT and node_modules.
# THREADS=N runs N sessions at once on each agent (plain acpbridge, which
# serves one session a process, is left out then). TIMEOUT is each wait for
# a line (default 60s, 300s with THREADS).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: compare.sh BIN OUT [SCENARIO]" >&2
  exit 2
fi
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
mkdir -p "$2"
out=$(cd "$2" && pwd)
scenario=${3:-$root/testdata/scenarios/coding.txtar}
(cd "$here" && npm ci --no-audit --no-fund --silent)
(cd "$root" && go build -o "$out/multiagent" ./testdata/multiagent)
threads=${THREADS:-1}
# Sessions at once share the CPUs: each wait for a line gets longer.
timeout=${TIMEOUT:-$([ "$threads" = 1 ] && echo 60s || echo 300s)}
agents=()
if [ "$threads" = 1 ]; then agents+=(--agent "acpbridge='$bin'"); fi
"$bin" scenario run --timeout "$timeout" --threads "$threads" --repeat "${REPEAT:-10}" --report "$out" --json "$out/runs.json" --csv "$out/runs.csv" \
  ${agents[@]+"${agents[@]}"} --agent "fanout='$bin' --fanout" \
  --agent "go-multi='$out/multiagent'" --agent "ts-multi=node '$here/multi.mjs'" \
  "$scenario"
