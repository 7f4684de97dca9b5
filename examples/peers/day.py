#!/usr/bin/env python3
"""day.py ACPBRIDGE AGENT: an editor's day with one of the pinned agents
(codex, claude, gemini), run directly as Zed runs an agent that serves
many sessions, offline against the served model (`acpbridge scenario
model`), checking that every conversation keeps its own place in the
recording:

  three threads opened in one write and prompted at once: one writes a
  file and runs it (permissions granted), one is refused its write
  (permission rejected) and goes on to its next turn, one only talks; a
  turn cancelled; the editor quits (stdin's end); a new process of the
  agent restores the three threads at start-up (session/load of each, in
  one write, their histories replayed) and all three are prompted again
  at once.

Every turn must be answered with its own thread's entry of the recording,
and the served model must never begin the recording again for a
conversation it lost (its log marks that "the recording begun again"), nor
refuse or fail a call. gemini-cli 0.61.0 loads a session in a new process
only at times (else "Invalid session identifier"; the router's table says
why it never relies on it): when its loads fail the day ends at the
restart, where the editor must be told so; when they succeed it goes on.

Exits 1 on the first step that does not hold, saying which. Run it from
examples/peers after `npm ci`; .ci/run runs it for each agent.
"""
import json, os, sys

import router
from router import Editor, fail, ok, quit, serve_model, wait

FIXTURE = "\n".join(json.dumps(e) for e in [
    # Thread A: a file written (granted) and run.
    {"expect": "Write greet.sh", "chunks": [{"text": "Writing greet.sh."}, {"toolCall": {"id": "w1", "name": "write_file", "input": {"path": "greet.sh", "content": "echo hello\n"}}}]},
    {"chunks": [{"toolCall": {"id": "r1", "name": "run_command", "input": {"command": "sh greet.sh"}}}]},
    {"chunks": [{"text": "A: it printed hello."}]},
    # Thread B: a write the user rejects, then its next turn.
    {"expect": "Write notes.txt", "chunks": [{"text": "Writing notes.txt."}, {"toolCall": {"id": "w2", "name": "write_file", "input": {"path": "notes.txt", "content": "notes\n"}}}]},
    {"chunks": [{"text": "B: not written, as you asked."}]},
    # Thread C: words only.
    {"expect": "count to three", "chunks": [{"text": "C: one, two, three."}]},
    {"expect": "then say done", "chunks": [{"text": "B: done."}]},
    {"expect": "wait for it", "chunks": [{"text": "A: waiting."}, {"delayMs": 120000}, {"text": "A: too late."}]},
    # After the restart, each thread's next turn.
    {"expect": "greet once more", "chunks": [{"text": "A: hello again."}]},
    {"expect": "note once more", "chunks": [{"text": "B: still no notes."}]},
    {"expect": "count once more", "chunks": [{"text": "C: four, five, six."}]},
]) + "\n"

CAPS = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}}


class DayEditor(Editor):
    """The editor of router.py, whose user rejects every permission asked
    in the sessions of `rejecting`."""

    rejecting = set()

    def _answer(self, method, params):
        if method == "session/request_permission" and params.get("sessionId") in self.rejecting:
            kinds = {o["kind"]: o["optionId"] for o in params["options"]}
            no = kinds.get("reject_once") or kinds.get("reject_always")
            outcome = {"outcome": "selected", "optionId": no} if no else {"outcome": "cancelled"}
            return {"result": {"outcome": outcome}}
        return super()._answer(method, params)

    def said(self, sid):
        """The agent's words in sid since the last prompt, and whether the
        user's own words were among the updates (a replayed history)."""
        q = self.updates.get(sid)
        text, user = "", False
        while q is not None and not q.empty():
            u = q.get()
            kind = u.get("sessionUpdate")
            if kind == "agent_message_chunk" and u.get("content", {}).get("type") == "text":
                text += u["content"]["text"]
            user = user or kind == "user_message_chunk"
        return text, user


def turns(ed, prompts, what):
    """Prompts each thread at once ({sid: words}); every turn must end, and
    say its own entry's words ({sid: (response, text)})."""
    qs = {sid: ed.prompt(sid, words) for sid, words in prompts.items()}
    return {sid: (wait(q, 180, f"{what} in {sid}"), ed.said(sid)[0]) for sid, q in qs.items()}


