#!/usr/bin/env python3
"""A stdio MCP server flooding notifications/tools/list_changed, against the
binaries named (before/after).

  mcp_flood.py ACPBRIDGE [ACPBRIDGE ...]    # N=100000 by default (FLOOD=N)

For each binary: a session whose MCP server (this script with --serve)
answers the handshake and tools/list, then writes N notifications as fast as
it can; after 6 s the binary's peak RSS (VmHWM) is read and its stdin closed,
and the time to its exit is taken.
"""
import json, os, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acpclient import Agent

N = int(os.environ.get("FLOOD", "100000"))

def serve():
    def send(m):
        sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
    flooded = False
    for line in sys.stdin:
        m = json.loads(line)
        meth = m.get("method")
        if meth == "initialize":
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": m["params"]["protocolVersion"],
                  "capabilities": {"tools": {"listChanged": True}}, "serverInfo": {"name": "flood", "version": "1"}}})
        elif meth == "tools/list":
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}})
            if not flooded:
                flooded = True
                sys.stdout.write((json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}) + "\n") * N)
                sys.stdout.flush()
        elif "id" in m and meth:
            send({"jsonrpc": "2.0", "id": m["id"], "result": {}})

def measure(binary):
    work = tempfile.mkdtemp()
    a = Agent([binary, "--state-dir", work + "/s"])
    a.call("initialize", {"protocolVersion": 1})
    server = {"name": "flood", "command": sys.executable, "args": [os.path.abspath(__file__), "--serve"], "env": [{"name": "FLOOD", "value": str(N)}]}
    a.call("session/new", {"cwd": work, "mcpServers": [server]})
    time.sleep(6)
    peak = int([l for l in open(f"/proc/{a.pid}/status") if l.startswith("VmHWM")][0].split()[1]) / 1024
    t0 = time.perf_counter()
    status = a.close(timeout=None)
    print(f"| {os.path.basename(binary)} | {N:,} | {peak:.0f} MiB | {(time.perf_counter() - t0) * 1000:.0f} ms, status {status} |", flush=True)

if len(sys.argv) > 1 and sys.argv[1] == "--serve":
    serve()
else:
    print("| binary | notifications | peak RSS | stdin's EOF to exit |")
    print("|---|---|---|---|")
    for b in sys.argv[1:]:
        measure(b)
