#!/bin/sh
# agent.sh NAME [ARGS...] starts one of the pinned agents (codex, claude,
# gemini) against the model endpoint a scenario run serves, offline: the run
# gives every agent OPENAI_BASE_URL and MODEL_URL (ending in /v1),
# ANTHROPIC_BASE_URL and GOOGLE_GEMINI_BASE_URL (its root), dummy keys, and
# a private HOME, where this script writes what the agent reads at start.
# Install the agents first: npm ci (in this directory).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/node_modules
: "${MODEL_URL:?agent.sh runs an agent against a scenario run's served model: start it from acpbridge scenario run}"
name=$1
shift
case $name in
codex)
	# codex speaks the Responses API to a provider of the config's; a known
	# model name keeps its tools (apply_patch among them); it asks before
	# it writes or runs (untrusted), and runs unsandboxed where there is no
	# bubblewrap. Its npm wrapper does not pass SIGTERM on: start the
	# platform binary.
	# The config is written aside and renamed into place: threads start
	# their processes at once, and one must never read another's
	# half-written config (it would fall back to OpenAI's own provider and
	# answer "Authentication required").
	export CODEX_HOME="$HOME/.codex"
	mkdir -p "$CODEX_HOME"
	cat >"$CODEX_HOME/config.toml.$$" <<TOML
model = "gpt-5.3-codex"
model_provider = "scenario"
approval_policy = "untrusted"
sandbox_mode = "danger-full-access"

[model_providers.scenario]
name = "scenario"
base_url = "$MODEL_URL"
wire_api = "responses"
TOML
	mv -f "$CODEX_HOME/config.toml.$$" "$CODEX_HOME/config.toml"
	case "$(uname -s)-$(uname -m)" in
	Linux-x86_64) platform=linux-x64 ;;
	Linux-aarch64) platform=linux-arm64 ;;
	Darwin-arm64) platform=darwin-arm64 ;;
	Darwin-x86_64) platform=darwin-x64 ;;
	*) echo "agent.sh: no codex-acp binary for $(uname -sm)" >&2; exit 2 ;;
	esac
	exec "$bin/@zed-industries/codex-acp-$platform/bin/codex-acp" "$@"
	;;
claude)
	# The Claude Code CLI refuses to skip permissions as root unless
	# IS_SANDBOX is 1 or unset; its background traffic goes nowhere offline.
	unset IS_SANDBOX
	export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
	exec node "$bin/@zed-industries/claude-agent-acp/dist/index.js" "$@"
	;;
gemini)
	export GEMINI_MODEL="${GEMINI_MODEL:-gemini-2.5-pro}"
	exec node "$bin/@google/gemini-cli/bundle/gemini.js" --acp "$@"
	;;
*)
	echo "agent.sh: NAME is codex, claude or gemini, not $name" >&2
	exit 2
	;;
esac
