#!/usr/bin/env bash
# The benchmark, from a fresh clone: bench/driver measures acpbridge side by
# side with its two reference agents (bench/floor, the least an ACP agent can
# do; bench/floortool, the floor doing acpbridge's protocol work for a tool
# call), interleaved rounds, and prints a Markdown table with the date, the
# machine, medians (min–max) and acpbridge's ratios to each. Then the stream
# length check (a 200,000-chunk stream's peak RSS against a 20,000-chunk
# one), and, when ../shared/bench is beside the repository, its cross-check
# against the Go and TypeScript SDK agents.
#
#   ./bench.sh                 # RUNS=5 rounds; RUNS=3 ./bench.sh for a quicker look
#   SHARED=0 ./bench.sh        # skip the ../shared/bench cross-check
set -euo pipefail
cd "$(dirname "$0")"
out=${BENCH_OUT:-/tmp/acpbridge-bench}
RUNS=${RUNS:-5}
mkdir -p "$out"
go build -o "$out/driver" ./bench/driver
go build -o "$out/floor" ./bench/floor
go build -o "$out/floortool" ./bench/floortool
CGO_ENABLED=0 go build -o "$out/acpbridge" .  # static: the README says why

acpbridge="$out/acpbridge --model replay:\$FIXTURE --state-dir \$STATE --max-turn-requests 1000000"
echo "== side by side ($(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
"$out/driver" --rounds "$RUNS" floor="$out/floor" floor-tool="$out/floortool --state-dir \$STATE" acpbridge="$acpbridge"

echo
echo "== stream length: acpbridge's peak RSS, 20,000 against 200,000 chunks of 64 bytes (3 rounds)"
for n in 20000 200000; do
  "$out/driver" --rounds 3 --n "$n" --m 10 --tabs 0 acpbridge="$acpbridge" |
    awk -F'|' -v n="$n" '/^\| acpbridge/ { gsub(/^ +| +$/, "", $7); gsub(/^ +| +$/, "", $6); print "  " n " chunks: peak RSS " $7 " MiB, " $6 " chunks/s" }'
done

shared=../shared/bench
if [ "${SHARED:-1}" != 0 ] && [ -x "$shared/run.sh" ]; then
  echo
  echo "== cross-check: $shared/run.sh (its own driver, with the Go and TypeScript SDK agents)"
  python3 "$shared/make-fixture.py" 20000 64 1000 > "$out/shared.replay.jsonl"
  sstate=$(mktemp -d)
  RUNS=$RUNS BENCH_OUT=$out/shared "$shared/run.sh" -- "$out/acpbridge" --model "replay:$out/shared.replay.jsonl" \
    --state-dir "$sstate" --max-turn-requests 5000
  rm -rf "$sstate"
fi

state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
echo
echo "== load: a 1,000-turn session (prompt, thought, read_file call, answer) loaded in a new process (3 runs)"
python3 - "$out/acpbridge" "$state" <<'PY'
import json, os, subprocess, sys, tempfile, time
binary, state = sys.argv[1], sys.argv[2]
turns = 1000
cwd = tempfile.mkdtemp()
open(os.path.join(cwd, "f.txt"), "w").write("file text " * 20)
fixture = os.path.join(cwd, "turns.jsonl")
with open(fixture, "w") as f:
    for i in range(turns):
        f.write(json.dumps({"chunks": [{"thought": f"Turn {i}."}, {"toolCall": {"id": f"c{i}", "name": "read_file", "input": {"path": "f.txt"}}}]}) + "\n")
        f.write(json.dumps({"chunks": [{"text": "An answer of some length. " * 8}]}) + "\n")

