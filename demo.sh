#!/usr/bin/env bash
# Runs acpbridge end to end, offline, on bundled replay fixtures, and prints
# every line exchanged (>> client, << agent):
#   1. fixtures/hello.jsonl: initialize, session/new, one prompt turn;
#   2. fixtures/coding.jsonl: a coding turn in a scratch workspace: the
#      model's write_file call, the permission request and its answer
#      (allow_once), the diff, and the file written.
# The binary, the state directory and the workspace live in one temporary
# directory, removed at the end (KEEP=1 keeps it and says where).
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
if [[ ${KEEP:-} == 1 ]]; then
  trap 'echo "(kept: $tmp)"' EXIT
else
  trap 'rm -rf "$tmp"' EXIT
fi
bin=$tmp/acpbridge
CGO_ENABLED=0 go build -o "$bin" .

last=
send() { printf '>> %s\n' "$1"; printf '%s\n' "$1" >&"${AGENT[1]}"; }
until_line() { # print agent lines up to the first one containing $1
  while IFS= read -r last <&"${AGENT[0]}"; do
    printf '<< %s\n' "$last"
    [[ $last == *"$1"* ]] && return
  done
}
open_session() { # $1: the session's cwd; sets sid
  send '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}'
  until_line '"id":0'
  send "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":{\"cwd\":\"$1\",\"mcpServers\":[]}}"
  until_line '"id":1,'
  sid=$(sed -n 's/.*"sessionId":"\([^"]*\)".*/\1/p' <<<"$last")
}
finish() { exec {AGENT[1]}>&-; wait; }

echo "== 1. a text turn (fixtures/hello.jsonl) in $tmp/chat"
mkdir "$tmp/chat"
coproc AGENT { "$bin" --model "replay:$PWD/fixtures/hello.jsonl" --state-dir "$tmp/state" --log-level warn; }
open_session "$tmp/chat"
send "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"$sid\",\"prompt\":[{\"type\":\"text\",\"text\":\"hello, agent\"}]}}"
until_line '"id":2,'
finish

echo
echo "== 2. a coding turn (fixtures/coding.jsonl) in $tmp/workspace"
mkdir "$tmp/workspace"
coproc AGENT { "$bin" --model "replay:$PWD/fixtures/coding.jsonl" --state-dir "$tmp/state" --log-level warn; }
open_session "$tmp/workspace"
send "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"$sid\",\"prompt\":[{\"type\":\"text\",\"text\":\"write a greeting file\"}]}}"
until_line '"method":"session/request_permission"'
req=$(sed -n 's/^{"jsonrpc":"2.0","id":\([0-9]*\),.*/\1/p' <<<"$last")
echo "(the client, as a user would, allows it once)"
send "{\"jsonrpc\":\"2.0\",\"id\":$req,\"result\":{\"outcome\":{\"outcome\":\"selected\",\"optionId\":\"allow_once\"}}}"
until_line '"id":2,'
finish
echo
echo "== greeting.txt, as the agent wrote it:"
cat "$tmp/workspace/greeting.txt"
