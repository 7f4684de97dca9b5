//go:build linux

// fanout_hostile_test.go puts the router in front of agents that misbehave
// in ordinary ways (testdata/oneagent's switches and prompt words): one
// that stops reading, dies with a helper on its pipes, writes an endless
// line, names another thread's session, floods the client, hangs or is late
// closing, hangs or refuses a reopening, reuses session ids; and checks
// that each harms only its own thread.

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startRoutedWith runs acpbridge --fanout with routerFlags in front of
// oneagent with agentFlags.
func startRoutedWith(t *testing.T, routerFlags []string, agentFlags ...string) *procAgent {
	t.Helper()
	args := append(append([]string{"--fanout", "--state-dir", t.TempDir()}, routerFlags...), "--", oneAgent(t))
	return startProcessWith(t, nil, func(cmd *exec.Cmd, _ *testAgent) {
		cmd.Env = append(os.Environ(), "ONEAGENT_STATE="+t.TempDir())
	}, append(args, agentFlags...)...)
}

// agentChildren are the oneagent processes the router has running: those
// whose program is oneagent (a child forked and not yet made the keeper
// has the router's command line, which names oneagent too).
func agentChildren(t *testing.T, router int) []int {
	t.Helper()
	return childrenWhere(t, router, func(cmdline string) bool {
		argv0, _, _ := strings.Cut(cmdline, "\x00")
		return filepath.Base(argv0) == "oneagent"
	})
}

// childrenWhere are the router's child processes whose command line keep
// accepts (each thread of the router lists the children it started).
func childrenWhere(t *testing.T, router int, keep func(cmdline string) bool) []int {
	t.Helper()
	lists, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", router))
	require.NoError(t, err)
	var pids []int
	for _, list := range lists {
		b, _ := os.ReadFile(list)
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); keep(string(cmdline)) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// bigPrompt is a prompt line with text of n bytes.
func bigPrompt(id int, sid string, n int) string {
	return prompt(id, sid, "big "+strings.Repeat("z", n))
}

// Verify that a child that stops reading its stdin stalls only its own
// thread: a 300 KiB prompt for it waits in its queue, while another
// thread's prompt and session/list, sent with it in one write, are
// answered; past the queue's bound its requests are answered with an error
// naming the thread.
func TestFanoutHostile_stuckChild(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--max-line-bytes", "1048576"})
	p.call(initLine)
	a, b := p.openSession(10), p.openSession(11)
	p.send(prompt(20, a, "stop reading"))
	p.await(`{"method":"session/update","params":{"update":{"content":{"text":"One, "}}}}`)
	p.sendTogether(bigPrompt(21, a, 300<<10), prompt(22, b, "hello"), `{"jsonrpc":"2.0","id":23,"method":"session/list","params":{}}`)
	_, rs, _ := p.collect(20, 22, 23) // 20: it stopped reading, but answers
	assert.Equal(t, "end_turn", stopReason(t, rs[22]), "the other thread")
	assert.NotNil(t, rs[23], "session/list")
	var lines []string
	for i := range 14 {
		lines = append(lines, bigPrompt(30+i, a, 300<<10))
	}
	p.sendTogether(lines...)
	line := p.await(`{"id":43}`)
	r := decodeResponse(t, line)
	require.NotNil(t, r.Error, "a request past the stuck child's bound: %s", line)
	assert.Contains(t, r.Error.Message, "the agent process of session "+a+" is not reading its input")
	p.send(prompt(50, b, "still"))
	_, rs, _ = p.collect(50)
	assert.Equal(t, "end_turn", stopReason(t, rs[50]), "the other thread after the bound")
	p.close()
}

// Verify that an agent that dies while a helper it started (in a session of
// its own) holds its stdout and stderr is seen to die: its running prompt
// is answered with an error naming the session, and the thread's next
// prompt is answered in a new process.
func TestFanoutHostile_crashWithHelper(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, nil)
	p.call(initLine)
	a := p.openSession(10)
	p.send(prompt(20, a, "crash with helper"))
	_, rs, _ := p.collect(20)
	require.NotNil(t, rs[20].Error, "the prompt its process died in")
	assert.Contains(t, rs[20].Error.Message, "the process of session "+a+" ended")
	assert.Contains(t, rs[20].Error.Message, "reopened in a new process on its next request")
	p.send(prompt(21, a, "hello again"))
	_, rs, _ = p.collect(21)
	assert.Equal(t, "end_turn", stopReason(t, rs[21]), "the thread, reopened")
	p.close()
}

// Verify that a child's line over --max-line-bytes (64 MiB against a limit
// of 1 MiB) is dropped without being held: the thread is told, its turn is
// answered, and the router's peak memory stays far below the line.
func TestFanoutHostile_endlessLine(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--max-line-bytes", "1048576"})
	p.call(initLine)
	a := p.openSession(10)
	ups, r := p.turnUpdates(20, a, "endless 64")
	require.Nil(t, r.Error)
	text := strings.Join(ups, "\n")
	assert.Contains(t, text, "longer than the line limit (--max-line-bytes 1048576); it was dropped", "the thread is told")
	assert.Contains(t, text, "two, three.", "the turn went on")
	assert.Less(t, vmHWM(t, p.cmd.Process.Pid), 48<<10, "the router's peak RSS (KiB) after a 64 MiB line")
	p.close()
}

// Verify that a child is trusted with its own thread only: an update and a
// permission request naming another thread's session never reach the
// client, and the child's own turn goes on.
func TestFanoutHostile_spoofedSession(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, nil)
	p.call(initLine)
	a, b := p.openSession(10), p.openSession(11)
	_, r := p.turnUpdates(20, a, "spoof "+b)
	require.Nil(t, r.Error)
	_, r = p.turnUpdates(21, b, "hello")
	require.Nil(t, r.Error)
	for _, line := range p.got {
		assert.NotContains(t, string(line), "poofed", "a line another thread's agent wrote for %s", b)
	}
	p.awaitEvent("child_spoofed")
	p.close()
}

