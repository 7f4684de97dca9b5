#!/usr/bin/env python3
"""A stuck thread beside a live one, through --fanout (bench.sh runs it).

  stuck.py ACPBRIDGE ONEAGENT [ROUNDS]

Two threads of testdata/oneagent behind `acpbridge --fanout --`: thread
B's prompt, time to its first update and to its answer, ROUNDS times
before and ROUNDS times after thread A's agent stops reading its stdin with
a 300 KiB prompt (a pasted file) waiting for it. The router writes each
child's stdin from a queue of its own, so B's figures should not move.
"""
import os, statistics, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acpclient import Agent

binary, oneagent = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
work = tempfile.mkdtemp()
env = dict(os.environ, ONEAGENT_STATE=work)
a = Agent([binary, "--fanout", "--state-dir", os.path.join(work, "state"), "--", oneagent], env=env)
a.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
sa = a.call("session/new", {"cwd": work, "mcpServers": []})["result"]["sessionId"]
sb = a.call("session/new", {"cwd": work, "mcpServers": []})["result"]["sessionId"]


def prompt(sid, text):
    """Sends a prompt to sid; its request id."""
    a.n += 1
    a.send({"jsonrpc": "2.0", "id": a.n, "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}})
    return a.n


def turn(sid):
    """ms to the first update of sid's prompt, and to its answer."""
    t0 = time.perf_counter()
    n = prompt(sid, "hello")
    a.until(lambda m: m.get("method") == "session/update" and m["params"]["sessionId"] == sid)
    first = time.perf_counter() - t0
    a.until(lambda m: m.get("id") == n and "method" not in m)
    return first * 1000, (time.perf_counter() - t0) * 1000


def figures(label):
    runs = [turn(sb) for _ in range(rounds)]
    first = statistics.median(r[0] for r in runs)
    answer = statistics.median(r[1] for r in runs)
    print(f"| {label} | {first:.2f} | {answer:.2f} |")


print(f"| thread B's prompt, median of {rounds} (ms) | first update | answer |")
print("|---|---|---|")
figures("thread A idle")
prompt(sa, "stop reading")
a.until(lambda m: m.get("method") == "session/update" and m["params"]["sessionId"] == sa)
prompt(sa, "big " + "z" * (300 << 10))
figures("thread A's agent not reading, a 300 KiB prompt waiting for it")
a.close(timeout=15)
