#!/usr/bin/env python3
"""The router's cost in front of a real agent: examples/editor-test/agent.mjs
(a single-session agent on the official TypeScript SDK; npm ci in
examples/editor-test first) behind `acpbridge --fanout --spares 1 --`
against it run directly:

  sdk_agent.py ACPBRIDGE [ROUNDS]      # default 5 rounds

- session/new: a fresh process's first one, direct, against the router's
  with a spare waiting (the agent refuses a second session, so it has no
  warm one);
- a prompt's first streamed update, and a permission round trip (from the
  request to the prompt's answer once it is allowed): the session's
  second prompt, seconds after the session opened (the router's new spare,
  a Node start, has finished by then).
Medians of the rounds, with the ranges.
"""
import os, statistics, sys, tempfile, time
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, ".."))
sys.path.insert(0, here)
from acpclient import Agent
from turn import ms, prompt_times

acpbridge = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
agent = ["node", os.path.join(here, "..", "..", "examples", "editor-test", "agent.mjs")]
cwd = tempfile.mkdtemp()

def run(cmd):
    a = Agent(cmd)
    a.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    time.sleep(2)  # the agent (or the router's spare) has started and answered its initialize
    start = time.perf_counter()
    sid = a.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    new = ms(start)
    time.sleep(2)  # the router's next spare (a Node start) has finished
    prompt_times(a, sid, "hi")  # a session's first prompt
    first, perm = prompt_times(a, sid, "hi")
    a.close()
    return new, first, perm

fmt = lambda v: f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})"
direct = [run(agent) for _ in range(rounds)]
routed = [run([acpbridge, "--fanout", "--spares", "1", "--"] + agent) for _ in range(rounds)]
for i, what in enumerate(["session/new (fresh process / spare)", "first update of a prompt", "permission round trip"]):
    d, r = [x[i] for x in direct], [x[i] for x in routed]
    print(f"  {what}: direct {fmt(d)} ms, through the router {fmt(r)} ms: {statistics.median(r) / statistics.median(d):.2f}×")