// Verify that a cut line that starts like a notification, and a line that
// is not JSON, never reach the client (every line the client gets is
// checked against the schema), and the turn goes on.
func TestFanoutHostile_garbageLines(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, nil)
	p.call(initLine)
	a := p.openSession(10)
	ups, r := p.turnUpdates(20, a, "garbage")
	require.Nil(t, r.Error)
	assert.Contains(t, strings.Join(ups, "\n"), "two, three.")
	for _, line := range p.got {
		assert.True(t, json.Valid(line), "a line the client got: %s", line)
	}
	p.awaitEvents(2, "child_line_dropped")
	p.close()
}

// Verify that a child's requests to the client are bounded: of 200 sent at
// once, while the client answers none, 136 are refused at once (so 64 are
// open at the client); once the client answers those, the turn ends.
func TestFanoutHostile_requestFlood(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, nil)
	p.call(initLine)
	a := p.openSession(10)
	p.send(prompt(20, a, "flood 200"))
	var ids []json.RawMessage
	refused := false
	for !refused || len(ids) < 64 {
		var m struct {
			ID     json.RawMessage
			Method string
			Params struct {
				Update struct{ Content struct{ Text string } }
			}
		}
		require.NoError(t, json.Unmarshal(p.next("the flood's requests and refusals"), &m))
		switch {
		case m.Method == "fs/read_text_file":
			ids = append(ids, m.ID)
		case m.Params.Update.Content.Text == "refused 136; ":
			refused = true // no request answered yet: 64 open, the rest refused
		}
	}
	for _, id := range ids {
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":""}}`, id))
	}
	ups, r := p.updatesUntil(20)
	require.Nil(t, r.Error)
	assert.Contains(t, strings.Join(ups, "\n"), "flood: 136 refused", "the requests past the bound")
	assert.Len(t, ids, 64, "the requests that reached the client")
	p.close()
}

// Verify that a child's own $/cancel_request reaches the client under the
// connection's id for its request: thread B's withdrawn permission request
// is withdrawn, not thread A's, which shares its child id.
func TestFanoutHostile_childWithdraws(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"withdraw", "withdraw as a request"} {
		t.Run(how, func(t *testing.T) { childWithdraws(t, how) })
	}
}

// childWithdraws is TestFanoutHostile_childWithdraws with thread B's agent
// prompted with words ("withdraw", or "withdraw as a request": its
// $/cancel_request wrongly sent with an id, which is translated all the
// same and cannot name thread A's request).
func childWithdraws(t *testing.T, words string) {
	t.Parallel()
	p := startRoutedWith(t, nil)
	p.call(initLine)
	a, b := p.openSession(10), p.openSession(11)
	p.send(prompt(20, a, "please ask"))
	var askA struct{ ID json.RawMessage }
	require.NoError(t, json.Unmarshal(p.await(`{"method":"session/request_permission"}`), &askA))
	p.send(prompt(21, b, words))
	var askB struct{ ID json.RawMessage }
	require.NoError(t, json.Unmarshal(p.await(`{"method":"session/request_permission","params":{"toolCall":{"title":"Withdrawn"}}}`), &askB))
	require.NotEqual(t, string(askA.ID), string(askB.ID))
	var cancel struct {
		Params struct{ RequestID json.RawMessage }
	}
	require.NoError(t, json.Unmarshal(p.await(`{"method":"$/cancel_request"}`), &cancel))
	assert.Equal(t, string(askB.ID), string(cancel.Params.RequestID), "the withdrawn request, under the connection's id")
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"yes"}}}`, askA.ID))
	assert.Equal(t, "end_turn", stopReason(t, decodeResponse(t, p.await(`{"id":20}`))))
	answered21 := `{"jsonrpc":"2.0","id":21,"result":{"stopReason":"end_turn"}}`
	if !strings.Contains(string(bytesJoin(p.got)), answered21) { // it may have come before
		p.await(`{"id":21}`)
	}
	assert.Contains(t, string(bytesJoin(p.got)), answered21, "thread B's turn")
	p.close()
}

func bytesJoin(lines [][]byte) []byte {
	var b []byte
	for _, l := range lines {
		b = append(append(b, l...), '\n')
	}
	return b
}

// Verify eviction against an agent that never answers session/close and
// ignores its stdin's end and SIGTERM: the evicted process is ended all the
// same and counts toward --max-children until it has ended (two threads
// opened meanwhile under a cap of 2 never make three processes), and every
// thread still answers.
func TestFanoutHostile_closeNeverAnswered(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--idle-timeout", "300ms", "--max-children", "2", "--spares", "0", "--log-level", "debug"}, "-close-hang", "-ignore-eof")
	p.call(initLine)
	a := p.openSession(10)
	_, r := p.turnUpdates(20, a, "hello")
	require.Nil(t, r.Error)
	pidA := agentPid(t, a)
	p.awaitEvent("evicting", "session", a)
	p.sendTogether(newSessionLine(11), newSessionLine(12))
	_, rs, _ := p.collect(11, 12)
	require.Nil(t, rs[11].Error)
	require.Nil(t, rs[12].Error)
	assert.LessOrEqual(t, len(agentChildren(t, p.cmd.Process.Pid)), 2, "processes under a cap of 2")
	assertGone(t, pidA, "the evicted process that never answered its close")
	p.close()
}

// newSessionLine is a session/new request.
func newSessionLine(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, id)
}

// Verify that a prompt arriving while the evicted process still closes (its
// close answered late) waits for that end and is answered in a new
// process; and that the late close touches nothing of the new one (the
// thread is evicted and reopened again).
func TestFanoutHostile_promptDuringEviction(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--idle-timeout", "300ms", "--log-level", "debug"}, "-close-late", "400ms")
	p.call(initLine)
	a := p.openSession(10)
	_, r := p.turnUpdates(20, a, "hello")
	require.Nil(t, r.Error)
	p.awaitEvent("evicting", "session", a)
	_, r = p.turnUpdates(21, a, "while it closes")
	require.Nil(t, r.Error, "the prompt that met the eviction")
	p.awaitEvents(2, "evicting", "session", a)
	_, r = p.turnUpdates(22, a, "once more")
	require.Nil(t, r.Error, "the thread after its second eviction")
	p.close()
}

// Verify that a lost thread prompted while --max-children is full gets a
// process by evicting the least recently used idle thread (and that one,
// prompted next, by evicting the other).
func TestFanoutHostile_reopenAtTheCap(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--max-children", "2", "--spares", "0", "--log-level", "debug"})
	p.call(initLine)
	a, b := p.openSession(10), p.openSession(11)
	require.NoError(t, syscall.Kill(agentPid(t, a), syscall.SIGKILL))
	p.awaitEvent("child_ended")
	p.openSession(12) // the cap is full again
	_, r := p.turnUpdates(20, a, "back")
	require.Nil(t, r.Error, "the lost thread at the cap")
	p.awaitEvent("evicting", "session", b)
	_, r = p.turnUpdates(21, b, "and b")
	require.Nil(t, r.Error, "the thread evicted for it")
	assert.LessOrEqual(t, len(agentChildren(t, p.cmd.Process.Pid)), 2, "processes under a cap of 2")
	p.close()
}

// Verify a reopening that never answers: a session/cancel answers the
// waiting prompt cancelled, and session/close answers at once (the
// reopening's bound, 30 s by default, is far off).
func TestFanoutHostile_reopenHangs(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, nil, "-load-hang")
	p.call(initLine)
	a := p.openSession(10)
	require.NoError(t, syscall.Kill(agentPid(t, a), syscall.SIGKILL))
	p.awaitEvents(1, "child_ended")
	setMode := fmt.Sprintf(`{"jsonrpc":"2.0","id":24,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"ask"}}`, a)
	p.sendTogether(prompt(20, a, "hello"), setMode, fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, a),
		prompt(23, a, "again"), cancelRequest(23))
	_, rs, order := p.collect(20, 23)
	assert.Equal(t, "cancelled", stopReason(t, rs[20]), "a prompt waiting on a reopening, cancelled")
	require.NotNil(t, rs[23].Error, "a prompt waiting on a reopening, its request cancelled")
	assert.Equal(t, -32800, rs[23].Error.Code)
	assert.NotContains(t, order, 24, "session/cancel cancels the waiting prompts, not the set_mode")
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":21,"method":"session/close","params":{"sessionId":%q}}`, a))
	_, rs, _ = p.collect(21, 24)
	assert.Nil(t, rs[21].Error, "closing a thread whose reopening hangs")
	require.NotNil(t, rs[24].Error, "the set_mode that waited, at the close")
	assert.Contains(t, rs[24].Error.Message, "was closed before session/set_mode could be served")
	p.close()
}

