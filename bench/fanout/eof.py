#!/usr/bin/env python3
"""stdin's EOF on a --fanout router with N sessions each running a command.

  eof.py ACPBRIDGE [N ...]

For each N: open N sessions through one router, start a turn in each whose
model runs `sleep 30` (run_command, the permission answered allow_once), wait
until every command runs, close stdin, and report the time to the router's
exit, its exit status, how many prompts were answered `cancelled`, and how
many turn ends the session logs hold.
"""
import json, os, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acpclient import Agent

binary = sys.argv[1]
counts = [int(a) for a in sys.argv[2:]] or [20, 80, 100]

def run(n):
    work = tempfile.mkdtemp()
    state = os.path.join(work, "state")
    fixture = os.path.join(work, "m.jsonl")
    with open(fixture, "w") as f:
        for _ in range(n):
            f.write(json.dumps({"chunks": [{"toolCall": {"id": "c1", "name": "run_command", "input": {"command": "sleep 30"}}}]}) + "\n")
    a = Agent([binary, "--fanout", "--max-children", str(n + 8), "--state-dir", state, "--model", "replay:" + fixture])
    a.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    sids = [a.call("session/new", {"cwd": work, "mcpServers": []})["result"]["sessionId"] for _ in range(n)]
    a.send(*({"jsonrpc": "2.0", "id": 1000 + i, "method": "session/prompt", "params": {"sessionId": s, "prompt": [{"type": "text", "text": "go"}]}} for i, s in enumerate(sids)))
    running = 0
    while running < n:
        m = a.until(lambda m: True)
        if m.get("method") == "session/request_permission":
            a.send({"jsonrpc": "2.0", "id": m["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}})
        elif m.get("method") == "session/update" and m["params"]["update"].get("sessionUpdate") == "tool_call_update" and m["params"]["update"].get("status") == "in_progress":
            running += 1
    t0 = time.perf_counter()
    a.p.stdin.close()
    answers = {}
    while (m := a.until(lambda m: "method" not in m and isinstance(m.get("id"), int) and m["id"] >= 1000)) is not None:
        answers[m["id"]] = m
    rc = a.p.wait(timeout=30)
    dt = time.perf_counter() - t0
    cancelled = sum(1 for r in answers.values() if r.get("result", {}).get("stopReason") == "cancelled")
    ended = 0
    for s in sids:
        with open(os.path.join(state, "sessions", s + ".jsonl")) as f:
            ended += any('"type":"turn_end"' in l for l in f)
    print(f"| {n} | {dt*1000:.0f} | {rc} | {cancelled}/{n} | {ended}/{n} |", flush=True)

print("| sessions | ms from EOF to exit | exit status | prompts answered cancelled | turns persisted |")
print("|---|---|---|---|---|")
for n in counts:
    run(n)
