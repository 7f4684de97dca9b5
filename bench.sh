#!/usr/bin/env bash
# Measures acpbridge side by side with the peer agents of ../shared/bench
# (a stdlib floor, the Go SDK, the TypeScript SDK), interleaved runs, and then
# what ten tabs cost: ten acpbridge processes after session/new.
#
#   ./bench.sh                 # RUNS=5 rounds; RUNS=3 ./bench.sh for a quicker look
#   ONLY="floor acpbridge" ./bench.sh
#
# Prints the driver's table (median (min-max)), the 200,000-chunk stream's
# peak against the 20,000-chunk one, and the ten-tab memory.
set -euo pipefail
cd "$(dirname "$0")"
shared=../shared/bench
out=${BENCH_OUT:-/tmp/acp-bench}
mkdir -p "$out"
CGO_ENABLED=0 go build -o "$out/acpbridge" .  # static: starts ~1.8 ms sooner (README)
python3 "$shared/make-fixture.py" 20000 64 1000 > "$out/bench.replay.jsonl"
python3 "$shared/make-fixture.py" 200000 64 0 > "$out/bench200k.replay.jsonl"
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT

echo "== side by side: $shared/run.sh"
BENCH_OUT=$out "$shared/run.sh" -- "$out/acpbridge" --model "replay:$out/bench.replay.jsonl" \
  --state-dir "$state" --max-turn-requests 5000

echo "== stream length: peak RSS of a 20,000- and a 200,000-chunk stream (3 runs each)"
for n in 20000 200000; do
  fixture=$out/bench.replay.jsonl
  [ "$n" = 200000 ] && fixture=$out/bench200k.replay.jsonl
  for _ in 1 2 3; do
    "$out/bin/driver" --name acpbridge --n "$n" --k 64 --m 0 --no-read -- \
      "$out/acpbridge" --model "replay:$fixture" --state-dir "$state"
  done | python3 -c '
import json, sys, statistics
runs = [json.loads(l) for l in sys.stdin if l.strip()]
peaks = [r["stream"]["rss_mib"] for r in runs]
rates = [r["stream"]["chunks_per_s"] for r in runs]
print(f"  {'"$n"':>7} chunks: peak RSS {statistics.median(peaks):.2f} MiB (runs {min(peaks):.2f}-{max(peaks):.2f}), {statistics.median(rates)/1000:.0f}k chunks/s")'
done

echo "== ten tabs: ten acpbridge processes, each after initialize and session/new"
python3 - "$out/acpbridge" "$state" <<'PY'
import json, os, subprocess, sys, tempfile
binary, state = sys.argv[1], sys.argv[2]
procs = []
for i in range(10):
    p = subprocess.Popen([binary, "--state-dir", state], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    def call(msg):
        p.stdin.write((json.dumps(msg) + "\n").encode()); p.stdin.flush()
        while True:
            line = json.loads(p.stdout.readline())
            if line.get("id") == msg["id"]:
                return line
    call({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    call({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": tempfile.gettempdir(), "mcpServers": []}})
    procs.append(p)
def field(pid, name):
    for line in open(f"/proc/{pid}/smaps_rollup"):
        if line.startswith(name + ":"):
            return int(line.split()[1]) / 1024
rss = sum(field(p.pid, "Rss") for p in procs)
pss = sum(field(p.pid, "Pss") for p in procs)
anon = sum(field(p.pid, "Anonymous") for p in procs)
print(f"  sum of RSS {rss:.1f} MiB; sum of PSS {pss:.1f} MiB (the binary's pages are shared); anonymous {anon:.1f} MiB")
for p in procs:
    p.stdin.close(); p.wait()
PY

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

echo "== --fanout: stream through the router vs direct (5 interleaved runs), session/new with a warm child"
for _ in 1 2 3 4 5; do
  "$out/bin/driver" --name direct --no-read -- "$out/acpbridge" --model "replay:$out/bench.replay.jsonl" --state-dir "$state" --max-turn-requests 5000
  "$out/bin/driver" --name fanout --no-read -- "$out/acpbridge" --fanout --model "replay:$out/bench.replay.jsonl" --state-dir "$state" --max-turn-requests 5000
done > "$out/fanout.jsonl"
"$out/bin/driver" summarize "$out/fanout.jsonl"
python3 - "$out/fanout.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = lambda name, f: statistics.median(f(r) for r in runs if r["agent"] == name)
for what, f in [("session/new ms", lambda r: r["cold"]["session_new_ms"]), ("chunks/s", lambda r: r["stream"]["chunks_per_s"])]:
    d, o = by("direct", f), by("fanout", f)
    print(f"  {what}: direct {d:.3g}, through the router {o:.3g} ({o / d:.0%} of direct)")
PY

echo "== --fanout: summed PSS of the router and its children after 10 session/new, vs one TS SDK agent holding 10 (3 runs)"
ts=$out/ts-sdk
if [ ! -d "$ts/node_modules" ]; then
  rm -rf "$ts" && cp -r "$shared/peers/ts-sdk" "$ts" && chmod -R u+w "$ts" && (cd "$ts" && npm ci --silent)
fi
cat > "$out/pss.py" <<'PY'
import json, os, subprocess, sys, tempfile, time
def tree(pid):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                s = open(f"/proc/{d}/stat").read()
                kids.setdefault(int(s[s.rindex(")") + 2:].split()[1]), []).append(int(d))
            except OSError:
                pass
    out, q = [pid], [pid]
    while q:
        for c in kids.get(q.pop(), []):
            out.append(c); q.append(c)
    return out
def pss(pid):
    return next(int(l.split()[1]) for l in open(f"/proc/{pid}/smaps_rollup") if l.startswith("Pss:"))
def measure(cmd):
    cwd = tempfile.mkdtemp()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    def call(i, m, params):
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": params}) + "\n").encode()); p.stdin.flush()
        while True:
            l = json.loads(p.stdout.readline())
            if l.get("id") == i and "method" not in l:
                return l
    call(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    for i in range(10):
        assert "result" in call(1 + i, "session/new", {"cwd": cwd, "mcpServers": []})
    time.sleep(0.5)  # let the next warm child finish starting
    procs = tree(p.pid)
    total = sum(pss(x) for x in procs) / 1024
    p.stdin.close(); p.wait(timeout=5)
    return total, len(procs)
name, cmd = sys.argv[1], sys.argv[2:]
v = sorted(measure(cmd) for _ in range(3))
print(f"  {name}: {v[1][0]:.1f} MiB (runs {v[0][0]:.1f}-{v[2][0]:.1f}), {v[1][1]} processes")
PY
python3 "$out/pss.py" "acpbridge --fanout, 10 sessions" "$out/acpbridge" --fanout --model "replay:$out/bench.replay.jsonl" --state-dir "$state"
python3 "$out/pss.py" "TS SDK agent, 10 sessions" node "$ts/agent.js"