// Verify that with --reopen-timeout a prompt waiting on a reopening that
// never answers gets an error naming the bound.
func TestFanoutHostile_reopenTimesOut(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--reopen-timeout", "500ms"}, "-load-hang")
	p.call(initLine)
	b := p.openSession(11)
	require.NoError(t, syscall.Kill(agentPid(t, b), syscall.SIGKILL))
	p.awaitEvents(1, "child_ended")
	p.send(prompt(22, b, "hello"))
	_, rs, _ := p.collect(22)
	require.NotNil(t, rs[22].Error)
	assert.Contains(t, rs[22].Error.Message, "--reopen-timeout")
	p.close()
}

// Verify that a thread closed while its reopening still waits for a
// process (a slow start, no spare) is closed at once: the prompt that
// waited is answered, and the process, once started, serves the next
// thread.
func TestFanoutHostile_closeWhileReopeningStarts(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--spares", "0"}, "-start-delay", "300ms")
	p.call(initLine)
	a := p.openSession(10)
	require.NoError(t, syscall.Kill(agentPid(t, a), syscall.SIGKILL))
	p.awaitEvent("child_ended")
	p.sendTogether(prompt(20, a, "hello"), fmt.Sprintf(`{"jsonrpc":"2.0","id":21,"method":"session/close","params":{"sessionId":%q}}`, a))
	_, rs, _ := p.collect(20, 21)
	require.NotNil(t, rs[20].Error, "the prompt that waited on the reopening")
	assert.Contains(t, rs[20].Error.Message, "was closed before session/prompt could be served")
	assert.Nil(t, rs[21].Error, "the close")
	b := p.openSession(22)
	_, r := p.turnUpdates(23, b, "hello")
	require.Nil(t, r.Error, "a new thread after it")
	p.close()
}

// Verify that when the agent refuses to reopen a thread, the user is told
// the agent's own reason.
func TestFanoutHostile_reopenRefused(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, nil, "-load-refuse")
	p.call(initLine)
	a := p.openSession(10)
	require.NoError(t, syscall.Kill(agentPid(t, a), syscall.SIGKILL))
	p.awaitEvent("child_ended")
	p.send(prompt(20, a, "hello"))
	_, rs, _ := p.collect(20)
	require.NotNil(t, rs[20].Error)
	assert.Contains(t, rs[20].Error.Message, "oneagent keeps no session "+a+" here")
	assert.NotContains(t, rs[20].Error.Message, "not restarted")
	p.close()
}

// Verify that an agent that reuses session ids cannot open a thread under
// an evicted thread's id, whose prompts stay its own.
func TestFanoutHostile_reusedIDAfterEviction(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--idle-timeout", "300ms", "--log-level", "debug"}, "-same-id")
	p.call(initLine)
	a := p.openSession(10)
	_, r := p.turnUpdates(20, a, "hello")
	require.Nil(t, r.Error)
	p.awaitEvent("evicting", "session", a)
	rs := decodeResponse(t, p.call(newSessionLine(11)))
	require.NotNil(t, rs.Error, "a new thread under the evicted thread's id")
	assert.Contains(t, rs.Error.Message, "already live on this connection")
	_, r = p.turnUpdates(21, a, "mine")
	require.Nil(t, r.Error, "the evicted thread, reopened")
	p.close()
}

