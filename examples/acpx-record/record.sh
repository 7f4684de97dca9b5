#!/usr/bin/env bash
# record.sh: acpx (a CLI client that starts an agent process for a prompt
# and lets it go when idle) driven through `acpbridge scenario record
# --append --deterministic`, so that its three processes (session/new,
# then two prompts, each resuming the session) become ONE scenario, which
# then replays offline with `acpbridge scenario run`. Run it twice: the
# two recordings are byte for byte the same.
#
#   npm ci && ./record.sh ACPBRIDGE
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/cwd"
acpx() { HOME="$work/home" node "$here/node_modules/acpx/dist/cli.js" "$@"; }
agent="$bin scenario record --append --deterministic --out $work/acpx.txtar -- $bin --model replay:$here/model.jsonl --state-dir $work/state"
# Each acpx call ends its agent process once it has been idle a second
# (--ttl 1); the next call starts a new one. Wait for the recorder of the
# last call to have exited, so that the next one appends after it.
# (Linux: a process whose command line names this run's recording; the
# pattern's [.] keeps grep from finding its own command line.)
recorders() { grep -qsa "$(basename "$work")/acpx[.]txtar" /proc/[0-9]*/cmdline; }
settle() { for _ in $(seq 100); do recorders || return 0; sleep 0.1; done; echo "a recorder did not exit" >&2; exit 1; }
# record: a new session, then two prompts, each in a process of its own.
record() {
  rm -rf "$work/state" "$work/home" "$work/acpx.txtar" && mkdir -p "$work/home"
  for step in "sessions new" "prompt hello" "prompt again"; do
    read -r cmd text <<<"$step"
    acpx --agent "$agent" --cwd "$work/cwd" --approve-all --ttl 1 --format quiet $cmd ${text:+"$text"} >/dev/null
    settle
  done
}
record
parts=$(grep -c '^restart$' "$work/acpx.txtar" || true)
echo "recorded $((parts + 1)) processes into one scenario"
[ "$parts" = 2 ] || { echo "expected 3 processes (2 restarts), found $((parts + 1))" >&2; cat "$work/acpx.txtar" >&2; exit 1; }
"$bin" scenario run "$work/acpx.txtar"
cp "$work/acpx.txtar" "$work/first.txtar"
record
cmp "$work/first.txtar" "$work/acpx.txtar" && echo "recorded twice: the same bytes"