def start(*args):
    return subprocess.Popen([binary, "--state-dir", state, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
def call(p, msg):
    p.stdin.write((json.dumps(msg) + "\n").encode()); p.stdin.flush()
    n = 0
    while True:
        line = json.loads(p.stdout.readline()); n += 1
        if line.get("id") == msg["id"] and "method" not in line:
            return line, n

p = start("--model", "replay:" + fixture)
call(p, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
sid = call(p, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}})[0]["result"]["sessionId"]
for i in range(turns):
    call(p, {"jsonrpc": "2.0", "id": 10 + i, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": f"prompt {i}: please read f.txt"}]}})
p.stdin.close(); p.wait()
size = os.path.getsize(os.path.join(state, "sessions", sid + ".jsonl"))
for _ in range(3):
    p = start()
    call(p, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    t0 = time.perf_counter()
    _, lines = call(p, {"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"sessionId": sid, "cwd": cwd, "mcpServers": []}})
    ms = (time.perf_counter() - t0) * 1000
    hwm = [l for l in open(f"/proc/{p.pid}/status") if l.startswith("VmHWM")][0].split()[1]
    print(f"  load: {ms:.1f} ms for {lines - 1} replayed updates from a {size / 1e6:.2f} MB log; peak RSS {int(hwm) / 1024:.1f} MiB")
    p.stdin.close(); p.wait()
PY

echo "== exit: stdin closed in the middle of a turn, with a stdio MCP server attached (5 runs)"
go test -c -o "$out/mcp-helper" .   # the test binary serves MCP on stdio when ACPBRIDGE_TEST_MCP=stdio
python3 - "$out/acpbridge" "$out/mcp-helper" "$state" <<'PY'
import json, subprocess, sys, tempfile, time
binary, helper, state = sys.argv[1:4]
fixture = tempfile.mktemp(suffix=".jsonl")
open(fixture, "w").write(json.dumps({"chunks": [{"text": "Streaming"}, {"delayMs": 600000}]}) + "\n")
server = {"name": "helper", "command": helper, "args": [], "env": [{"name": "ACPBRIDGE_TEST_MCP", "value": "stdio"}]}
times = []
for _ in range(5):
    p = subprocess.Popen([binary, "--model", "replay:" + fixture, "--state-dir", state], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    def send(m):
        p.stdin.write((json.dumps(m) + "\n").encode()); p.stdin.flush()
    def until(pred):
        while True:
            line = json.loads(p.stdout.readline())
            if pred(line):
                return line
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    until(lambda l: l.get("id") == 0)
    send({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": tempfile.gettempdir(), "mcpServers": [server]}})
    sid = until(lambda l: l.get("id") == 1)["result"]["sessionId"]
    send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}})
    until(lambda l: l.get("method") == "session/update")
    t0 = time.perf_counter()
    p.stdin.close()
    status = p.wait()
    times.append((time.perf_counter() - t0) * 1000)
    if status != 0:
        print(f"  exit status {status}")
print("  exit after stdin EOF: " + ", ".join(f"{t:.0f}" for t in times) + " ms")
PY

echo "== --fanout: initialize and 20 threads one after another through the router against direct"
python3 bench/fanout/threads.py "$out/acpbridge" "$RUNS"

echo "== --fanout: an editor's first thread (spawn → first session/new) and its start-up restoring three threads"
python3 bench/fanout/first_thread.py "$out/acpbridge" 20
python3 bench/fanout/restore.py "$out/acpbridge" 3 20

echo "== --fanout: stdin's EOF with N sessions each running a command (sleep), answered and persisted"
python3 bench/fanout/eof.py "$out/acpbridge" 20 80 100

echo "== hostile input: peak RSS against an endless model stream, and the --fanout router with a 30 MB prompt beside a stream"
python3 bench/hostile/memory.py "$out/acpbridge"
python3 bench/hostile/mcp_flood.py "$out/acpbridge"
python3 bench/hostile/paused.py "$out/acpbridge"

echo "== --fanout: session/new and the stream through the router against direct (5 interleaved rounds)"
"$out/driver" --rounds 5 --m 0 --tabs 0 \
  direct="$out/acpbridge --model replay:\$FIXTURE --state-dir \$STATE" \
  fanout="$out/acpbridge --fanout --model replay:\$FIXTURE --state-dir \$STATE" | grep -E '^\| (agent|direct|fanout)|÷'

echo "== idle threads: summed PSS of the --fanout router and its children after N session/new, beside one multi-session agent holding N (the Go and TypeScript SDK agents, when ../shared/bench ran) (3 runs)"
ts=$out/shared/ts-sdk   # installed by ../shared/bench's run.sh above
for n in 10 50; do
  python3 bench/fanout/idle_pss.py "$n" "acpbridge --fanout" "$out/acpbridge" --fanout --max-children 64 --state-dir "$state"
  if [ -x "$out/shared/bin/go-sdk" ]; then
    python3 bench/fanout/idle_pss.py "$n" "Go SDK agent" "$out/shared/bin/go-sdk"
  fi
  if [ -d "$ts/node_modules" ]; then
    python3 bench/fanout/idle_pss.py "$n" "TS SDK agent" node "$ts/agent.js"
  fi
done
echo "== idle threads past --idle-timeout: the router's tree with 50 evicted threads against the router alone (3 runs)"
IDLE_WAIT=3 python3 bench/fanout/idle_pss.py 50 "acpbridge --fanout, 50 threads evicted" "$out/acpbridge" --fanout --idle-timeout 1s --state-dir "$state"
IDLE_WAIT=3 python3 bench/fanout/idle_pss.py 0 "acpbridge --fanout, no thread" "$out/acpbridge" --fanout --idle-timeout 1s --state-dir "$state"
echo "== reopening an evicted thread: time to the first update of its next prompt against a live thread's"
python3 bench/fanout/reopen.py "$out/acpbridge" "$RUNS"
echo "== another agent behind the router (testdata/oneagent): session/new with a slow start hidden by a spare, a prompt's first update, a permission round trip"
go build -o "$out/oneagent" ./testdata/oneagent
python3 bench/fanout/agent.py "$out/acpbridge" "$out/oneagent" "$RUNS"
echo "== a stuck thread beside a live one (oneagent that stops reading, a 300 KiB prompt waiting for it): the live thread's prompt before and after"
python3 bench/fanout/stuck.py "$out/acpbridge" "$out/oneagent" 20
echo "== a TypeScript SDK agent (examples/editor-test/agent.mjs) behind the router against it run directly"
(cd examples/editor-test && npm ci --no-audit --no-fund --silent)
python3 bench/fanout/sdk_agent.py "$out/acpbridge" "$RUNS"

# Last: the search tree's 100,000 files, written and removed, keep the
# disk's journal busy for a while after, and every fsync measured then (a
# session's creation and close) waits on it: run before the threads above,
# it more than tripled a direct session/new.
echo "== search_text against ripgrep on the same tree (the binary through ACP; rg from the distribution's package when present)"
python3 bench/search/search.py "$out/acpbridge" "$RUNS"