// Verify the thread rules on acpbridge children: a thread whose process
// died, loaded again and closed, is closed (a later prompt is not served);
// an evicted thread's delete deletes it; the spares are started again
// after evictions.
func TestFanoutHostile_threadRules(t *testing.T) {
	t.Parallel()
	p := startProcess(t, nil, "--fanout", "--idle-timeout", "300ms", "--log-level", "debug", "--model", "replay:"+writeFixture(t,
		`{"chunks":[{"text":"Once."}]}`, `{"chunks":[{"text":"Twice."}]}`))
	p.call(initLine)
	a, b := p.openSession(10), p.openSession(11)
	require.NoError(t, syscall.Kill(holder(t, p.state, a), syscall.SIGKILL))
	p.awaitEvent("child_ended")
	p.send(load(20, a))
	_, rs, _ := p.collect(20)
	require.Nil(t, rs[20].Error, "the load of the thread whose process died")
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":21,"method":"session/close","params":{"sessionId":%q}}`, a))
	_, rs, _ = p.collect(21)
	require.Nil(t, rs[21].Error)
	p.send(prompt(22, a, "after the close"))
	_, rs, _ = p.collect(22)
	require.NotNil(t, rs[22].Error, "a prompt to the closed thread")
	assert.Contains(t, rs[22].Error.Message, "not open on this connection")

	// A resume of thread b, open (or evicted meanwhile), is a reattach:
	// answered with its state, no history replayed.
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":24,"method":"session/resume","params":{"sessionId":%q,"cwd":"/tmp"}}`, b))
	ups, rs, _ := p.collect(24)
	require.Nil(t, rs[24].Error, "the resume of an open thread")
	assert.Contains(t, string(rs[24].Result), `"currentModeId"`, "its state")
	assert.Empty(t, ups, "no history replayed")

	p.awaitEvent("evicting", "session", b)
	assertGone(t, holder(t, p.state, b), "the evicted thread's process")
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":23,"method":"session/delete","params":{"sessionId":%q}}`, b))
	_, rs, _ = p.collect(23)
	require.Nil(t, rs[23].Error, "the delete of an evicted thread")
	assert.NoFileExists(t, p.state+"/sessions/"+b+".jsonl")
	require.Eventually(t, func() bool { return len(acpbridgeChildren(t, p.cmd.Process.Pid)) == 2 }, hang, 10*time.Millisecond,
		"two spares started again after the evictions: %v", acpbridgeChildren(t, p.cmd.Process.Pid))
	p.close()
}

// acpbridgeChildren are the child acpbridge processes the router runs.
func acpbridgeChildren(t *testing.T, router int) []int {
	t.Helper()
	return childrenWhere(t, router, func(cmdline string) bool { return !strings.Contains(cmdline, "__acpbridge_keeper") })
}

// Verify that spares killed while they wait are replaced and never handed
// a request: session/list and a new thread are served after both die.
func TestFanoutHostile_sparesKilled(t *testing.T) {
	t.Parallel()
	p := startFanout(t, `{"chunks":[{"text":"Fine."}]}`)
	p.call(initLine)
	var spares []int
	require.Eventually(t, func() bool { spares = acpbridgeChildren(t, p.cmd.Process.Pid); return len(spares) == 2 }, hang, 10*time.Millisecond)
	for _, pid := range spares {
		// A spare already gone (ESRCH) is as good as killed: what is
		// checked is that the router replaces it and hands it nothing.
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("killing spare %d: %v", pid, err)
		}
	}
	if !assert.Eventually(t, func() bool {
		now := acpbridgeChildren(t, p.cmd.Process.Pid)
		return len(now) == 2 && !slices.Contains(now, spares[0]) && !slices.Contains(now, spares[1])
	}, hang, 10*time.Millisecond, "two new spares") {
		t.Fatalf("the router's children %v (the spares killed: %v)\nits stderr:\n%s\nits events:\n%s", acpbridgeChildren(t, p.cmd.Process.Pid), spares, p.stderr.String(), p.events.String())
	}
	r := decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}`))
	require.Nil(t, r.Error, "session/list after the spares died")
	sid := p.openSession(6)
	_, r = p.turnUpdates(7, sid, "hello")
	require.Nil(t, r.Error, "a thread after the spares died")
	p.close()
}

// Verify that a load of an open thread while something of it is in flight
// (a permission request open at the client) is refused at once, saying so,
// and that the thread goes on; once idle, the load reopens it.
func TestFanoutHostile_loadWhileAsking(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, nil)
	p.call(initLine)
	a := p.openSession(10)
	p.send(prompt(20, a, "please ask"))
	var ask struct{ ID json.RawMessage }
	require.NoError(t, json.Unmarshal(p.await(`{"method":"session/request_permission"}`), &ask))
	r := decodeResponse(t, p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":21,"method":"session/load","params":{"sessionId":%q,"cwd":"/tmp","mcpServers":[]}}`, a)))
	require.NotNil(t, r.Error, "a load of a thread waiting on its permission request")
	assert.Contains(t, r.Error.Message, "has a prompt or another request in flight")
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"yes"}}}`, ask.ID))
	_, rs, _ := p.collect(20)
	assert.Equal(t, "end_turn", stopReason(t, rs[20]))
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":22,"method":"session/load","params":{"sessionId":%q,"cwd":"/tmp","mcpServers":[]}}`, a))
	ups, rs, _ := p.collect(22)
	require.Nil(t, rs[22].Error, "the load once the thread is idle")
	require.NotEmpty(t, ups, "its replay, before the answer")
	assert.Equal(t, "user_message_chunk", ups[0]["sessionUpdate"])
	p.close()
}

