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
import http.server, json, os, socketserver, subprocess, sys, tempfile, threading, time

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
    work = tempfile.mkdtemp()
    p = subprocess.Popen([binary, "--state-dir", os.path.join(work, "state"), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    return p, work

def send(p, m):
    p.stdin.write((json.dumps(m) + "\n").encode()); p.stdin.flush()

def until(p, pred):
    while True:
        line = p.stdout.readline()
        if not line:
            return None
        try:
            m = json.loads(line)
        except ValueError:
            return None  # the process was killed mid-line
        if pred(m):
            return m

def model_case(binary, kind):
    srv = Server(("127.0.0.1", 0), Endless); srv.kind = kind
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    env = dict(os.environ, OPENAI_API_KEY="sk-bench")
    p, work = start(binary, ["--model", "openai:m", "--base-url", f"http://127.0.0.1:{srv.server_address[1]}/v1"], env)
    send(p, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    until(p, lambda m: m.get("id") == 0)
    send(p, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": work, "mcpServers": []}})
    sid = until(p, lambda m: m.get("id") == 1)["result"]["sessionId"]
    send(p, {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}})
    done, peak, t0 = threading.Event(), 0.0, time.time()
    answer = {}
    def read():
        answer["m"] = until(p, lambda m: m.get("id") == 2 and "method" not in m); done.set()
    threading.Thread(target=read, daemon=True).start()
    while not done.wait(0.05) and time.time() - t0 < 8:
        peak = max(peak, hwm(p.pid))
    peak = max(peak, hwm(p.pid))
    how = "answered" if done.is_set() else "still reading after 8 s"
    if done.is_set() and answer.get("m") and "error" in answer["m"]:
        how = "ended with an error" + (" naming the 16 MiB cap" if "16 MiB" in answer["m"]["error"]["message"] else "")
    p.kill(); p.wait(); srv.shutdown()
    return f"{peak:.0f} MiB ({how})"

def fanout_case(binary):
    work = tempfile.mkdtemp()
    fixture = os.path.join(work, "m.jsonl")
    with open(fixture, "w") as f:
        f.write(json.dumps({"chunks": [{"text": "y" * 64}] * 200000}) + "\n")
    p, _ = start(binary, ["--fanout", "--model", "replay:" + fixture])
    send(p, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    until(p, lambda m: m.get("id") == 0)
    sids = []
    for i in (1, 2):
        send(p, {"jsonrpc": "2.0", "id": i, "method": "session/new", "params": {"cwd": work, "mcpServers": []}})
        sids.append(until(p, lambda m: m.get("id") == i)["result"]["sessionId"])
    big = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": {"sessionId": sids[0], "prompt": [{"type": "text", "text": "z" * 30_000_000}]}}) + "\n"
    send(p, {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": sids[1], "prompt": [{"type": "text", "text": "stream"}]}})
    gaps, last, n = [], None, 0
    def writer():
        time.sleep(0.3)  # B is streaming by then
        p.stdin.write(big.encode()); p.stdin.flush()
    threading.Thread(target=writer, daemon=True).start()
    peak = 0.0
    while True:
        line = p.stdout.readline()
        now = time.perf_counter()
        if last is not None:
            gaps.append(now - last)
        last = now
        n += 1
        if n % 2000 == 0:
            peak = max(peak, hwm(p.pid))
        m = json.loads(line)
        if m.get("id") == 3 and "method" not in m:
            break
    peak = max(peak, hwm(p.pid))
    p.stdin.close(); p.wait(timeout=10)
    return f"router peak {peak:.0f} MiB, B's longest pause {max(gaps) * 1000:.0f} ms"

print("| binary | endless tool-call arguments | endless text | one endless line | --fanout: 30 MB prompt beside a stream |")
print("|---|---|---|---|---|")
for b in sys.argv[1:]:
    print(f"| {os.path.basename(b)} | {model_case(b, 'args')} | {model_case(b, 'text')} | {model_case(b, 'line')} | {fanout_case(b)} |", flush=True)
