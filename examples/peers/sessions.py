#!/usr/bin/env python3
"""sessions.py ACPBRIDGE AGENT: the session-capability steps of the ACP
TCK's v1 suite (acp-tck, test_session_capabilities.py: LOAD-001..003,
RESUME-001/002, LIST-001/002, CLOSE-001, DELETE-001/002), run on one of
the pinned agents (codex, claude, gemini) alone and behind
`acpbridge --fanout`, offline against the served model. These are the
steps where the router stands between the editor and the agent's own
answer; the router must pass every step the agent alone passes.

Each step runs as the kit runs it, on a session of its own (one
connection per mode, where the kit opens one per step). A step the agent
does not advertise is skipped in both modes. Prints a line per step and
mode; exits 1 when the router fails a step the agent alone passes.

Run it from examples/peers after `npm ci`; .ci/run runs it for each agent.
"""
import json, os, sys, tempfile, time

import router
from router import Editor, quit, serve_model, wait

CAPS = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}}
QUIET = 1.0  # the kit's quiet period after a load, in seconds


def updates_of(ed, sid):
    """The updates for sid since the last call, drained."""
    q, got = ed.updates.get(sid), []
    while q is not None and not q.empty():
        got.append(q.get())
    return got


class Steps:
    """The kit's steps on one connection (ed), each on a session of its
    own; each returns None when it passes, else why not."""

    def __init__(self, ed, cwd, caps):
        self.ed, self.cwd, self.caps = ed, cwd, caps

    def new(self):
        r = self.ed.call("session/new", {"cwd": self.cwd, "mcpServers": []})
        if "result" not in r:
            raise RuntimeError(f"session/new: {json.dumps(r)[:200]}")
        return r["result"]["sessionId"]

    def prompted(self):
        sid = self.new()
        r = wait(self.ed.prompt(sid, "hello"), 120, "a prompt")
        if "result" not in r:
            raise RuntimeError(f"session/prompt: {json.dumps(r)[:200]}")
        return sid

    def load(self, sid):
        return self.ed.call("session/load", {"sessionId": sid, "cwd": self.cwd, "mcpServers": []})

    def load_001(self):
        r = self.load(self.prompted())
        return None if "result" in r else f"session/load after a prompt: {json.dumps(r)[:200]}"

    def load_002(self):
        sid = self.prompted()
        r = self.load(sid)
        if "result" not in r:
            return f"session/load after a prompt: {json.dumps(r)[:200]}"
        updates_of(self.ed, sid)
        time.sleep(QUIET)  # the kit's quiet period: nothing may come after the answer
        late = updates_of(self.ed, sid)
        return f"{len(late)} updates after the load's answer" if late else None

    def load_003(self):
        r = self.load(self.new())
        return None if isinstance(r.get("result"), dict) else f"session/load of a new session: {json.dumps(r)[:200]}"

    def resume_001(self):
        r = self.ed.call("session/resume", {"sessionId": self.new(), "cwd": self.cwd})
        return None if "result" in r else f"session/resume: {json.dumps(r)[:200]}"

    def resume_002(self):
        sid = self.prompted()
        updates_of(self.ed, sid)
        r = self.ed.call("session/resume", {"sessionId": sid, "cwd": self.cwd})
        if "result" not in r:
            return f"session/resume after a prompt: {json.dumps(r)[:200]}"
        history = [u for u in updates_of(self.ed, sid) if u.get("sessionUpdate") in ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk")]
        return f"{len(history)} history updates before the resume's answer" if history else None

    def list_001(self):
        self.new()
        r = self.ed.call("session/list", {})
        return None if isinstance(r.get("result", {}).get("sessions"), list) else f"session/list: {json.dumps(r)[:200]}"

    def list_002(self):
        self.new()
        empty = tempfile.mkdtemp(prefix="no-session-here-")
        r = self.ed.call("session/list", {"cwd": empty})
        return None if r.get("result", {}).get("sessions") == [] else f"session/list of an empty directory: {json.dumps(r)[:200]}"

    def close_001(self):
        r = self.ed.call("session/close", {"sessionId": self.new()})
        return None if "result" in r else f"session/close: {json.dumps(r)[:200]}"

    def delete_001(self):
        r = self.ed.call("session/delete", {"sessionId": self.new()})
        return None if "result" in r else f"session/delete: {json.dumps(r)[:200]}"

    def delete_002(self):
        r = self.ed.call("session/delete", {"sessionId": "tck-never-created-session"})
        return None if "result" in r else f"session/delete of an unknown id: {json.dumps(r)[:200]}"


# The steps, each with the capability that gates it (as the kit's markers).
STEPS = [
    ("LOAD-001", "loadSession", Steps.load_001),
    ("LOAD-002", "loadSession", Steps.load_002),
    ("LOAD-003", "loadSession", Steps.load_003),
    ("RESUME-001", "resume", Steps.resume_001),
    ("RESUME-002", "resume", Steps.resume_002),
    ("LIST-001", "list", Steps.list_001),
    ("LIST-002", "list", Steps.list_002),
    ("CLOSE-001", "close", Steps.close_001),
    ("DELETE-001", "delete", Steps.delete_001),
    ("DELETE-002", "delete", Steps.delete_002),
]


def offered(caps, name):
    agent = caps.get("agentCapabilities", {})
    return bool(agent.get("loadSession")) if name == "loadSession" else name in (agent.get("sessionCapabilities") or {})


def run(cmd, env, cwd, mode):
    ed = Editor(cmd, env, cwd)
    router.EDITOR[:] = [ed]
    init = ed.call("initialize", CAPS)
    if "result" not in init:
        router.fail(f"{mode}: initialize: {json.dumps(init)[:300]}")
    steps, results = Steps(ed, cwd, init["result"]), {}
    for name, cap, step in STEPS:
        if not offered(init["result"], cap):
            results[name] = "skipped"
            continue
        try:
            why = step(steps)
        except RuntimeError as e:
            why = f"before the step: {e}"
        results[name] = "pass" if why is None else f"FAIL: {why}"
    quit(ed)
    return results


def main():
    binary, agent = sys.argv[1], sys.argv[2]
    cwd, env, model = serve_model(binary, json.dumps({"chunks": [{"text": "Hello."}]}) + "\n", "acpbridge-sessions-")
    script = os.path.join(router.HERE, "agent.sh")
    alone = run([script, agent], env, cwd, "alone")
    routed = run([binary, "--fanout", "--", script, agent], env, cwd, "--fanout")
    worse = []
    for name, _, _ in STEPS:
        print(f"{agent} {name}: alone {alone[name]}; --fanout {routed[name]}")
        if alone[name] == "pass" and routed[name] != "pass":
            worse.append(name)
    model.stdin.close()
    model.wait()
    if worse:
        router.EDITOR.clear()
        router.fail(f"{agent} behind --fanout fails what it passes alone: {', '.join(worse)}")
    print(f"{agent}: behind --fanout it passes every session step it passes alone")


if __name__ == "__main__":
    main()
