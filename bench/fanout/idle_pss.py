#!/usr/bin/env python3
"""Summed PSS of an agent's processes holding N idle sessions (bench.sh runs
it for acpbridge --fanout and, beside it, the Go and TypeScript SDK agents).

  idle_pss.py N NAME CMD [ARG...]

Starts CMD, initializes, opens N sessions one after another, waits for the
spares a --fanout router starts (IDLE_WAIT seconds, default 0.5: past a
router's --idle-timeout, what its evicted threads leave), and sums the PSS
of the process and every process below it (Linux: /proc/PID/smaps_rollup);
three runs, the median with the range.
"""
import os, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acpclient import Agent

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
    a = Agent(cmd)
    a.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    for _ in range(n):
        assert "result" in a.call("session/new", {"cwd": cwd, "mcpServers": []})
    time.sleep(float(os.environ.get("IDLE_WAIT", "0.5")))  # the next warm child starts; idle ones may be evicted
    procs = tree(a.pid)
    total = sum(pss(x) for x in procs) / 1024
    a.close(timeout=5)
    return total, len(procs)

n, name, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
v = sorted(measure(cmd) for _ in range(3))
print(f"  {name}, {n} sessions: {v[1][0]:.1f} MiB (runs {v[0][0]:.1f}-{v[2][0]:.1f}), {v[1][1]} processes, {v[1][0] / max(n, 1):.2f} MiB a session")