// Verify that a client's load whose process dies before answering it is
// answered with an error saying so (no spare: the loading process is the
// only one).
func TestFanoutHostile_loadingProcessDies(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--spares", "0", "--log-level", "debug"}, "-load-hang")
	p.call(initLine)
	a := p.openSession(10)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":11,"method":"session/close","params":{"sessionId":%q}}`, a))
	p.collect(11)
	assertGone(t, agentPid(t, a), "the closed thread's process")
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":20,"method":"session/load","params":{"sessionId":%q,"cwd":"/tmp","mcpServers":[]}}`, a))
	var loading []int
	require.Eventually(t, func() bool { loading = agentChildren(t, p.cmd.Process.Pid); return len(loading) == 1 }, hang, 10*time.Millisecond)
	p.awaitEvent("reopening")
	require.NoError(t, syscall.Kill(loading[0], syscall.SIGKILL))
	_, rs, _ := p.collect(20)
	require.NotNil(t, rs[20].Error, "the load its process died in")
	assert.Contains(t, rs[20].Error.Message, "could not be opened in a new process: the process ended")
	p.send(prompt(21, a, "hello"))
	_, rs, _ = p.collect(21)
	require.NotNil(t, rs[21].Error)
	assert.Contains(t, rs[21].Error.Message, "not open on this connection", "the thread was never opened here")
	p.close()
}

