//go:build linux

// fanout_agent_test.go runs the router in front of another agent,
// `acpbridge --fanout -- CMD`: testdata/oneagent, a single-session agent
// on the standard library whose flags make it behave as agents in the wild
// do (requests written method first, authentication required, no
// session/close, the same session id every time, deaf to its stdin's end).

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	oneOnce sync.Once
	onePath string
	oneErr  error
)

// oneAgent builds testdata/oneagent once.
func oneAgent(t *testing.T) string {
	t.Helper()
	oneOnce.Do(func() {
		dir, err := os.MkdirTemp("", "oneagent")
		if err != nil {
			oneErr = err
			return
		}
		onePath = filepath.Join(dir, "oneagent")
		if out, err := exec.Command("go", "build", "-o", onePath, "./testdata/oneagent").CombinedOutput(); err != nil {
			oneErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, oneErr)
	return onePath
}

// startRouted runs acpbridge --fanout in front of oneagent with flags,
// which keeps its sessions in a directory of the test's.
func startRouted(t *testing.T, flags ...string) *procAgent {
	t.Helper()
	return startProcessWith(t, nil, func(cmd *exec.Cmd, _ *testAgent) {
		cmd.Env = append(os.Environ(), "ONEAGENT_STATE="+t.TempDir())
	}, append([]string{"--fanout", "--state-dir", t.TempDir(), "--", oneAgent(t)}, flags...)...)
}

// agentPid is the pid of the oneagent process serving sid (its ids name it).
func agentPid(t *testing.T, sid string) int {
	t.Helper()
	parts := strings.Split(sid, "-")
	require.Len(t, parts, 3, "a oneagent session id: %s", sid)
	pid, err := strconv.Atoi(parts[1])
	require.NoError(t, err)
	return pid
}

// Verify Zed's flows through the router on another agent: its initialize
// answer relayed, three threads streaming at once, their permission
// requests (written method first) answered out of order and routed back,
// a file read through the client, a cancel, and a close that ends only
// that thread's process.
func TestFanoutAgent_flows(t *testing.T) {
	t.Parallel()
	p := startRouted(t, "-method-first")
	r := decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`))
	require.Nil(t, r.Error)
	assert.Contains(t, string(r.Result), `"agentInfo":{"name":"oneagent","version":"1.0.0"}`, "the agent's own answer")
	var sids []string
	for i := range 3 {
		sids = append(sids, p.openSession(10+i))
	}
	assert.Len(t, map[int]bool{agentPid(t, sids[0]): true, agentPid(t, sids[1]): true, agentPid(t, sids[2]): true}, 3, "a process each")
	var lines []string
	for i, sid := range sids {
		lines = append(lines, prompt(20+i, sid, "please ask"))
	}
	p.sendTogether(lines...)
	var asks []json.RawMessage
	for len(asks) < 3 {
		var m struct{ ID json.RawMessage }
		require.NoError(t, json.Unmarshal(p.await(`{"method":"session/request_permission"}`), &m))
		asks = append(asks, m.ID)
	}
	for i := len(asks) - 1; i >= 0; i-- { // out of order
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"yes"}}}`, asks[i]))
	}
	_, rs, _ := p.collect(20, 21, 22)
	for i := range 3 {
		assert.Equal(t, "end_turn", stopReason(t, rs[20+i]), "thread %d", i)
	}

	p.send(prompt(30, sids[0], "read /notes.txt"))
	var read struct{ ID json.RawMessage }
	require.NoError(t, json.Unmarshal(p.await(`{"method":"fs/read_text_file"}`), &read))
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":"remember the milk"}}`, read.ID))
	ups, r := p.updatesUntil(30)
	require.Nil(t, r.Error)
	assert.Contains(t, strings.Join(ups, "\n"), "remember the milk", "the client's answer reached the agent")

	p.send(prompt(31, sids[1], "wait"))
	p.await(`{"method":"session/update","params":{"update":{"content":{"text":"One, "}}}}`)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sids[1]))
	_, rs, _ = p.collect(31)
	assert.Equal(t, "cancelled", stopReason(t, rs[31]))

	r = decodeResponse(t, p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":40,"method":"session/close","params":{"sessionId":%q}}`, sids[2])))
	require.Nil(t, r.Error)
	assertGone(t, agentPid(t, sids[2]), "the closed thread's process")
	_, r = p.turnUpdates(41, sids[0], "still here")
	require.Nil(t, r.Error, "the other threads go on")
	p.close()
}