def says(sid, text, want, what):
    if want not in text:
        fail(f"{what} in {sid} said {text[:300]!r}, not the recording's {want!r}: a conversation lost its place")


def check_model_log(path):
    # A cancelled turn's call ends "failed: ... context canceled": the
    # agent hung up, as it should.
    bad = [l for l in open(path) if "begun again" in l or ": no entry" in l or "; failed:" in l and not l.rstrip().endswith("context canceled")]
    if bad:
        fail("the served model lost a conversation:\n" + "".join(bad[:10]))


def main():
    binary, agent = sys.argv[1], sys.argv[2]
    cwd, env, model = serve_model(binary, FIXTURE, "acpbridge-day-")
    cmd = [os.path.join(router.HERE, "agent.sh"), agent]

    ed = DayEditor(cmd, env, cwd)
    router.EDITOR[:] = [ed]
    if "result" not in ed.call("initialize", CAPS):
        fail("initialize")
    opened = ed.calls("session/new", [{"cwd": cwd, "mcpServers": []}] * 3)
    a, b, c = [r.get("result", {}).get("sessionId") for r in opened]
    if not (a and b and c):
        fail(f"session/new: {opened}")
    ed.rejecting = {b}
    got = turns(ed, {a: "Write greet.sh and run it.", b: "Write notes.txt.", c: "Now count to three."}, "the first prompts")
    ok(a, got[a][0], "a write granted and a command run")
    ok(c, got[c][0], "a turn of words")
    if "result" not in got[b][0]:
        fail(f"a write rejected in {b}: {json.dumps(got[b][0])[:300]}")
    says(a, got[a][1], "A: it printed hello.", "a write granted")
    says(c, got[c][1], "C: one, two, three.", "a turn of words")
    if open(os.path.join(cwd, "greet.sh")).read() != "echo hello\n" or os.path.exists(os.path.join(cwd, "notes.txt")):
        fail("greet.sh written and notes.txt not: the permissions were not followed")
    print(f"{agent}: three threads prompted at once, a write granted and one rejected")

    got = turns(ed, {b: "Never mind; then say done."}, "the turn after a rejection")
    ok(b, got[b][0], "the turn after a rejection")
    says(b, got[b][1], "B: done.", "the turn after a rejection")
    q = ed.prompt(a, "Now wait for it.")
    ed.first_update(a)
    ed.notify("session/cancel", {"sessionId": a})
    r = wait(q, 60, "a cancelled turn")
    if r.get("result", {}).get("stopReason") != "cancelled":
        fail(f"a cancelled turn answered {json.dumps(r)[:300]}")
    print(f"{agent}: the rejected thread went on; a turn cancelled")

    quit(ed)
    ed = DayEditor(cmd, env, cwd)
    router.EDITOR[:] = [ed]
    init = ed.call("initialize", CAPS)
    if not init.get("result", {}).get("agentCapabilities", {}).get("loadSession"):
        fail(f"{agent} does not offer session/load: {json.dumps(init)[:300]}")
    loads = ed.calls("session/load", [{"sessionId": s, "cwd": cwd, "mcpServers": []} for s in (a, b, c)])
    failed = [(s, r) for s, r in zip((a, b, c), loads) if "result" not in r]
    if failed and agent == "gemini":
        why = failed[0][1].get("error", {})
        print(f"{agent}: cannot load a session in a new process; the editor is told: {json.dumps(why)[:200]}")
        check_model_log(router.MODEL_LOG[0])
        print(f"{agent}: every conversation kept its place in the recording")
        return
    if failed:
        fail(f"session/load at start-up: {json.dumps(failed)[:400]}")
    for s in (a, b, c):
        if not ed.said(s)[1]:
            fail(f"session/load of {s} replayed no history")
    ed.rejecting = {b}
    got = turns(ed, {a: "Say greet once more.", b: "Say note once more.", c: "Now count once more."}, "the prompts after the restart")
    for s, want in ((a, "A: hello again."), (b, "B: still no notes."), (c, "C: four, five, six.")):
        ok(s, got[s][0], "a prompt in a restored thread")
        says(s, got[s][1], want, "a prompt in a restored thread")
    print(f"{agent}: a new process restored the three threads at start-up, each prompted again at once")
    quit(ed)
    check_model_log(router.MODEL_LOG[0])
    print(f"{agent}: every conversation kept its place in the recording")
    model.stdin.close()
    model.wait()


if __name__ == "__main__":
    main()
