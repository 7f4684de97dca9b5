#!/usr/bin/env python3
"""Another agent behind the router (`acpbridge --fanout -- CMD`) against
the same agent run directly, with testdata/oneagent (go build -o ONEAGENT
./testdata/oneagent):

  agent.py ACPBRIDGE ONEAGENT [ROUNDS]      # default 5 rounds

- session/new of an agent that takes 300 ms to start (-start-delay 300ms):
  through the router with a spare waiting, against the agent's own warm
  session/new (one process: new, close, new);
- a prompt's first streamed update, and a permission round trip (from the
  request to the prompt's answer once it is allowed), through the router
  and direct (the session's second prompt, half a second after it opened).
Medians of the rounds, with the ranges.
"""
import os, statistics, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acpclient import Agent
from turn import ms, prompt_times

acpbridge, one = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
cwd = tempfile.mkdtemp()
env = dict(os.environ, ONEAGENT_STATE=tempfile.mkdtemp())

def new(a):
    start = time.perf_counter()
    sid = a.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    return sid, ms(start)

def run(cmd, slow):
    a = Agent(cmd, env=env)
    a.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    if slow:
        time.sleep(0.8)  # the router's spare has started and answered its initialize
    sid, first_new = new(a)
    if not slow:
        a.call("session/close", {"sessionId": sid})
        sid, first_new = new(a)  # warm: the process's second session
    time.sleep(0.5)  # the router refills its spare after an opening: a prompt seconds later does not share the CPU with that start
    prompt_times(a, sid, "please ask")  # a session's first prompt
    first, perm = prompt_times(a, sid, "please ask")
    a.close()
    return first_new, first, perm

fmt = lambda v: f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})"
direct = [run([one, "-start-delay", "300ms"], False) for _ in range(rounds)]
routed = [run([acpbridge, "--fanout", "--spares", "1", "--", one, "-start-delay", "300ms"], True) for _ in range(rounds)]
for i, what in enumerate(["session/new", "first update of a prompt", "permission round trip"]):
    d, r = [x[i] for x in direct], [x[i] for x in routed]
    print(f"  {what}: direct {fmt(d)} ms, through the router {fmt(r)} ms: {statistics.median(r) / statistics.median(d):.2f}×")
