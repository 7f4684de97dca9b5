#!/usr/bin/env python3
"""An editor's start-up that restores its threads: the time from the
router's spawn until every one of N threads is loaded, and until each has
answered a prompt.

  restore.py ACPBRIDGE [THREADS [ROUNDS [ROUTER FLAGS...]]]   # 3 threads, 10 rounds

Once, N threads are opened and prompted through one router, which is then
closed. Each round spawns a router on the same state, sends initialize,
and on its answer the N session/load in one write (Zed restores the
threads of its panes so); once all are answered, a prompt to each in one
write. Prints the medians (and ranges) of spawn → every load answered and
spawn → every prompt answered. Compare builds, or --spares values, with
it: the spares a router starts at its start serve the first loads.
"""
import os, statistics, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acpclient import Agent

binary = sys.argv[1]
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 3
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
flags = sys.argv[4:]
cwd, state = tempfile.mkdtemp(), tempfile.mkdtemp()
fixture = os.path.join(cwd, "f.jsonl")
with open(fixture, "w") as f:
    f.write('{"chunks":[{"text":"an answer"}]}\n' * (threads * (rounds + 2)))
init = {"protocolVersion": 1, "clientCapabilities": {}}

def router():
    return Agent([binary, "--fanout", *flags, "--model", "replay:" + fixture, "--state-dir", state])

def requests(a, method, params):
    """One request per params, in one write; their ids."""
    ids = []
    msgs = []
    for p in params:
        a.n += 1
        ids.append(a.n)
        msgs.append({"jsonrpc": "2.0", "id": a.n, "method": method, "params": p})
    a.send(*msgs)
    return ids

def answers(a, ids):
    """Waits for the answers to ids; fails on an error."""
    left = set(ids)
    while left:
        m = a.until(lambda m: "method" not in m and m.get("id") in left)
        assert m is not None and "error" not in m, m
        left.discard(m["id"])

prompt = lambda sid: {"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]}
a = router()
a.call("initialize", init)
sids = [a.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"] for _ in range(threads)]
answers(a, requests(a, "session/prompt", [prompt(s) for s in sids]))
a.close()

loaded, prompted = [], []
for _ in range(rounds):
    t0 = time.perf_counter()
    a = router()
    a.call("initialize", init)
    answers(a, requests(a, "session/load", [{"sessionId": s, "cwd": cwd, "mcpServers": []} for s in sids]))
    loaded.append((time.perf_counter() - t0) * 1000)
    answers(a, requests(a, "session/prompt", [prompt(s) for s in sids]))
    prompted.append((time.perf_counter() - t0) * 1000)
    a.close()
fmt = lambda v: f"{statistics.median(v):.1f} ({min(v):.1f}–{max(v):.1f})"
print(f"  {threads} threads restored{(' (' + ' '.join(flags) + ')') if flags else ''}: spawn → every load answered {fmt(loaded)} ms; → every prompt answered {fmt(prompted)} ms")
