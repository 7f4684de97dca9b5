#!/usr/bin/env bash
# Runs acpbridge end to end, offline, on the bundled replay fixture
# fixtures/hello.jsonl, and prints every line exchanged (>> client, << agent):
# initialize, session/new, one prompt turn.
set -euo pipefail
cd "$(dirname "$0")"
bin=$(mktemp -d)/acpbridge
state=$(mktemp -d)
CGO_ENABLED=0 go build -o "$bin" .
coproc AGENT { "$bin" --model replay:fixtures/hello.jsonl --state-dir "$state" --log-level warn; }

last=
send() { printf '>> %s\n' "$1"; printf '%s\n' "$1" >&"${AGENT[1]}"; }
until_line() { # print agent lines up to the first one containing $1
  while IFS= read -r last <&"${AGENT[0]}"; do
    printf '<< %s\n' "$last"
    [[ $last == *"$1"* ]] && return
  done
}

send '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}'
until_line '"id":0'
send "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":{\"cwd\":\"$PWD\",\"mcpServers\":[]}}"
until_line '"id":1'
sid=$(sed -n 's/.*"sessionId":"\([^"]*\)".*/\1/p' <<<"$last")
send "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"$sid\",\"prompt\":[{\"type\":\"text\",\"text\":\"hello, agent\"}]}}"
until_line '"id":2'
exec {AGENT[1]}>&-
wait
echo "(session $sid is stored under $state)"