// Verify that the spares are started again after a client's load takes
// one, as after a session/new.
func TestFanoutHostile_sparesAfterLoad(t *testing.T) {
	t.Parallel()
	p := startProcess(t, nil, "--fanout", "--spares", "1", "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"Once."}]}`))
	p.call(initLine)
	a := p.openSession(10)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":11,"method":"session/close","params":{"sessionId":%q}}`, a))
	p.collect(11)
	require.Eventually(t, func() bool { return len(acpbridgeChildren(t, p.cmd.Process.Pid)) == 1 }, hang, 10*time.Millisecond, "the spare alone")
	p.send(load(12, a))
	_, rs, _ := p.collect(12)
	require.Nil(t, rs[12].Error)
	require.Eventually(t, func() bool { return len(acpbridgeChildren(t, p.cmd.Process.Pid)) == 2 }, hang, 10*time.Millisecond,
		"the loaded thread's process and a new spare")
	p.close()
}

// Verify that a session/cancel for a child whose queue is full (it stopped
// reading while its turn waits) is not lost: the turn the user stopped is
// answered cancelled by the router at once, and the requests queued before
// it keep their answers.
func TestFanoutHostile_cancelPastAFullQueue(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--max-line-bytes", "1048576"})
	p.call(initLine)
	a := p.openSession(10)
	p.send(prompt(20, a, "stop reading, wait"))
	p.await(`{"method":"session/update","params":{"update":{"content":{"text":"One, "}}}}`)
	var lines []string
	for i := range 16 {
		lines = append(lines, bigPrompt(30+i, a, 300<<10))
	}
	p.sendTogether(lines...)
	p.await(`{"id":45}`) // past the bound: refused, so the queue is full
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, a))
	r := decodeResponse(t, p.await(`{"id":20}`))
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{"stopReason":"cancelled"}`, string(r.Result), "the stopped turn")
	p.close()
}

// Verify that an agent that exits at every start (a bad flag, a missing
// config) is not started again for ever: after a few starts, backing off,
// the router stops until the client asks for something, and the client is
// told why, with the agent's stderr.
func TestFanoutHostile_agentExitsAtStartBacksOff(t *testing.T) {
	t.Parallel()
	starts := filepath.Join(t.TempDir(), "starts")
	p := startProcess(t, nil, "--fanout", "--", "sh", "-c", `echo started >> "$0"; echo "oneagent: no config file" >&2; exit 2`, starts)
	r := decodeResponse(t, p.call(initLine))
	require.NotNil(t, r.Error, "no agent answered initialize")
	assert.Contains(t, r.Error.Message, "no config file", "the agent's stderr")
	p.awaitEvent("warming_stopped")
	b, err := os.ReadFile(starts)
	require.NoError(t, err)
	n := strings.Count(string(b), "started")
	assert.LessOrEqual(t, n, 6, "starts before the router stopped starting it")
	r = decodeResponse(t, p.call(strings.Replace(initLine, `"id":0`, `"id":1`, 1)))
	require.NotNil(t, r.Error, "the client asks again")
	assert.Contains(t, r.Error.Message, "no config file", "and is told why")
	p.close()
}

// Verify that an agent that hangs at initialize at every start after its
// first is not started again for ever while the client waits for nothing:
// each spare is ended at the bound and counts as a start that failed, so
// after a few the router stops starting them (warming_stopped), and the
// thread the first process serves goes on.
func TestFanoutHostile_agentHangsAtInitializeBacksOff(t *testing.T) {
	t.Parallel()
	first := filepath.Join(t.TempDir(), "first")
	p := startProcessWith(t, nil, func(cmd *exec.Cmd, _ *testAgent) {
		cmd.Env = append(os.Environ(), "ONEAGENT_STATE="+t.TempDir()) // its sessions there, not in the router's directory
	}, "--fanout", "--reopen-timeout", "1s", "--state-dir", t.TempDir(), "--",
		"sh", "-c", `if [ -e "$0" ]; then exec sleep 3600; fi; touch "$0"; exec "$1"`, first, oneAgent(t))
	p.call(initLine)
	a := p.openSession(1)
	p.awaitEvent("warming_stopped")
	assert.LessOrEqual(t, strings.Count(p.events.String(), `"event":"init_timeout"`), 6, "spares ended at the bound before the router stopped starting them")
	_, r := p.turnUpdates(2, a, "still here")
	require.Nil(t, r.Error, "the thread the first process serves")
	p.close()
}

// Verify what the user is told when a thread's agent process crashes: the
// running prompt's error says so and that the thread comes back; the next
// prompt reopens it, and a client that opted into notices gets one for the
// session (none without the opt-in); a thread whose process crashes at
// every turn is closed after a few, with the reason, not restarted for
// ever.
func TestFanoutHostile_crashToldAndBounded(t *testing.T) {
	t.Parallel()
	for _, optIn := range []bool{true, false} {
		p := startRoutedWith(t, nil)
		init := initLine
		if optIn {
			init = strings.Replace(initLine, `"clientCapabilities":{}`, `"clientCapabilities":{"session":{"notices":{}}}`, 1)
		}
		p.call(init)
		a := p.openSession(10)
		p.send(prompt(20, a, "crash with helper"))
		_, rs, _ := p.collect(20)
		require.NotNil(t, rs[20].Error)
		assert.Contains(t, rs[20].Error.Message, "the session is reopened in a new process on its next request")
		ups, r := p.turnUpdates(21, a, "back?")
		require.Nil(t, r.Error, "reopened")
		notice := `"sessionUpdate":"notice","severity":"warning","title":"The agent's process ended, and was restarted"`
		if !optIn {
			assert.NotContains(t, strings.Join(ups, "\n"), `"notice"`, "no notice without the opt-in")
			p.close()
			continue
		}
		assert.Contains(t, strings.Join(ups, "\n"), notice, "told, for that session")
		for i := range 4 {
			p.send(prompt(30+i, a, "crash with helper"))
			_, rs, _ = p.collect(30 + i)
		}
		last := rs[33]
		require.NotNil(t, last.Error)
		assert.Contains(t, last.Error.Message, "so the thread is closed", "the fourth crash in a row")
		_, r = p.turnUpdates(40, a, "again?")
		require.NotNil(t, r.Error, "a closed thread is not reopened")
		p.close()
	}
}

// Verify that an editor that stops reading holds the router to a bound, not
// to what its threads' agents write: 12 updates of 2 MiB for the thread's
// own session while the client reads nothing stop at the child's pipe (the
// router says it holds the child's output, and how much: at most its bound
// and two lines), and once the client reads again every update arrives
// whole and in order. (The peak RSS with 40 updates of 3 MiB is in
// docs/reliability.md; a memory bound here would sit in a loaded
// machine's noise.)
func TestFanoutHostile_slowEditor(t *testing.T) {
	t.Parallel()
	const n, size = 12, 2 << 20
	p := heldAtBound(t, fmt.Sprintf("burst %d of %d", n, size), size)
	ups, r := p.updatesUntil(20)
	require.Nil(t, r.Error)
	var got []string
	for _, u := range ups {
		var m struct{ Content struct{ Text string } }
		require.NoError(t, json.Unmarshal([]byte(u), &m))
		if len(m.Content.Text) == 4+size {
			got = append(got, m.Content.Text[:4])
		}
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("%03d:", i)
	}
	assert.Equal(t, want, got, "every update, whole and in order")
	p.close()
}

// Verify that a thread's requests to the client are held to the same bound
// as its updates, and reach the client where the agent wrote them: 12
// permission requests of 2 MiB written at once, their answers not awaited,
// while the client reads nothing stop at the child's pipe (the router says
// it holds the child's output); once the client reads, every request
// arrives whole, in order, and before the turn's answer, which the agent
// wrote after them.
func TestFanoutHostile_slowEditorRequests(t *testing.T) {
	t.Parallel()
	const n, size = 12, 2 << 20
	p := heldAtBound(t, fmt.Sprintf("permits %d of %d", n, size), size)
	var got []string
	for {
		line := p.next("the requests and the answer 20")
		require.NotNil(t, line, "EOF before the answer")
		var m struct {
			ID     json.RawMessage
			Method string
			Params struct{ ToolCall struct{ Title string } }
		}
		require.NoError(t, json.Unmarshal(line, &m))
		if m.Method == "session/request_permission" {
			require.Len(t, m.Params.ToolCall.Title, 4+size, "a request whole")
			got = append(got, m.Params.ToolCall.Title[:4])
		}
		if m.Method == "" && string(m.ID) == "20" {
			break
		}
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("%03d:", i)
	}
	assert.Equal(t, want, got, "every request, whole, in order, before the turn's answer")
	p.close()
}

// Verify that the router's memory is bounded as a whole, not a bound per
// thread: sixteen threads each writing 4 updates of 1 MiB while the
// editor reads nothing hold the router to one budget. Every time a child
// is read no further, the router says what all its children hold: at most
// the budget and one line, where a bound per child let sixteen hold
// sixteen. Once the editor reads again, every update of every thread
// arrives whole and in order. (Peak RSS figures, one thread and sixteen,
// are in docs/reliability.md.)
func TestFanoutHostile_slowEditorSixteenThreads(t *testing.T) {
	t.Parallel()
	const threads, n, size = 16, 4, 1 << 20
	p := startRoutedWith(t, []string{"--max-children", "20", "--spares", "0"})
	p.call(initLine)
	var sessions []string
	for i := range threads {
		sessions = append(sessions, p.openSession(10+i))
	}
	p.reading.pause()
	var prompts []string
	for i, s := range sessions {
		prompts = append(prompts, prompt(100+i, s, fmt.Sprintf("burst %d of %d", n, size)))
	}
	p.sendTogether(prompts...)
	held := func() map[int]int { // the most all children held, by the pid that waited (-1: not said)
		most := map[int]int{}
		for _, line := range strings.Split(p.events.String(), "\n") {
			var ev struct {
				Event    string
				Pid, All *int
			}
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Event == "child_output_held" {
				all := -1
				if ev.All != nil {
					all = *ev.All
				}
				if was, seen := most[*ev.Pid]; !seen || all > was {
					most[*ev.Pid] = all
				}
			}
		}
		return most
	}
	require.Eventually(t, func() bool { return len(held()) == threads }, hang, 20*time.Millisecond,
		"every thread's agent is read no further while the editor reads nothing")
	for pid, all := range held() {
		assert.GreaterOrEqual(t, all, 0, "child_output_held says what all children hold")
		assert.LessOrEqual(t, all, 2<<20+size+64<<10, "what all children hold when the agent %d waits: the budget and one line", pid)
	}
	p.reading.unpause()

	got := map[string][]string{}
	answered := 0
	for answered < threads {
		line := p.next("the sixteen turns' answers")
		require.NotNil(t, line, "EOF before the answers")
		var m struct {
			ID     json.RawMessage
			Method string
			Params struct {
				SessionID string
				Update    struct{ Content struct{ Text string } }
			}
		}
		require.NoError(t, json.Unmarshal(line, &m))
		if text := m.Params.Update.Content.Text; m.Method == "session/update" && len(text) == 4+size {
			got[m.Params.SessionID] = append(got[m.Params.SessionID], text[:4])
		}
		if m.Method == "" && m.ID != nil {
			require.Nil(t, decodeResponse(t, line).Error)
			answered++
		}
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("%03d:", i)
	}
	for _, s := range sessions {
		assert.Equal(t, want, got[s], "every update of session %s, whole and in order", s)
	}
	p.close()
}

// Verify that an agent that stops writing in the middle of a long line
// holds up no other thread: thread A's agent writes 3 MiB of a line and
// nothing more (its line passes the budget, alone, then stops), and thread
// B's turns still reach the editor whole: 20 updates of 500 kB (within a
// child's share), then 3 of 1.5 MB (each past it: passing in A's stead).
func TestFanoutHostile_stalledLineHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, nil)
	p.call(initLine)
	a, b := p.openSession(10), p.openSession(11)
	p.send(prompt(20, a, "stall 3"))
	p.awaitEvent("child_line_passes") // A's, at its share: nothing else is being read
	for i, turn := range []struct{ n, size int }{{20, 500000}, {3, 1500000}} {
		ups, r := p.turnUpdates(21+i, b, fmt.Sprintf("burst %d of %d", turn.n, turn.size))
		require.Nil(t, r.Error)
		whole := 0
		for _, u := range ups {
			var m struct{ Content struct{ Text string } }
			require.NoError(t, json.Unmarshal([]byte(u), &m))
			if len(m.Content.Text) == 4+turn.size {
				whole++
			}
		}
		assert.Equal(t, turn.n, whole, "every update of thread B, whole: %d of %d bytes", turn.n, turn.size)
	}
	require.NoError(t, syscall.Kill(agentPid(t, a), syscall.SIGKILL))
	p.close()
}

// heldAtBound opens a thread and prompts it with text (lines of size bytes
// each from its agent) while the client reads nothing: the router must
// say it holds the child's output, at most its bound and two lines. The
// client reads again when it returns.
func heldAtBound(t *testing.T, text string, size int) *procAgent {
	t.Helper()
	p := startRoutedWith(t, nil)
	p.call(initLine)
	a := p.openSession(10)
	p.reading.pause()
	p.send(prompt(20, a, text))
	p.awaitEvent("child_output_held")
	held := eventInt(t, p.events.String(), "child_output_held", "bytes")
	assert.LessOrEqual(t, held, 1<<20+2*(size+1024), "what the router holds of the child while the client reads nothing")
	p.reading.unpause()
	return p
}

// eventInt is the integer attribute key of the first event name seen.
func eventInt(t *testing.T, events, name, key string) int {
	t.Helper()
	for _, line := range strings.Split(events, "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) == nil && ev["event"] == name {
			v, ok := ev[key].(float64)
			require.True(t, ok, "the event %s has no number %s: %s", name, key, line)
			return int(v)
		}
	}
	t.Fatalf("no event %s", name)
	return 0
}

// Verify that a request naming no session, withdrawn while the process
// started for it alone (no spare left: --spares 0, the one that answered
// initialize taken by a thread) is not ready yet, is answered -32800 and
// that process ends: it no longer counts toward --max-children, and a
// second thread opens in its place.
func TestFanoutHostile_withdrawnSessionlessEnds(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--spares", "0", "--max-children", "2"}, "-start-delay", "1s")
	p.call(initLine)
	a := p.openSession(1)
	p.sendTogether(`{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`, cancelRequest(2))
	r := decodeResponse(t, p.await(`{"id":2}`))
	require.NotNil(t, r.Error)
	assert.Equal(t, -32800, r.Error.Code)
	require.Eventually(t, func() bool { return slices.Equal(agentChildren(t, p.cmd.Process.Pid), []int{agentPid(t, a)}) }, hang, 20*time.Millisecond,
		"the process started for the withdrawn request ends; the thread's stays")
	b := p.openSession(3)
	_, r2 := p.turnUpdates(4, b, "hello")
	require.Nil(t, r2.Error, "a second thread, within --max-children 2")
	p.close()
}

// Verify that a session/new withdrawn while it waits for a process slot
// (--max-children: an idle thread's process ends for it), its id sent again
// at once for another project, opens the second project's session, not the
// first's: the wait is the request's own, not its id's; and the process
// the withdrawn one was given serves the one sent again.
func TestFanoutHostile_withdrawnNewIDReused(t *testing.T) {
	t.Parallel()
	other := t.TempDir()
	p := startProcess(t, nil, "--fanout", "--spares", "0", "--max-children", "2", "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"Streaming"},{"delayMs":600000}]}`))
	p.call(initLine)
	p.openSession(10)
	busy := p.openSession(11)
	p.send(prompt(50, busy, "busy"))
	p.await(fmt.Sprintf(`{"params":{"sessionId":%q,"update":{"content":{"text":"Streaming"}}}}`, busy))
	p.sendTogether(`{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}`)
	first := decodeResponse(t, p.await(`{"id":5}`))
	require.NotNil(t, first.Error, "the withdrawn one")
	assert.Equal(t, -32800, first.Error.Code)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, other))
	second := decodeResponse(t, p.await(`{"id":5}`))
	require.Nil(t, second.Error, "the one sent again")
	var res struct{ SessionID string }
	require.NoError(t, json.Unmarshal(second.Result, &res))
	r := decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":6,"method":"session/list","params":{}}`))
	require.Nil(t, r.Error)
	assert.Contains(t, string(r.Result), fmt.Sprintf(`"sessionId":%q,"cwd":%q`, res.SessionID, other), "the second project's session")
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, busy))
	p.close()
}

