#!/usr/bin/env python3
"""router.py ACPBRIDGE AGENT [--measure]: one of the pinned agents (codex,
claude, gemini) behind `acpbridge --fanout`, driven as Zed drives it,
offline against the served model (`acpbridge scenario model`):

  three threads opened in one write, each its own process (which one the
  router says: its thread_held event), prompted at once
  (a file written and a command run, permissions and fs/* answered as an
  editor answers them); a turn cancelled, and its thread loaded at once;
  the threads left idle past
  --idle-timeout, their processes evicted, and one prompted again (reopened
  by the agent's session/resume or session/load); every agent process
  killed with SIGKILL and a thread prompted again (it comes back); an
  evicted thread loaded (every turn replayed, the cancelled one included);
  a thread closed; stdin's end, after which nothing of the router is left
  running; a new router, in which a thread of the last one is loaded and
  prompted.

Exits 1 on the first step that does not hold, saying which. With --measure
it opens 10 threads instead and prints the figures the docs give: the
tree's summed PSS with every thread live and after eviction, and the agent
alone serving 10 sessions itself; a reopened thread's first update against
a live one's; the time from stdin's end to nothing running.

Run it from examples/peers after `npm ci`; .ci/run runs it for each agent.
"""
import json, os, queue, signal, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = "\n".join(json.dumps(e) for e in [
    {"expect": "Write greet.sh", "chunks": [{"text": "Writing it."}, {"toolCall": {"id": "w1", "name": "write_file", "input": {"path": "greet.sh", "content": "echo hello\n"}}}]},
    {"chunks": [{"toolCall": {"id": "r1", "name": "run_command", "input": {"command": "sh greet.sh"}}}]},
    {"chunks": [{"text": "It printed hello."}]},
    # The prompts below, in the order they are sent: threads whose messages
    # are alike may be told apart only by them.
    {"expect": "live check", "chunks": [{"text": "Live."}]},
    {"expect": "wait for it", "chunks": [{"text": "Waiting."}, {"delayMs": 120000}, {"text": "Too late."}]},
    {"expect": "after eviction", "chunks": [{"text": "Back."}]},
    {"expect": "after a crash", "chunks": [{"text": "Up again."}]},
    {"expect": "after a new router", "chunks": [{"text": "Still here."}]},
]) + "\n"


EDITOR = []  # the router being driven, for its log at a failure
MODEL_LOG = []  # the served model's log file, for a failure