// Verify authentication through the router: session/new before it gets the
// agent's own refusal; after the client's authenticate, every thread opens,
// in spares started before it and children started after it alike.
func TestFanoutAgent_authenticate(t *testing.T) {
	t.Parallel()
	p := startRouted(t, "-auth")
	p.call(initLine)
	r := decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.NotNil(t, r.Error)
	assert.Equal(t, -32000, r.Error.Code, "the agent asks for authentication")
	r = decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{"methodId":"token"}}`))
	require.Nil(t, r.Error)
	for i := range 3 {
		p.openSession(10 + i)
	}
	p.close()
}

// Verify an agent that offers no session/close and answers every
// session/new with the same id: the router offers close (and answers it by
// ending the child), and refuses the second session/new with an error
// saying why, ending that child.
func TestFanoutAgent_noCloseSameID(t *testing.T) {
	t.Parallel()
	p := startRouted(t, "-no-close", "-same-id")
	r := decodeResponse(t, p.call(initLine))
	require.Nil(t, r.Error)
	assert.Contains(t, string(r.Result), `"sessionCapabilities":{"close":{}}`, "close is offered for the agent")
	sid := p.openSession(1)
	assert.Equal(t, "session-1", sid)
	p.send(newLine(2))
	_, rs, _ := p.collect(2)
	require.NotNil(t, rs[2].Error, "a second session with the same id")
	assert.Contains(t, rs[2].Error.Message, `session id "session-1", which is already live on this connection`)
	r = decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"session-1"}}`))
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{}`, string(r.Result))
	p.openSession(4) // the id is free again
	p.close()
}

// Verify that an agent deaf to its stdin's end (and to SIGTERM) does not
// hold the router's exit: stdin's end, then SIGTERM, then SIGKILL.
func TestFanoutAgent_ignoresEOF(t *testing.T) {
	t.Parallel()
	p := startRouted(t, "-ignore-eof")
	p.call(initLine)
	sid := p.openSession(1)
	p.close() // asserts exit status 0
	assertGone(t, agentPid(t, sid), "an agent deaf to EOF, after the router's end")
}

// Verify that a request the agent never answers, left open at the
// router's end, is answered when the router ends the agent (deaf to its
// stdin's end and to SIGTERM): an error saying that acpbridge was ending
// and the agent did not answer in time, with no process state it never
// had ("<nil>").
func TestFanoutAgent_ignoresEOFOpenRequestAnswered(t *testing.T) {
	t.Parallel()
	p := startRouted(t, "-ignore-eof", "-close-hang")
	p.call(initLine)
	sid := p.openSession(1)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/close","params":{"sessionId":%q}}`, sid))
	p.stdin.Close()
	r := decodeResponse(t, p.await(`{"id":2}`))
	require.NotNil(t, r.Error, "a close never answered, at the router's end")
	assert.Contains(t, r.Error.Message, "acpbridge was ending")
	assert.Contains(t, r.Error.Message, "session "+sid)
	assert.NotContains(t, r.Error.Message, "<nil>")
	p.close()
}

// Verify an agent that cannot start, or ends before answering initialize:
// the client's initialize gets an error carrying what went wrong (the
// agent's stderr), not a hang.
func TestFanoutAgent_cannotStart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		command []string
		says    string
	}{
		{[]string{"sh", "-c", "echo the agent needs a key >&2; exit 3"}, "the agent needs a key"},
		{[]string{"/no/such/agent"}, "cannot start the agent"},
	} {
		p := startProcess(t, nil, append([]string{"--fanout", "--state-dir", t.TempDir(), "--"}, c.command...)...)
		r := decodeResponse(t, p.call(initLine))
		require.NotNil(t, r.Error, "%v", c.command)
		assert.Contains(t, r.Error.Message, c.says)
		p.close()
	}
}

