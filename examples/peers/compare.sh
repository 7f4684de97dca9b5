#!/usr/bin/env bash
# compare.sh BIN OUT [SCENARIO]: the agents editor users run, compared
# offline with acpbridge on one recording (default coding.txtar here; the
# served model speaks each agent's wire): acpbridge plain and --fanout,
# codex-acp, claude-agent-acp and gemini-cli, each run REPEAT times
# (default 10) after a warm-up, the table on stdout and report.md, the
# charts, runs.json and runs.csv in OUT. It installs the pinned agents
# first (npm ci, here) and writes nothing outside OUT and node_modules.
# AGENTS=fanout also runs each of the three behind acpbridge --fanout.
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
mkdir -p "$2"
out=$(cd "$2" && pwd)
scenario=${3:-$here/coding.txtar}
(cd "$here" && npm ci --no-audit --no-fund --silent)
threads=${THREADS:-1}
# Sessions at once share the CPUs: each wait for a line gets longer.
timeout=${TIMEOUT:-$([ "$threads" = 1 ] && echo 60s || echo 300s)}
agents=()
if [ "$threads" = 1 ]; then agents+=(--agent "acpbridge='$bin'"); fi
agents+=(--agent "fanout='$bin' --fanout"
  --agent "codex='$here/agent.sh' codex" --agent "claude='$here/agent.sh' claude" --agent "gemini='$here/agent.sh' gemini")
if [ "${AGENTS:-}" = fanout ]; then
  agents+=(--agent "codex-fanout='$bin' --fanout -- '$here/agent.sh' codex"
    --agent "claude-fanout='$bin' --fanout -- '$here/agent.sh' claude"
    --agent "gemini-fanout='$bin' --fanout -- '$here/agent.sh' gemini")
fi
"$bin" scenario run --timeout "$timeout" --threads "$threads" --repeat "${REPEAT:-10}" --report "$out" --json "$out/runs.json" --csv "$out/runs.csv" \
  "${agents[@]}" "$scenario"