def fail(why):
    print(f"FAIL: {why}", file=sys.stderr)
    if EDITOR:
        lines = []
        while not EDITOR[0].stderr.empty():
            lines.append(EDITOR[0].stderr.get())
        print("the router's log ends:\n" + "".join(lines[-40:]), file=sys.stderr)
        try:
            os.killpg(EDITOR[0].p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it had ended
    if MODEL_LOG:
        print("the served model's log ends:\n" + "".join(open(MODEL_LOG[0]).readlines()[-25:]), file=sys.stderr)
    os._exit(1)


class Editor:
    """A client on the router's stdin and stdout: requests by id, the
    agent's requests answered as an editor answers them, updates kept by
    session."""

    def __init__(self, cmd, env, cwd):
        self.cwd = cwd
        # The router's events (ACPBRIDGE_EVENTS): one JSON object a line,
        # names and attributes stable, unlike its log's wording.
        self.events_path = os.path.join(os.path.dirname(cwd), "events.jsonl")
        env = dict(env, ACPBRIDGE_EVENTS=self.events_path)
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
        self.n, self.lock = 0, threading.Lock()
        self.waiting, self.updates = {}, {}
        self.stderr, self.log = queue.Queue(), []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_log, daemon=True).start()

    def _read_log(self):
        with open(os.path.join(os.path.dirname(self.cwd), "router.log"), "w") as f:
            for line in self.p.stderr:
                line = line.decode(errors="replace")
                f.write(line)
                f.flush()
                self.log.append(line)
                self.stderr.put(line)

    def _write(self, *msgs):
        with self.lock:
            self.p.stdin.write("".join(json.dumps(m) + "\n" for m in msgs).encode())
            self.p.stdin.flush()

    def _read(self):
        for line in self.p.stdout:
            m = json.loads(line)
            if "method" in m and "id" in m:
                self._write({"jsonrpc": "2.0", "id": m["id"], **self._answer(m["method"], m.get("params", {}))})
            elif m.get("method") == "session/update":
                sid = m["params"].get("sessionId")
                self.updates.setdefault(sid, queue.Queue()).put(m["params"]["update"])
            elif "method" in m:
                pass  # a notification it does not know (_auth/status_update, ...): ignored, as ACP asks of a client
            elif m.get("id") in self.waiting:
                self.waiting.pop(m["id"]).put(m)
        for q in list(self.waiting.values()):
            q.put({"error": {"message": "the router's output ended"}})

    def _answer(self, method, params):
        if method == "session/request_permission":
            kinds = {o["kind"]: o["optionId"] for o in params["options"]}
            return {"result": {"outcome": {"outcome": "selected", "optionId": kinds.get("allow_once") or kinds.get("allow_always")}}}
        if method == "fs/read_text_file":
            try:
                return {"result": {"content": open(params["path"]).read()}}
            except FileNotFoundError:
                return {"result": {"content": ""}}  # a new buffer, as an editor opens one
        if method == "fs/write_text_file":
            with open(params["path"], "w") as f:
                f.write(params["content"])
            return {"result": {}}
        return {"error": {"code": -32601, "message": "method not found"}}

    def request(self, method, params):
        """Sends a request; returns a queue its response arrives on."""
        self.n += 1
        q = self.waiting[self.n] = queue.Queue()
        self._write({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        return q

    def call(self, method, params, timeout=120):
        try:
            return self.request(method, params).get(timeout=timeout)
        except queue.Empty:
            fail(f"{method} had no answer in {timeout} s")

    def calls(self, method, params_list, timeout=120):
        """Sends the requests in ONE write, as a busy editor does."""
        qs, msgs = [], []
        for params in params_list:
            self.n += 1
            qs.append(self.waiting.setdefault(self.n, queue.Queue()))
            msgs.append({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        self._write(*msgs)
        return [q.get(timeout=timeout) for q in qs]

    def notify(self, method, params):
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def prompt(self, sid, text):
        q = self.updates.setdefault(sid, queue.Queue())
        while not q.empty():  # first_update waits for this turn's, not an earlier one's
            q.get()
        return self.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})

    def first_update(self, sid, kind="agent_message_chunk", timeout=120):
        q = self.updates.setdefault(sid, queue.Queue())
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if q.get(timeout=end - time.monotonic()).get("sessionUpdate") == kind:
                    return
            except queue.Empty:
                break
        fail(f"no {kind} for {sid} in {timeout} s")

    def events(self, name, **attrs):
        """The router's events of that name (and those attributes) so far."""
        try:
            lines = open(self.events_path).read().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line still being written
            if e.get("event") == name and all(e.get(k) == v for k, v in attrs.items()):
                out.append(e)
        return out

    def event_until(self, name, count=1, timeout=120, **attrs):
        end = time.monotonic() + timeout
        while len(self.events(name, **attrs)) < count:
            if time.monotonic() > end:
                fail(f"the router did not say {name} {attrs} {count} times in {timeout} s")
            time.sleep(0.02)

    def replayed(self, sid):
        """The user's words replayed in sid since the last prompt
        (user_message_chunk updates), joined."""
        q = self.updates.get(sid)
        words = ""
        while q is not None and not q.empty():
            u = q.get()
            if u.get("sessionUpdate") == "user_message_chunk" and u.get("content", {}).get("type") == "text":
                words += u["content"]["text"]
        return words

    def holder(self, sid, timeout=10):
        """The process that holds thread sid now, as the router last said
        (thread_held); it must be one of the router's running children.
        The router writes the event as the process takes the thread, which
        may be just after the answer that the client has read."""
        end = time.monotonic() + timeout
        while True:
            held = self.events("thread_held", session=sid)
            running = children(self.p.pid)
            if held and held[-1]["pid"] in running:
                return held[-1]["pid"]
            if time.monotonic() > end:
                if not held:
                    fail(f"the router never said which process holds {sid} (thread_held)")
                fail(f"thread_held names process {held[-1]['pid']} for {sid}, which is not one of the router's running agent processes {running}")
            time.sleep(0.05)


def children(pid):
    """The processes pid started, less acpbridge's keeper (which ends the
    agents should the router be killed)."""
    out = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(pid)], capture_output=True, text=True).stdout.splitlines()
    return [int(l.split()[0]) for l in out if l.strip() and "__acpbridge_keeper" not in l]


