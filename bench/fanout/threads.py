#!/usr/bin/env python3
"""Threads through --fanout against a direct acpbridge (bench.sh runs it).

  threads.py ACPBRIDGE [ROUNDS]

Times, interleaved over ROUNDS rounds: spawn to the initialize answer,
direct and through the router; 20 session/new one after another, through
the router (each a thread of its own) and on a direct process (new, then
close, 20 times). Idle PSS is idle_pss.py's.
"""
import os, statistics, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acpclient import Agent

binary = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
work = tempfile.mkdtemp()

def start(*args):
    """acpbridge with args, and the time it was started."""
    return time.perf_counter(), Agent([binary, "--state-dir", os.path.join(work, "state"), "--max-children", "64", *args])

init = {"protocolVersion": 1, "clientCapabilities": {}}
new = {"cwd": work, "mcpServers": []}
r = {"initialize, direct": [], "initialize, router": [], "20 × session/new, direct": [], "20 × session/new, router": []}
for _ in range(rounds):
    for name, args in (("direct", []), ("router", ["--fanout"])):
        t0, a = start(*args)
        a.call("initialize", init)
        r["initialize, " + name].append((time.perf_counter() - t0) * 1000)
        time.sleep(0.3)  # the router's spares start in the background, as between an editor's start and its first thread
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            sid = a.call("session/new", new)["result"]["sessionId"]
            times.append((time.perf_counter() - t0) * 1000)
            if name == "direct":
                a.call("session/close", {"sessionId": sid})
        r["20 × session/new, " + name].append(statistics.median(times))
        a.close()

def cell(v):
    return "%.2f (%.2f–%.2f)" % (statistics.median(v), min(v), max(v))
print("| through --fanout | ms (median of rounds; session/new: each round's median of 20) |")
print("|---|---|")
for k, v in r.items():
    print(f"| {k} | {cell(v)} |")
m = {k: statistics.median(v) for k, v in r.items()}
print("\ninitialize, router ÷ direct: %.2f× (target ≤ 1.2×); session/new, router ÷ direct: %.2f× (target ≤ 2×)"
      % (m["initialize, router"] / m["initialize, direct"], m["20 × session/new, router"] / m["20 × session/new, direct"]))