// Verify the crash of a thread whose agent the router's table says cannot
// reopen a session in a new process (gemini-cli through 0.61.0): the
// running prompt's error says the thread is lost and cannot come back, not
// that it comes back, and a client that opted into notices is told so;
// its next request is answered so at once, with no process started for it.
func TestFanoutHostile_crashOfAnAgentThatCannotReopen(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, nil, "-name", "gemini-cli", "-version", "0.61.0")
	p.call(strings.Replace(initLine, `"clientCapabilities":{}`, `"clientCapabilities":{"session":{"notices":{}}}`, 1))
	a := p.openSession(10)
	p.send(prompt(20, a, "crash with helper"))
	_, rs, _ := p.collect(20)
	require.NotNil(t, rs[20].Error)
	assert.Contains(t, rs[20].Error.Message, "the thread is lost, and cannot come back: gemini-cli 0.61.0 cannot reopen a session in a new process")
	assert.NotContains(t, rs[20].Error.Message, "reopened in a new process on its next request")
	notice := p.await(fmt.Sprintf(`{"params":{"sessionId":%q,"update":{"sessionUpdate":"notice","severity":"error"}}}`, a))
	assert.Contains(t, string(notice), "this thread must be started again")
	_, r := p.turnUpdates(21, a, "back?")
	require.NotNil(t, r.Error, "the thread does not come back")
	assert.Contains(t, r.Error.Message, "the thread cannot come back: gemini-cli 0.61.0 cannot reopen")
	assert.False(t, p.hasEvent("reopening"), "no process is started to reopen it")
	p.close()
}

