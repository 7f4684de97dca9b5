#!/usr/bin/env bash
# conversations.sh BIN [OUT]: the pinned agents on the served model through
# conversations that are not one turn: turns.txtar (five turns, the session
# loaded in a new process after the third) on codex-acp and
# claude-agent-acp (gemini-cli cannot load a session in a new process), and
# reject.txtar (a write rejected, then the next turn) on all three. Every
# run must pass, and every agent's last turn must be served the entry
# acpbridge's is (the same tokens served): no conversation restarted the
# recording or fell out of step. Writes runs-*.json to OUT (a temporary
# directory by default) and nothing else outside node_modules.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: conversations.sh BIN [OUT]" >&2
  exit 2
fi
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
out=${2:-$(mktemp -d)}
mkdir -p "$out"
(cd "$here" && npm ci --no-audit --no-fund --silent)
agent() { echo "$1='$here/agent.sh' $1"; }
cd "$here"
"$bin" scenario run --timeout 60s --json "$out/runs-turns.json" --agent "acpbridge=$bin" \
  --agent "$(agent codex)" --agent "$(agent claude)" turns.txtar >/dev/null
"$bin" scenario run --timeout 60s --json "$out/runs-reject.json" --agent "acpbridge=$bin" \
  --agent "$(agent codex)" --agent "$(agent claude)" --agent "$(agent gemini)" reject.txtar >/dev/null
python3 - "$out/runs-turns.json" "$out/runs-reject.json" <<'PY'
import json, sys
bad = 0
for path in sys.argv[1:]:
    results = json.load(open(path))["scenarios"][0]["results"]
    want = [t["tokens_served"] for t in results[0]["runs"][0]["turns"]]
    for r in results[1:]:
        got = [t["tokens_served"] for t in r["runs"][0]["turns"]]
        # Every turn after the first is the recording's own; a turn 1 may
        # differ (an agent that ends it early asks the model less).
        if got[1:] != want[1:]:
            print(f"{path}: {r['agent']} was served {got} (tokens served per turn), acpbridge {want}: a conversation fell out of step")
            bad += 1
sys.exit(1 if bad else 0)
PY
echo "conversations: every agent served its own turns"
