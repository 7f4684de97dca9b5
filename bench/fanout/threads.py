#!/usr/bin/env python3
"""Threads through --fanout against a direct acpbridge (bench.sh runs it).

  threads.py ACPBRIDGE [ROUNDS]

Times, interleaved over ROUNDS rounds: spawn to the initialize answer,
direct and through the router; 20 session/new one after another, through
the router (each a thread of its own), on a direct process (new, then
close, 20 times: a warm process), and on 20 direct processes (each its
first session/new, timed from the initialize answer: a direct thread's
cost where a tab is a process); and 20 threads through the router 50 ms
apart (an editor's pace: the spares are refilled in between). Idle PSS is
idle_pss.py's.
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
WARM, FRESH, ROUTER, PACED = ("20 × session/new, direct (new, then close)", "20 × session/new, direct (each a fresh process's first)",
                              "20 × session/new, router (a thread each)", "20 × session/new 50 ms apart, router")
r = {k: [] for k in ("initialize, direct", "initialize, router", WARM, FRESH, ROUTER, PACED)}
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
        r[WARM if name == "direct" else ROUTER].append(statistics.median(times))
        a.close()
    times = []
    for _ in range(20):
        _, a = start()
        a.call("initialize", init)
        t0 = time.perf_counter()
        a.call("session/new", new)
        times.append((time.perf_counter() - t0) * 1000)
        a.close()
    r[FRESH].append(statistics.median(times))
    _, a = start("--fanout")
    a.call("initialize", init)
    times = []
    for _ in range(20):
        time.sleep(0.05)
        t0 = time.perf_counter()
        a.call("session/new", new)
        times.append((time.perf_counter() - t0) * 1000)
    r[PACED].append(statistics.median(times))
    a.close()

def cell(v):
    return "%.2f (%.2f–%.2f)" % (statistics.median(v), min(v), max(v))
print("| through --fanout | ms (median of rounds; session/new: each round's median of 20) |")
print("|---|---|")
for k, v in r.items():
    print(f"| {k} | {cell(v)} |")
m = {k: statistics.median(v) for k, v in r.items()}
print("\ninitialize, router ÷ direct: %.2f× (target ≤ 1.2×); session/new one after another, router ÷ direct (warm): %.2f× (target ≤ 2×)"
      % (m["initialize, router"] / m["initialize, direct"], m[ROUTER] / m[WARM]))
print("session/new, router ÷ a fresh direct process's: %.2f× one after another, %.2f× 50 ms apart"
      % (m[ROUTER] / m[FRESH], m[PACED] / m[FRESH]))
