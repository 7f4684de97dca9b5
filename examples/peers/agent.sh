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
	# codex-acp is a Node adapter that runs codex's app server (the Rust
	# binary of @openai/codex's platform package: CODEX_PATH), which speaks
	# the Responses API to the config's provider. A model in codex's
	# catalogue keeps its tools (apply_patch among them). The adapter's
	# read-only mode asks before every edit and command; approval_policy in
	# the config is no longer taken. The config is written aside and renamed
	# into place: threads start their processes at once, and one must never
	# read another's half-written config (it would fall back to OpenAI's own
	# provider and answer "Authentication required").
	export CODEX_HOME="$HOME/.codex"
	mkdir -p "$CODEX_HOME"
	cat >"$CODEX_HOME/config.toml.$$" <<TOML
model = "gpt-5.5"
model_provider = "scenario"

[model_providers.scenario]
name = "scenario"
base_url = "$MODEL_URL"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
TOML
	mv -f "$CODEX_HOME/config.toml.$$" "$CODEX_HOME/config.toml"
	case "$(uname -s)-$(uname -m)" in
	Linux-x86_64) platform=linux-x64 triple=x86_64-unknown-linux-musl ;;
	Linux-aarch64) platform=linux-arm64 triple=aarch64-unknown-linux-musl ;;
	Darwin-arm64) platform=darwin-arm64 triple=aarch64-apple-darwin ;;
	Darwin-x86_64) platform=darwin-x64 triple=x86_64-apple-darwin ;;
	*) echo "agent.sh: no codex binary for $(uname -sm)" >&2; exit 2 ;;
	esac
	export CODEX_PATH="$bin/@openai/codex-$platform/vendor/$triple/bin/codex"
	export INITIAL_AGENT_MODE=read-only NO_BROWSER=1
	exec node "$bin/@agentclientprotocol/codex-acp/dist/index.js" "$@"
	;;
claude)
	# Claude Code's default permission mode asks nothing: "default" in its
	# settings makes it ask before edits and commands, as before. The CLI
	# refuses to skip permissions as root unless IS_SANDBOX is 1 or unset;
	# its background traffic goes nowhere offline.
	export CLAUDE_CONFIG_DIR="$HOME/.claude"
	mkdir -p "$CLAUDE_CONFIG_DIR"
	printf '{"permissions":{"defaultMode":"default"}}\n' >"$CLAUDE_CONFIG_DIR/settings.json.$$"
	mv -f "$CLAUDE_CONFIG_DIR/settings.json.$$" "$CLAUDE_CONFIG_DIR/settings.json"
	unset IS_SANDBOX
	export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
	exec node "$bin/@agentclientprotocol/claude-agent-acp/dist/index.js" "$@"
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