// Verify recovery on an agent that can load but not resume: a thread whose
// process was killed answers its next prompt in a new process, reopened
// with session/load, whose replay the client does not see (it shows the
// conversation already).
func TestFanoutAgent_reopenedWithLoad(t *testing.T) {
	t.Parallel()
	p := startRouted(t)
	p.call(initLine)
	sid := p.openSession(1)
	_, r := p.turnUpdates(2, sid, "first words")
	require.Nil(t, r.Error)
	old := agentPid(t, sid)
	require.NoError(t, syscall.Kill(old, syscall.SIGKILL))
	p.awaitEvent("child_ended") // the router has seen it go
	ups, r := p.turnUpdates(3, sid, "second words")
	require.Nil(t, r.Error, "the next prompt of the thread")
	assert.Equal(t, "end_turn", stopReason(t, r))
	assert.NotContains(t, strings.Join(ups, "\n"), "first words", "the load's replay is not the client's")
	assert.Contains(t, strings.Join(ups, "\n"), "two, three.")
	p.close()
}

// Verify that a reopening waits for its process's initialize answer: with
// no spare, a thread whose process was killed is reopened in a process
// started for it (a slow one), which refuses a request before its
// initialize is answered, as the TypeScript SDK does; the load goes first
// once it is, and the prompt after the load.
func TestFanoutAgent_reopenWaitsForInitialize(t *testing.T) {
	t.Parallel()
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	p := startProcessWith(t, nil, func(cmd *exec.Cmd, _ *testAgent) {
		cmd.Env = append(os.Environ(), "ONEAGENT_STATE="+t.TempDir())
	}, "--fanout", "--spares", "0", "--trace", trace, "--state-dir", t.TempDir(), "--", oneAgent(t), "-start-delay", "200ms")
	p.call(initLine)
	sid := p.openSession(1)
	old := agentPid(t, sid)
	require.NoError(t, syscall.Kill(old, syscall.SIGKILL))
	p.awaitEvent("child_ended")
	ups, r := p.turnUpdates(2, sid, "after the crash")
	require.Nil(t, r.Error, "the prompt after the reopening; stderr:\n%s", p.stderr.String())
	assert.Contains(t, strings.Join(ups, "\n"), "two, three.")
	p.close()
	// --trace shows the router's reopening: the load it sent the new
	// process and that process's answer, marked with its pid.
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	var sent, answered bool
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			Child int
			Dir   string
			Msg   map[string]any
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "%s", line)
		switch {
		case rec.Dir == "to-child" && rec.Msg["method"] == "session/load":
			sent = rec.Child > 0 && rec.Child != old
			assert.Equal(t, sid, rec.Msg["params"].(map[string]any)["sessionId"])
		case rec.Dir == "from-child" && rec.Msg["result"] != nil:
			answered = sent
		}
	}
	assert.True(t, sent && answered, "the trace holds the reopening's load and its answer:\n%s", b)
}

// Verify, on another agent: a session loaded after the router's restart (a
// new router, the agent's own store) replays and answers; and stdin's end
// with a turn running answers that prompt cancelled and exits 0.
func TestFanoutAgent_restartAndEOF(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	start := func() *procAgent {
		return startProcessWith(t, nil, func(cmd *exec.Cmd, _ *testAgent) {
			cmd.Env = append(os.Environ(), "ONEAGENT_STATE="+state)
		}, "--fanout", "--state-dir", t.TempDir(), "--", oneAgent(t))
	}
	p := start()
	p.call(initLine)
	sid := p.openSession(1)
	_, r := p.turnUpdates(2, sid, "remember this")
	require.Nil(t, r.Error)
	p.close()

	p = start()
	p.call(initLine)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":%q,"cwd":"$CWD","mcpServers":[]}}`, sid))
	ups, rs, _ := p.collect(3)
	require.Nil(t, rs[3].Error, "the load in a new router")
	assert.Contains(t, fmt.Sprint(ups), "remember this", "its replay reaches the client")
	p.send(prompt(4, sid, "wait"))
	p.await(`{"method":"session/update","params":{"update":{"content":{"text":"One, "}}}}`)
	p.stdin.Close()
	_, rs, _ = p.collect(4)
	assert.Equal(t, "cancelled", stopReason(t, rs[4]), "the running prompt at stdin's end")
	p.close() // exit status 0
}

// Verify that closing a thread of an agent without session/close while its
// permission request is on screen ends its prompt cancelled (a close the
// client asked for), not with the error of a process that died.
func TestFanoutAgent_closeWithoutCloseCancels(t *testing.T) {
	t.Parallel()
	p := startRouted(t, "-no-close")
	p.call(initLine)
	a := p.openSession(10)
	p.send(prompt(20, a, "please ask"))
	p.await(`{"method":"session/request_permission"}`)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":21,"method":"session/close","params":{"sessionId":%q}}`, a))
	_, rs, _ := p.collect(20, 21)
	require.Nil(t, rs[20].Error, "the prompt of a closed thread")
	assert.Equal(t, "cancelled", stopReason(t, rs[20]))
	require.Nil(t, rs[21].Error)
	p.close()
}

