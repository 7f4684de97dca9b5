#!/usr/bin/env bash
# compare.sh BIN [DIR]: the agents editor users run, compared offline with
# acpbridge on one recording (coding.txtar, the served model speaking each
# agent's wire): acpbridge plain and --fanout, codex-acp, claude-agent-acp
# and gemini-cli, each run REPEAT times (default 10) after a warm-up, with
# the table on stdout and report.md, the charts and runs.json in DIR
# (default: a temporary directory). It installs the pinned agents first
# (npm ci). AGENTS=fanout also runs each of the three behind
# acpbridge --fanout.
set -euo pipefail
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
out=${2:-$(mktemp -d)/report}
(cd "$here" && npm ci --no-audit --no-fund --silent)
agents=(--agent "acpbridge='$bin'" --agent "fanout='$bin' --fanout"
  --agent "codex='$here/agent.sh' codex" --agent "claude='$here/agent.sh' claude" --agent "gemini='$here/agent.sh' gemini")
if [ "${AGENTS:-}" = fanout ]; then
  agents+=(--agent "codex-fanout='$bin' --fanout -- '$here/agent.sh' codex"
    --agent "claude-fanout='$bin' --fanout -- '$here/agent.sh' claude"
    --agent "gemini-fanout='$bin' --fanout -- '$here/agent.sh' gemini")
fi
"$bin" scenario run --timeout 60s --repeat "${REPEAT:-10}" --report "$out" --json "$out/runs.json" \
  "${agents[@]}" "$here/coding.txtar"