// Verify that a thread whose agent dies at every reopen is not reopened for
// ever: the deaths at reopening count as a flapping thread's do, and after
// the same bound the thread is closed, with the error notice to a client
// that opted in; each request meanwhile is answered with why.
func TestFanoutHostile_deathAtEveryReopenBounded(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--spares", "1"}, "-load-dies")
	p.call(strings.Replace(initLine, `"clientCapabilities":{}`, `"clientCapabilities":{"session":{"notices":{}}}`, 1))
	a := p.openSession(10)
	_, r := p.turnUpdates(20, a, "crash with helper")
	require.NotNil(t, r.Error, "the first crash")
	var told []string
	for i := range 6 {
		ups, r := p.turnUpdates(30+i, a, "back?")
		require.NotNil(t, r.Error, "a reopen that dies")
		told = append(told, ups...)
		t.Logf("%d: %s", i, r.Error.Message)
		if r.Error.Code == -32002 {
			break // the thread is closed: unknown from now on
		}
	}
	all := strings.Join(told, "\n")
	assert.Contains(t, all, `"severity":"error","title":"The agent's process keeps ending; this thread was closed"`, "closed after the flapping bound, and told")
	_, r = p.turnUpdates(40, a, "again?")
	require.NotNil(t, r.Error)
	assert.Equal(t, -32002, r.Error.Code, "a closed thread is not reopened again")
	p.close()
}

// Verify that a client's load of a live thread, waiting for the thread's
// old process to close (an agent slow to close), is answered when the
// router ends meanwhile (stdin's end): with an error saying to send it
// again, once, before the router's output ends.
func TestFanoutHostile_loadWaitingAtTheEndAnswered(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, nil, "-close-late", "2s")
	p.call(initLine)
	a := p.openSession(10)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":11,"method":"session/load","params":{"sessionId":%q,"cwd":"$CWD","mcpServers":[]}}`, a))
	p.close() // stdin's end while the load waits; reads to the end of output
	answers := 0
	for _, l := range p.got {
		var r struct {
			ID     json.RawMessage
			Method string
			Error  *struct{ Message string }
		}
		if json.Unmarshal(l, &r) == nil && string(r.ID) == "11" && r.Method == "" {
			answers++
			require.NotNil(t, r.Error, "%s", l)
			assert.Contains(t, r.Error.Message, "send session/load again to a new acpbridge")
		}
	}
	assert.Equal(t, 1, answers, "the load is answered once")
}

// Verify that a client's load of a live thread whose agent cannot reopen a
// session in a new process (it offers neither session/load nor resume; or
// the agents table says so) is served by the thread's own process: the
// process is not killed for it, and the thread keeps it.
func TestFanoutHostile_loadKeepsAThreadThatCannotReopen(t *testing.T) {
	t.Parallel()
	for _, flags := range [][]string{{"-no-load"}, {"-name", "gemini-cli", "-version", "0.61.0"}} {
		p := startRoutedWith(t, nil, flags...)
		p.call(initLine)
		a := p.openSession(10)
		_, r := p.turnUpdates(20, a, "first")
		require.Nil(t, r.Error)
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":11,"method":"session/load","params":{"sessionId":%q,"cwd":"$CWD","mcpServers":[]}}`, a))
		_, rs, _ := p.collect(11)
		require.Nil(t, rs[11].Error, "%v: the load, served by the thread's own process", flags)
		_, r = p.turnUpdates(21, a, "same process?")
		require.Nil(t, r.Error)
		p.close()
		assert.False(t, p.hasEvent("evicting", "session", a), "%v: its process is not killed for the load", flags)
		assert.Equal(t, []int{agentPid(t, a)}, heldBy(t, p.testAgent, a), "%v: the one process it ever had", flags)
	}
}
