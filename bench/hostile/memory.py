#!/usr/bin/env python3
"""Peak memory under hostile input, for the binaries named (before/after).

  memory.py ACPBRIDGE [ACPBRIDGE ...]

Cases, each in a fresh process, its peak RSS read from /proc/PID/status
(VmHWM) when the prompt is answered or after 8 s, whichever comes first:

  args    a model endpoint (a fake OpenAI-compatible server on 127.0.0.1)
          that streams one tool call's argument deltas and never stops
  text    the same with answer text
  line    one event-stream line that never ends
  fanout  --fanout: thread B streams 200,000 chunks while thread A sends a
          30 MB prompt; the router's peak RSS and B's longest pause between
          two lines
"""
import http.server, json, os, socketserver, sys, tempfile, threading, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acpclient import Agent

KB = "x" * 1024

class Endless(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        kind = self.server.kind
        if kind == "args":
            first = {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "read_file", "arguments": ""}}]}}]}
            ev = {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": KB}}]}}]}
            head, body = "data: " + json.dumps(first) + "\n\n", ("data: " + json.dumps(ev) + "\n\n") * 64
        elif kind == "text":
            ev = {"choices": [{"delta": {"content": KB}}]}
            head, body = "", ("data: " + json.dumps(ev) + "\n\n") * 64
        else:
            head, body = "data: {\"choices\":[{\"delta\":{\"content\":\"", KB * 64
        t0 = time.time()
        try:
            self.chunk(head)
            while time.time() - t0 < 10:
                self.chunk(body)
        except OSError:
            pass
    def chunk(self, s):
        b = s.encode()
        if b:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

def hwm(pid):
    try:
        return next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM")) / 1024
    except (OSError, StopIteration):
        return 0.0

def start(binary, args, env=None):
    """acpbridge with args in a state directory of its own, with a session
    open in a fresh directory: the agent and the session's id."""
    work = tempfile.mkdtemp()
    a = Agent([binary, "--state-dir", os.path.join(work, "state"), *args], env)
    a.call("initialize", {"protocolVersion": 1})
    return a, work

def open_session(a, work):
    return a.call("session/new", {"cwd": work, "mcpServers": []})["result"]["sessionId"]

def model_case(binary, kind):
    srv = Server(("127.0.0.1", 0), Endless); srv.kind = kind
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    env = dict(os.environ, OPENAI_API_KEY="sk-bench")
    a, work = start(binary, ["--model", "openai:m", "--base-url", f"http://127.0.0.1:{srv.server_address[1]}/v1"], env)
    sid = open_session(a, work)
    done, peak, t0 = threading.Event(), 0.0, time.time()
    answer = {}
    def prompt():
        answer["m"] = a.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}); done.set()
    threading.Thread(target=prompt, daemon=True).start()
    while not done.wait(0.05) and time.time() - t0 < 8:
        peak = max(peak, hwm(a.pid))
    peak = max(peak, hwm(a.pid))
    how = "answered" if done.is_set() else "still reading after 8 s"
    if done.is_set() and answer.get("m") and "error" in answer["m"]:
        how = "ended with an error" + (" naming the 16 MiB cap" if "16 MiB" in answer["m"]["error"]["message"] else "")
    a.p.kill(); a.p.wait(); srv.shutdown()
    return f"{peak:.0f} MiB ({how})"

def fanout_case(binary):
    work = tempfile.mkdtemp()
    fixture = os.path.join(work, "m.jsonl")
    with open(fixture, "w") as f:
        f.write(json.dumps({"chunks": [{"text": "y" * 64}] * 200000}) + "\n")
    a, _ = start(binary, ["--fanout", "--model", "replay:" + fixture])
    sids = [open_session(a, work), open_session(a, work)]
    # Encoded before B streams: encoding 30 MB would stall this client's
    # reading of B's stream (one interpreter lock), not the router.
    big = (json.dumps({"jsonrpc": "2.0", "id": 1004, "method": "session/prompt", "params": {"sessionId": sids[0], "prompt": [{"type": "text", "text": "z" * 30_000_000}]}}) + "\n").encode()
    a.send({"jsonrpc": "2.0", "id": 1003, "method": "session/prompt", "params": {"sessionId": sids[1], "prompt": [{"type": "text", "text": "stream"}]}})
    def writer():
        time.sleep(0.3)  # B is streaming by then
        a.p.stdin.write(big); a.p.stdin.flush()
    threading.Thread(target=writer, daemon=True).start()
    gaps, last, n, peak = [], None, 0, 0.0
    def timed(m):  # every line of B's stream, timed, until its answer
        nonlocal last, n, peak
        now = time.perf_counter()
        if last is not None:
            gaps.append(now - last)
        last, n = now, n + 1
        if n % 2000 == 0:
            peak = max(peak, hwm(a.pid))
        return m.get("id") == 1003 and "method" not in m
    a.until(timed)
    peak = max(peak, hwm(a.pid))
    a.close()
    return f"router peak {peak:.0f} MiB, B's longest pause {max(gaps) * 1000:.0f} ms"

print("| binary | endless tool-call arguments | endless text | one endless line | --fanout: 30 MB prompt beside a stream |")
print("|---|---|---|---|---|")
for b in sys.argv[1:]:
    print(f"| {os.path.basename(b)} | {model_case(b, 'args')} | {model_case(b, 'text')} | {model_case(b, 'line')} | {fanout_case(b)} |", flush=True)
