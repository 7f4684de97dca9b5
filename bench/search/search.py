#!/usr/bin/env python3
"""search_text against ripgrep on one tree, in one run (bench.sh runs it).

Builds the tree of the explore benchmark (1,000 directories of 100 files, a
.gitignore that skips a tenth of them, one matching line in the last file),
then times, interleaved over ROUNDS rounds: acpbridge's search_text (the
built binary, through ACP: from the prompt to the tool call's completed
update, the replay model asking for the search), `rg -n needle DIR`, and on
one core (taskset to CPU 0, GOMAXPROCS=1) acpbridge against `rg -j1`.
Prints a Markdown table of medians (min-max) and the ratios.

  search.py ACPBRIDGE [ROUNDS]
"""
import json, os, shutil, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acpclient import Agent

binary = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
rg = shutil.which("rg")
work = tempfile.mkdtemp()
tree = os.path.join(work, "tree")
os.makedirs(tree)
open(os.path.join(tree, ".gitignore"), "w").write("*.skip\n")
line = "lorem ipsum dolor sit amet " * 6 + "\n"
for d in range(1000):
    sub = os.path.join(tree, "d%04d" % d)
    os.makedirs(sub)
    for f in range(100):
        name = "f%03d.skip" % f if f % 10 == 0 else "f%03d.txt" % f
        content = line + line + ("the needle\n" if d == 999 and f == 99 else "")
        open(os.path.join(sub, name), "w").write(content)

fixture = os.path.join(work, "search.jsonl")
with open(fixture, "w") as fx:
    for _ in range(rounds * 4 + 4):
        fx.write(json.dumps({"chunks": [{"toolCall": {"id": "s", "name": "search_text", "input": {"pattern": "needle"}}}]}) + "\n")
        fx.write(json.dumps({"chunks": [{"text": "ok"}]}) + "\n")

def agent_search(one_core):
    env = dict(os.environ)
    cmd = [binary, "--model", "replay:" + fixture, "--state-dir", os.path.join(work, "state")]
    if one_core:
        env["GOMAXPROCS"] = "1"
        cmd = ["taskset", "-c", "0"] + cmd
    a = Agent(cmd, env)
    a.call("initialize", {"protocolVersion": 1})
    sid = a.call("session/new", {"cwd": tree, "mcpServers": []})["result"]["sessionId"]
    t0 = time.perf_counter()
    a.send({"jsonrpc": "2.0", "id": 100, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "find it"}]}})
    done = a.until(lambda l: l.get("params", {}).get("update", {}).get("status") in ("completed", "failed"))
    ms = (time.perf_counter() - t0) * 1000
    assert "d0999/f099.txt:3:the needle" in json.dumps(done), done
    a.until(lambda l: l.get("id") == 100)
    a.close()
    return ms

def rg_search(one_core):
    cmd = [rg, "-n", "needle", tree]
    if one_core:
        cmd = ["taskset", "-c", "0", rg, "-j1", "-n", "needle", tree]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    ms = (time.perf_counter() - t0) * 1000
    assert "the needle" in out, out
    return ms

results = {k: [] for k in ("acpbridge", "rg", "acpbridge 1 core", "rg -j1")}
for _ in range(rounds):
    results["acpbridge"].append(agent_search(False))
    results["acpbridge 1 core"].append(agent_search(True))
    if rg:
        results["rg"].append(rg_search(False))
        results["rg -j1"].append(rg_search(True))
shutil.rmtree(work)

def cell(v):
    return "%.0f (%.0f–%.0f)" % (statistics.median(v), min(v), max(v)) if v else "—"
print("| search of 100,000 files (90,000 not ignored), one match | ms |")
print("|---|---|")
for k, v in results.items():
    print("| %s | %s |" % (k, cell(v)))
if not rg:
    print("\nripgrep (`rg`) was not found: install the distribution's `ripgrep` package for the comparison.")
else:
    m = {k: statistics.median(v) for k, v in results.items()}
    print("\nacpbridge ÷ rg: %.2f× (target ≤ 1.5×); on one core, acpbridge ÷ rg -j1: %.2f× (target ≤ 1.2×)" % (m["acpbridge"] / m["rg"], m["acpbridge 1 core"] / m["rg -j1"]))