// Verify that an initialize repeated under -- CMD is answered: with the
// agent's answer to the first, under its own id, whether it comes while the
// first is in flight (in one write) or after.
func TestFanoutAgent_initializeAgain(t *testing.T) {
	t.Parallel()
	p := startRouted(t)
	again := func(id int) string { return strings.Replace(initLine, `"id":0`, fmt.Sprintf(`"id":%d`, id), 1) }
	p.sendTogether(initLine, again(1))
	_, rs, _ := p.collect(0, 1)
	require.Nil(t, rs[0].Error)
	require.Nil(t, rs[1].Error, "the second, sent with the first")
	assert.JSONEq(t, string(rs[0].Result), string(rs[1].Result))
	r := decodeResponse(t, p.call(again(2)))
	require.Nil(t, r.Error, "a third, later")
	assert.JSONEq(t, string(rs[0].Result), string(r.Result))
	a := p.openSession(10)
	_, r = p.turnUpdates(20, a, "hello")
	require.Nil(t, r.Error, "the connection serves on")
	p.close()
}

// Verify Zed's start-up with a thread shown in two panes: two loads of it
// in one write to a new router are both answered, from one opening, and
// its history reaches the client once; withdrawing either load leaves the
// other answered.
func TestFanoutAgent_loadInTwoPanes(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	start := func() *procAgent {
		return startProcessWith(t, nil, func(cmd *exec.Cmd, _ *testAgent) {
			cmd.Env = append(os.Environ(), "ONEAGENT_STATE="+state)
		}, "--fanout", "--state-dir", t.TempDir(), "--", oneAgent(t))
	}
	p := start()
	p.call(initLine)
	sid := p.openSession(1)
	_, r := p.turnUpdates(2, sid, "remember this")
	require.Nil(t, r.Error)
	p.close()

	p = start()
	p.call(initLine)
	load := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/load","params":{"sessionId":%q,"cwd":"$CWD","mcpServers":[]}}`, id, sid)
	}
	p.sendTogether(load(3), load(4))
	ups, rs, _ := p.collect(3, 4)
	require.Nil(t, rs[3].Error)
	require.Nil(t, rs[4].Error, "the second pane's load")
	assert.Equal(t, 1, strings.Count(fmt.Sprint(ups), "remember this"), "the history once")
	_, r = p.turnUpdates(5, sid, "still one thread")
	require.Nil(t, r.Error)
	p.close()

	// Either pane's load withdrawn ($/cancel_request) in the same write:
	// that one is answered -32800, the other is served, the history once.
	for _, withdrawn := range []int{0, 1} {
		p = start()
		p.call(initLine)
		ids := []int{10, 11}
		p.sendTogether(load(ids[0]), load(ids[1]), cancelRequest(ids[withdrawn]))
		ups, rs, _ := p.collect(ids...)
		require.NotNil(t, rs[ids[withdrawn]].Error, "the withdrawn load")
		assert.Equal(t, -32800, rs[ids[withdrawn]].Error.Code)
		require.Nil(t, rs[ids[1-withdrawn]].Error, "the other pane's load, served")
		assert.Equal(t, 1, strings.Count(fmt.Sprint(ups), "remember this"), "the history once")
		_, r = p.turnUpdates(12, sid, "served after the withdrawal")
		require.Nil(t, r.Error)
		p.close()
	}
}

