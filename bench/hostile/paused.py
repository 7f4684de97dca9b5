#!/usr/bin/env python3
"""The router's peak memory with an editor that stops reading, for the
binaries named (before/after).

  paused.py ACPBRIDGE [ACPBRIDGE ...]

Each case runs ACPBRIDGE --fanout -- oneagent (the tests' agent, built
from testdata/oneagent) with 1 or 16 threads open. Each thread's agent
writes 12 lines of 2 MiB at once: session/update notifications, or
session/request_permission requests whose answers it does not await. The
client reads nothing for 6 s, then everything; the router's peak RSS is
read from /proc/PID/status (VmHWM) once every line has come.
"""
import os, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acpclient import Agent

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
LINES, SIZE, PAUSE = 12, 2 << 20, 6.0

def hwm(pid):
    return next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM")) / 1024

def case(binary, oneagent, threads, trigger):
    work = tempfile.mkdtemp()
    env = dict(os.environ, ONEAGENT_STATE=os.path.join(work, "agent"))
    a = Agent([binary, "--fanout", "--state-dir", os.path.join(work, "state"), "--spares", "0",
               "--max-children", str(threads + 2), "--", oneagent], env)
    a.call("initialize", {"protocolVersion": 1})
    sids = [a.call("session/new", {"cwd": work, "mcpServers": []})["result"]["sessionId"] for _ in range(threads)]
    a.send(*[{"jsonrpc": "2.0", "id": 1000 + i, "method": "session/prompt",
              "params": {"sessionId": s, "prompt": [{"type": "text", "text": f"{trigger} {LINES} of {SIZE}"}]}}
             for i, s in enumerate(sids)])
    time.sleep(PAUSE)  # the editor reads nothing meanwhile
    answers, whole = 0, 0
    def read(m):
        nonlocal answers, whole
        if m.get("method") == "session/update" and len(m["params"]["update"].get("content", {}).get("text", "")) == 4 + SIZE:
            whole += 1
        if m.get("method") == "session/request_permission" and len(m["params"]["toolCall"]["title"]) == 4 + SIZE:
            whole += 1
        if "method" not in m and m.get("id", 0) >= 1000:
            answers += 1
        return answers == threads
    a.until(read)
    peak = hwm(a.pid)
    a.close()
    assert whole == threads * LINES, f"{whole} of {threads * LINES} lines came whole"
    return f"{peak:.0f} MiB"

def main():
    with tempfile.TemporaryDirectory() as d:
        oneagent = os.path.join(d, "oneagent")
        subprocess.run(["go", "build", "-o", oneagent, "./testdata/oneagent"], cwd=ROOT, check=True)
        print(f"| binary | 1 thread, updates | 16 threads, updates | 1 thread, requests | 16 threads, requests |")
        print("|---|---|---|---|---|")
        for b in sys.argv[1:]:
            cells = [case(os.path.abspath(b), oneagent, n, kind) for kind in ("burst", "permits") for n in (1, 16)]
            print(f"| {os.path.basename(b)} | " + " | ".join(cells) + " |", flush=True)

main()
