#!/usr/bin/env python3
"""Time to a prompt's first update in a thread through --fanout: a live
thread against one whose process --idle-timeout ended (reopened: a new
process, session/resume, then the prompt).

  reopen.py ACPBRIDGE [ROUNDS]     # ROUNDS threads each way (default 5)

Each round opens a thread and prompts it once (warm), times a second prompt
(live), waits past the timeout (0.5 s) until the router has evicted the
thread, and times a third (reopened). Prints the medians with the ranges.
"""
import os, statistics, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acpclient import Agent

binary = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
cwd, state = tempfile.mkdtemp(), tempfile.mkdtemp()
fixture = os.path.join(cwd, "f.jsonl")
with open(fixture, "w") as f:
    f.write('{"chunks":[{"text":"an answer"}]}\n' * (3 * rounds + 3))

def first_update(a, sid, text):
    a.n += 1
    n = a.n
    start = time.perf_counter()
    a.send({"jsonrpc": "2.0", "id": n, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}})
    a.until(lambda m: m.get("method") == "session/update" and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk")
    took = (time.perf_counter() - start) * 1000
    a.until(lambda m: m.get("id") == n and "method" not in m)
    return took

a = Agent([binary, "--fanout", "--idle-timeout", "500ms", "--model", "replay:" + fixture, "--state-dir", state])
a.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
live, reopened = [], []
for _ in range(rounds):
    sid = a.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    first_update(a, sid, "warm")
    live.append(first_update(a, sid, "live"))
    time.sleep(1.5)  # past the timeout and the router's next look
    reopened.append(first_update(a, sid, "reopened"))
a.close()
fmt = lambda v: f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})"
print(f"  time to first update, live thread: {fmt(live)} ms")
print(f"  time to first update, evicted thread reopened: {fmt(reopened)} ms")
print(f"  reopened ÷ live: {statistics.median(reopened) / statistics.median(live):.2f}× (target ≤ 2×)")
