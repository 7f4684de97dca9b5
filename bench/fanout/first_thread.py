#!/usr/bin/env python3
"""An editor's first thread: through --fanout against a direct acpbridge.

  first_thread.py ACPBRIDGE [ROUNDS [ROUTER FLAGS...]]

Times, interleaved over ROUNDS rounds (default 20), from the process's
spawn to the answer of the first session/new, sent as soon as initialize is
answered (an editor opening a thread at start-up): a direct acpbridge, and
the router, whose thread's child is a spare started at the router's own
start. Prints each one's median and range and the router's ratio to the
direct process (paired by round, the ratio of the medians).
"""
import os, statistics, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acpclient import Agent

binary = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
router_flags = sys.argv[3:]  # e.g. --spares 1
work = tempfile.mkdtemp()
init = {"protocolVersion": 1, "clientCapabilities": {}}
new = {"cwd": work, "mcpServers": []}
r = {"direct": [], "router": []}
for k in range(rounds):
    order = (("direct", []), ("router", ["--fanout", *router_flags]))
    for name, args in (order if k % 2 == 0 else order[::-1]):
        t0 = time.perf_counter()
        a = Agent([binary, "--state-dir", os.path.join(work, "state"), *args])
        a.call("initialize", init)
        a.call("session/new", new)
        r[name].append((time.perf_counter() - t0) * 1000)
        a.close()

print("| spawn → first session/new answered%s | ms, median (min–max) of %d rounds |" % ((" (router: " + " ".join(router_flags) + ")") if router_flags else "", rounds))
print("|---|---|")
for name, v in r.items():
    print("| %s | %.2f (%.2f–%.2f) |" % (name, statistics.median(v), min(v), max(v)))
print("\nrouter ÷ direct: %.2f× (target ≤ 1.3×)" % (statistics.median(r["router"]) / statistics.median(r["direct"])))