def tree(pid):
    pids = [pid]
    for c in children(pid):
        pids += tree(c)
    return pids


def pss(pids):
    total = 0
    for p in pids:
        try:
            for line in open(f"/proc/{p}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def env_for(model_url, home):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACPBRIDGE_")}
    base = model_url.removesuffix("/v1")
    env.update(HOME=home, MODEL_URL=model_url, OPENAI_BASE_URL=model_url, OPENAI_API_KEY="sk-offline",
               ANTHROPIC_BASE_URL=base, ANTHROPIC_API_KEY="sk-offline", GOOGLE_GEMINI_BASE_URL=base, GEMINI_API_KEY="sk-offline")
    return env


def serve_model(binary, fixture, prefix):
    """A workspace in a new temporary directory (its cwd, a private HOME)
    and `acpbridge scenario model` serving the fixture's text there, its log
    kept for a failure: (cwd, the agents' environment, the model's process)."""
    work = tempfile.mkdtemp(prefix=prefix)
    cwd, home = os.path.join(work, "cwd"), os.path.join(work, "home")
    os.makedirs(cwd), os.makedirs(home)
    path = os.path.join(work, "model.jsonl")
    open(path, "w").write(fixture)
    MODEL_LOG.append(os.path.join(work, "model.log"))
    model = subprocess.Popen([binary, "scenario", "model", "--cwd", cwd, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(MODEL_LOG[-1], "w"))
    return cwd, env_for(model.stdout.readline().decode().strip(), home), model


def quit(ed):
    """Quits as an editor does: stdin closed, then the agent's process
    group ended (codex-acp and claude-agent-acp do not exit at stdin's end,
    codex not while a cancelled turn's model call is open)."""
    ed.p.stdin.close()
    try:
        ed.p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(ed.p.pid, signal.SIGTERM)
        try:
            ed.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(ed.p.pid, signal.SIGKILL)
            ed.p.wait()


def wait(q, timeout, what):
    try:
        return q.get(timeout=timeout)
    except queue.Empty:
        fail(f"{what}: no answer in {timeout} s")


def ok(sid, resp, what):
    if "result" not in resp or resp["result"].get("stopReason") != "end_turn":
        fail(f"{what} on {sid}: {json.dumps(resp)[:400]}")


def main():
    binary, agent = sys.argv[1], sys.argv[2]
    measure = "--measure" in sys.argv
    cwd, env, model = serve_model(binary, FIXTURE, "acpbridge-peers-")
    threads = 10 if measure else 3
    cmd = [binary, "--fanout", "--spares", "1", "--idle-timeout", "3s", "--log-level", "debug"] + (["--trace", os.environ["TRACE"]] if os.environ.get("TRACE") else []) + ["--", os.path.join(HERE, "agent.sh"), agent]
    ed = Editor(cmd, env, cwd)
    EDITOR.append(ed)
    init = ed.call("initialize", {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}})
    if "result" not in init:
        fail(f"initialize: {init}")
    opened = ed.calls("session/new", [{"cwd": cwd, "mcpServers": []}] * threads)
    sids = [r.get("result", {}).get("sessionId") for r in opened]
    if not all(sids):
        fail(f"session/new: {opened}")
    if len(children(ed.p.pid)) < threads:
        fail(f"{threads} threads, {len(children(ed.p.pid))} agent processes")
    # Which process is which thread, said by the router for every thread.
    held = [ed.holder(s) for s in sids]
    if len(set(held)) != threads:
        fail(f"thread_held names {held} for {threads} threads: not a process each")
    qs = [ed.prompt(s, "Write greet.sh and run it.") for s in sids]
    for s, q in zip(sids, qs):
        ok(s, wait(q, 180, "the first prompt"), "the first prompt")
    if open(os.path.join(cwd, "greet.sh")).read() != "echo hello\n":
        fail("greet.sh is not what the model wrote")
    print(f"{agent}: {threads} threads at once, a process each (the router names each one's), a file written and a command run in each")
    live_pss = pss(tree(ed.p.pid))

    # A live thread's first update, then the same after its eviction.
    start = time.monotonic()
    q = ed.prompt(sids[1], "live check")
    ed.first_update(sids[1])
    live = time.monotonic() - start
    ok(sids[1], wait(q, 120, "a live prompt"), "a prompt on a live thread")

    q = ed.prompt(sids[0], "wait for it")
    ed.first_update(sids[0])
    ed.notify("session/cancel", {"sessionId": sids[0]})
    r = wait(q, 60, "a cancelled turn")
    if r.get("result", {}).get("stopReason") != "cancelled":
        fail(f"a cancelled turn answered {json.dumps(r)[:300]}")
    print(f"{agent}: a turn cancelled")

    kept = [e["why"] for e in ed.events("eviction_off")]
    # The thread loaded right after its turn (the router's check of the
    # agent's list may still be out): answered as the agent alone answers,
    # its history replayed; gemini-cli cannot load a session at all.
    r = ed.call("session/load", {"sessionId": sids[0], "cwd": cwd, "mcpServers": []})
    if kept and "error" not in r or not kept and "result" not in r:
        fail(f"session/load of a thread right after its turn: {json.dumps(r)[:300]}")
    print(f"{agent}: a thread loaded right after its turn: {'refused by the agent' if kept else 'loaded'}")
    if kept:
        # An agent the router knows cannot reopen a session in a new
        # process: its threads stay (an evicted one could not come back).
        evicted_pss, reopened = None, None
        print(f"{agent}: threads are not evicted ({kept[0]})")
    else:
        ed.event_until("evicting", threads)
        while len(children(ed.p.pid)) > 1:  # the evicted processes end; the spare stays
            time.sleep(0.05)
        evicted_pss = pss(tree(ed.p.pid))
        start = time.monotonic()
        q = ed.prompt(sids[1], "after eviction")
        ed.first_update(sids[1])
        reopened = time.monotonic() - start
        ok(sids[1], wait(q, 120, "a prompt on an evicted thread"), "a prompt on an evicted thread")
        if ed.holder(sids[1]) == held[1]:
            fail(f"thread_held still names the evicted process {held[1]} for the reopened {sids[1]}")
        print(f"{agent}: every thread evicted when idle, one reopened and prompted; the router named its new process")
        # An evicted thread loaded by the client: its whole history
        # replayed, the cancelled turn's words included.
        r = ed.call("session/load", {"sessionId": sids[0], "cwd": cwd, "mcpServers": []})
        if "result" not in r:
            fail(f"session/load of an evicted thread: {json.dumps(r)[:300]}")
        words = ed.replayed(sids[0])
        if "Write greet.sh" not in words or "wait for it" not in words:
            fail(f"session/load of an evicted thread replayed {words!r}: not every turn, the cancelled one included")
        ed.holder(sids[0])
        print(f"{agent}: an evicted thread loaded: every turn replayed, the cancelled one included")

    killed = children(ed.p.pid)
    for p in killed:
        os.kill(p, signal.SIGKILL)
    # The router has seen every thread's process die: all of them when
    # threads are kept, else the one reopened.
    ed.event_until("child_ended", threads if kept else 1)
    r = wait(ed.prompt(sids[2], "after a crash"), 120, "a prompt after a kill")
    if kept and "error" in r:
        # The agent cannot reopen it: the router says so at once, and why.
        if "cannot come back" not in r["error"]["message"]:
            fail(f"a prompt on a thread that cannot come back: {json.dumps(r)[:300]}")
        print(f"{agent}: a thread whose process was killed cannot come back; the user is told why: {r['error']['message'][:160]}…")
    else:
        ok(sids[2], r, "a prompt after its process was killed")
        if ed.holder(sids[2]) in killed:
            fail(f"thread_held still names a killed process for the reopened {sids[2]}")
        print(f"{agent}: a thread whose process was killed comes back, in the process the router names")

    r = ed.call("session/close", {"sessionId": sids[2]})
    if "result" not in r:
        fail(f"session/close: {r}")
    everything = tree(ed.p.pid)
    start = time.monotonic()
    ed.p.stdin.close()
    code = ed.p.wait(timeout=60)
    while any(os.path.exists(f"/proc/{p}") and open(f"/proc/{p}/stat").read().split()[2] != "Z" for p in everything):
        time.sleep(0.01)
    gone = time.monotonic() - start
    if code != 0:
        fail(f"the router exited {code} at stdin's end")
    print(f"{agent}: a thread closed; at stdin's end the router exited 0 and nothing is left running")
    if not kept:
        # A new router, as after the editor's restart: a thread of the
        # last one loaded (its history replayed) and prompted.
        ed = Editor(cmd, env, cwd)
        EDITOR[0] = ed
        ed.call("initialize", {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}})
        r = ed.call("session/load", {"sessionId": sids[1], "cwd": cwd, "mcpServers": []})
        if "result" not in r or "live check" not in ed.replayed(sids[1]):
            fail(f"session/load in a new router: {json.dumps(r)[:300]}")
        ok(sids[1], wait(ed.prompt(sids[1], "after a new router"), 120, "a prompt after a new router"), "a prompt after a new router")
        ed.p.stdin.close()
        if ed.p.wait(timeout=60) != 0:
            fail("the second router did not exit 0 at stdin's end")
        print(f"{agent}: a thread loaded in a new router, its history replayed, and prompted")
    if measure:
        alone = measure_alone(binary, agent, env, cwd, threads)
        mib = lambda b: f"{b / 2**20:.0f} MiB"
        evicted = mib(evicted_pss) if evicted_pss else "not evicted"
        reopen = f"{reopened * 1000:.0f} ms" if reopened else "–"
        print(f"| {agent} | {mib(alone)} | {mib(live_pss)} | {evicted} | {live * 1000:.0f} ms | {reopen} | {gone * 1000:.0f} ms |")
    model.stdin.close()
    model.wait()


def measure_alone(binary, agent, env, cwd, threads):
    """The agent alone serving every thread's session itself, each prompted
    once: its tree's summed PSS."""
    ed = Editor([os.path.join(HERE, "agent.sh"), agent], env, cwd)
    ed.call("initialize", {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}})
    sids = [ed.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"] for _ in range(threads)]
    for s, q in [(s, ed.prompt(s, "Write greet.sh and run it.")) for s in sids]:
        ok(s, wait(q, 180, "the agent alone"), "the agent alone")
    total = pss(tree(ed.p.pid))
    os.killpg(ed.p.pid, signal.SIGKILL)
    return total


if __name__ == "__main__":
    main()
