#!/usr/bin/env python3
"""stdin's EOF on a --fanout router with N sessions each running a command.

  eof.py ACPBRIDGE [N ...]

For each N: open N sessions through one router, start a turn in each whose
model runs `sleep 30` (run_command, the permission answered allow_once), wait
until every command runs, close stdin, and report the time to the router's
exit, its exit status, how many prompts were answered `cancelled`, and how
many turn ends the session logs hold.
"""
import json, os, subprocess, sys, tempfile, time

binary = sys.argv[1]
counts = [int(a) for a in sys.argv[2:]] or [20, 80, 100]

def run(n):
    work = tempfile.mkdtemp()
    state = os.path.join(work, "state")
    fixture = os.path.join(work, "m.jsonl")
    with open(fixture, "w") as f:
        for _ in range(n):
            f.write(json.dumps({"chunks": [{"toolCall": {"id": "c1", "name": "run_command", "input": {"command": "sleep 30"}}}]}) + "\n")
    p = subprocess.Popen([binary, "--fanout", "--max-children", str(n + 8), "--state-dir", state, "--model", "replay:" + fixture],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    def send(msgs):
        p.stdin.write("".join(json.dumps(m) + "\n" for m in msgs).encode()); p.stdin.flush()
    def read():
        return json.loads(p.stdout.readline())
    send([{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}])
    read()
    sids = []
    for i in range(n):
        send([{"jsonrpc": "2.0", "id": 100 + i, "method": "session/new", "params": {"cwd": work, "mcpServers": []}}])
        while True:
            m = read()
            if m.get("id") == 100 + i and "method" not in m:
                sids.append(m["result"]["sessionId"]); break
    send([{"jsonrpc": "2.0", "id": 1000 + i, "method": "session/prompt", "params": {"sessionId": s, "prompt": [{"type": "text", "text": "go"}]}} for i, s in enumerate(sids)])
    running, answers = 0, {}
    while running < n:
        m = read()
        if m.get("method") == "session/request_permission":
            send([{"jsonrpc": "2.0", "id": m["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}])
        elif m.get("method") == "session/update" and m["params"]["update"].get("sessionUpdate") == "tool_call_update" and m["params"]["update"].get("status") == "in_progress":
            running += 1
    t0 = time.perf_counter()
    p.stdin.close()
    for line in p.stdout:
        m = json.loads(line)
        if "method" not in m and isinstance(m.get("id"), int) and m["id"] >= 1000:
            answers[m["id"]] = m
    rc = p.wait(timeout=30)
    dt = time.perf_counter() - t0
    cancelled = sum(1 for a in answers.values() if a.get("result", {}).get("stopReason") == "cancelled")
    ended = 0
    for s in sids:
        with open(os.path.join(state, "sessions", s + ".jsonl")) as f:
            ended += any('"type":"turn_end"' in l for l in f)
    print(f"| {n} | {dt*1000:.0f} | {rc} | {cancelled}/{n} | {ended}/{n} |", flush=True)

print("| sessions | ms from EOF to exit | exit status | prompts answered cancelled | turns persisted |")
print("|---|---|---|---|---|")
for n in counts:
    run(n)