// Verify a child that never answers initialize: a session/new waiting for
// it and withdrawn with $/cancel_request is answered -32800 at once, and
// the client's initialize is answered with an error naming the bound
// rather than held for ever.
func TestFanoutAgent_initializeBounded(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--reopen-timeout", "1s"}, "-start-delay", "1h")
	p.sendTogether(initLine, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`, cancelRequest(1))
	r := decodeResponse(t, p.await(`{"id":1}`))
	require.NotNil(t, r.Error, "the withdrawn session/new")
	assert.Equal(t, -32800, r.Error.Code)
	assert.NotContains(t, string(bytesJoin(p.got)), `"id":0,`, "answered before the initialize it waited behind")
	r = decodeResponse(t, p.await(`{"id":0}`))
	require.NotNil(t, r.Error, "no agent answered initialize")
	assert.Contains(t, r.Error.Message, "did not answer initialize within 5s")
	p.close()
}

// Verify a session/load of an idle thread that cannot be reopened in a new
// process yet (an agent that offers session/list and has not listed it:
// codex-acp and claude-agent-acp before a thread's first prompt): the
// process serving it loads it, instead of a refusal that says, untrue, that
// something is in flight.
func TestFanoutAgent_loadOfUnlistedThread(t *testing.T) {
	t.Parallel()
	p := startRouted(t, "-list")
	p.call(initLine)
	a := p.openSession(10)
	r := decodeResponse(t, p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":11,"method":"session/load","params":{"sessionId":%q,"cwd":"$CWD","mcpServers":[]}}`, a)))
	require.Nil(t, r.Error, "the load of an idle, unlisted thread")
	_, r = p.turnUpdates(20, a, "hello")
	require.Nil(t, r.Error, "the thread serves on")
	p.close()
}

// Verify a session/load of a thread whose turn has just ended, while the
// router's own check of the agent's list (after every turn) is still
// unanswered: nothing of the client's is in flight, so the load is served
// (by the process that serves the thread, its history replayed), not
// refused as if a prompt were running (codex-acp behind the router, a load
// right after a turn).
func TestFanoutAgent_loadWhileTheRouterChecksTheList(t *testing.T) {
	t.Parallel()
	p := startRouted(t, "-list", "-list-hang")
	p.call(initLine)
	a := p.openSession(10)
	_, r := p.turnUpdates(20, a, "hello")
	require.Nil(t, r.Error)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":11,"method":"session/load","params":{"sessionId":%q,"cwd":"$CWD","mcpServers":[]}}`, a))
	updates, rs, _ := p.collect(11)
	require.Nil(t, rs[11].Error, "the load of a thread whose turn has ended")
	require.NotEmpty(t, updates, "its history replayed")
	assert.Equal(t, "user_message_chunk", updates[0]["sessionUpdate"])
	p.close()
}

// Verify the router's protocol version: a client that asks for ACP v2, in
// front of an agent that speaks v1 and v2 (as codex-acp 2.x and
// claude-agent-acp 0.101 do), is answered v1 in v1's shapes only (the
// agent is asked for v1, and session/close is offered where v1 has it),
// and threads open and run on that answer; acpbridge children, whose
// answer the router gives itself, say v1 too.
func TestFanoutAgent_versionTwoAnsweredOne(t *testing.T) {
	t.Parallel()
	v2 := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"clientCapabilities":{}}}`
	p := startRouted(t)
	r := decodeResponse(t, p.call(v2))
	require.Nil(t, r.Error)
	var res map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.Result, &res))
	assert.Equal(t, "1", string(res["protocolVersion"]))
	assert.NotContains(t, res, "capabilities", "no v2 shape in a v1 answer")
	assert.Contains(t, string(res["agentCapabilities"]), `"close":{}`)
	p.openSession(1)
	p.close()

	q := startProcess(t, nil, "--fanout", "--model", anyModel)
	r = decodeResponse(t, q.call(v2))
	require.Nil(t, r.Error)
	assert.Contains(t, string(r.Result), `{"protocolVersion":1,"agentCapabilities":{`)
	q.newSession()
	q.close()
}

// Verify an agent that closes a session by exiting (some do): the close is
// answered {} and the thread is closed, not taken for a crash (no error,
// no reopening on the next request, which finds no such session).
func TestFanoutAgent_closeByExit(t *testing.T) {
	t.Parallel()
	p := startRouted(t, "-close-exits")
	p.call(initLine)
	a := p.openSession(10)
	r := decodeResponse(t, p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":11,"method":"session/close","params":{"sessionId":%q}}`, a)))
	require.Nil(t, r.Error, "a close, answered")
	assert.JSONEq(t, `{}`, string(r.Result))
	_, r = p.turnUpdates(12, a, "still there?")
	require.NotNil(t, r.Error, "a closed thread is not reopened")
	assert.Equal(t, -32002, r.Error.Code)
	p.openSession(13)
	p.close()
	assert.False(t, p.hasEvent("child_ended", "session", a), "not a crash")
	assert.False(t, p.hasEvent("reopening", "session", a))
}
