//go:build linux

// fanout_test.go tests --fanout on the built binary with real child
// processes: concurrent sessions with interleaved streams, permission
// requests of two sessions in flight at once, close ending a child, load in
// a new child, a child killed, EOF with live turns, kill -9 of the router,
// the spares refilled once threads open, sixty failing openings in one write.
// Every line the router writes is validated against the schema.

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/acp"
	"acpbridge/internal/proc"
)

// startFanout runs the router with a replay fixture.
func startFanout(t *testing.T, entries ...string) *procAgent {
	t.Helper()
	return startProcess(t, nil, "--fanout", "--model", "replay:"+writeFixture(t, entries...))
}

// openSession creates a session through the router and returns its id.
func (ta *testAgent) openSession(id int) string {
	ta.t.Helper()
	ta.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`, id))
	_, rs, _ := ta.collect(id)
	require.Nil(ta.t, rs[id].Error, "session/new through the router")
	var res struct{ SessionID string }
	require.NoError(ta.t, json.Unmarshal(rs[id].Result, &res))
	return res.SessionID
}

// holder is the pid of the process that holds a session (its lock file).
func holder(t *testing.T, state, sid string) int {
	b, err := os.ReadFile(filepath.Join(state, "sessions", sid+".lock"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err, "lock file %q", b)
	return pid
}

// bySession groups updates by session, each as its text chunks joined.
func textBySession(t *testing.T, lines [][]byte) map[string]string {
	out := map[string]string{}
	for _, l := range lines {
		var m struct {
			Method string
			Params struct {
				SessionID string
				Update    struct {
					SessionUpdate string
					Content       json.RawMessage
				}
			}
		}
		require.NoError(t, json.Unmarshal(l, &m))
		if m.Method != acp.MethodSessionUpdate || m.Params.Update.SessionUpdate != "agent_message_chunk" {
			continue
		}
		var c struct{ Text string }
		json.Unmarshal(m.Params.Update.Content, &c)
		out[m.Params.SessionID] += c.Text
	}
	return out
}

// Verify three sessions prompting at once (one write): each answers from
// its own process, its updates in order, the streams interleaved on one
// connection.
func TestFanout_concurrentSessions(t *testing.T) {
	t.Parallel()
	p := startFanout(t, `{"chunks":[{"text":"one "},{"delayMs":20},{"text":"two "},{"delayMs":20},{"text":"three"}]}`)
	p.call(initLine)
	var sids []string
	for i := range 3 {
		sids = append(sids, p.openSession(10+i))
	}
	pids := map[int]bool{}
	for _, sid := range sids {
		pids[holder(t, p.state, sid)] = true
	}
	assert.Len(t, pids, 3, "each session in a process of its own")
	start := len(p.got)
	p.sendTogether(prompt(20, sids[0], "a"), prompt(21, sids[1], "b"), prompt(22, sids[2], "c"))
	_, rs, _ := p.collect(20, 21, 22)
	for id := 20; id <= 22; id++ {
		assert.Equal(t, "end_turn", stopReason(t, rs[id]))
	}
	texts := textBySession(t, p.got[start:])
	for _, sid := range sids {
		assert.Equal(t, "one two three", texts[sid], "session %s's stream", sid)
	}
	p.close()
}

// Verify two permission requests in flight at once, from two sessions,
// answered differently: each answer reaches its own session.
func TestFanout_permissions(t *testing.T) {
	t.Parallel()
	p := startFanout(t, `{"chunks":[{"toolCall":{"id":"w","name":"write_file","input":{"path":"PLACE","content":"x"}}}]}`, `{"chunks":[{"text":"Done."}]}`)
	// Each session writes its own file: PLACE is resolved per session by
	// giving each its own cwd.
	p.call(initLine)
	dirs := []string{t.TempDir(), t.TempDir()}
	var sids []string
	for i, d := range dirs {
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, 10+i, d))
		_, rs, _ := p.collect(10 + i)
		require.Nil(t, rs[10+i].Error)
		var res struct{ SessionID string }
		require.NoError(t, json.Unmarshal(rs[10+i].Result, &res))
		sids = append(sids, res.SessionID)
	}
	p.sendTogether(prompt(20, sids[0], "write"), prompt(21, sids[1], "write"))
	asks := map[string]string{} // session → the request's id on the connection
	for len(asks) < 2 {
		line := p.await(`{"method":"session/request_permission"}`)
		var m struct {
			ID     json.RawMessage
			Params struct{ SessionID string }
		}
		require.NoError(t, json.Unmarshal(line, &m))
		asks[m.Params.SessionID] = string(m.ID)
	}
	require.NotEqual(t, asks[sids[0]], asks[sids[1]], "the two requests share an id on the connection")
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`, asks[sids[0]]))
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"reject_once"}}}`, asks[sids[1]]))
	_, rs, _ := p.collect(20, 21)
	assert.Equal(t, "end_turn", stopReason(t, rs[20]))
	assert.Equal(t, "end_turn", stopReason(t, rs[21]))
	assert.FileExists(t, filepath.Join(dirs[0], "PLACE"), "the allowed write")
	assert.NoFileExists(t, filepath.Join(dirs[1], "PLACE"), "the rejected write")
	p.close()
}

// Verify that session/close ends the session's child, and that load opens
// it in a new child that replays it before answering; a second load of the
// thread, open on the connection, reopens it in a new process with its
// replay; its delete closes it, then deletes it.
func TestFanout_closeAndLoad(t *testing.T) {
	t.Parallel()
	p := startFanout(t, `{"chunks":[{"text":"Answer."}]}`+"\n"+`{"chunks":[{"text":"Again."}]}`)
	p.call(initLine)
	sid := p.openSession(10)
	p.send(prompt(11, sid, "question"))
	p.collect(11)
	pid := holder(t, p.state, sid)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":12,"method":"session/close","params":{"sessionId":%q}}`, sid))
	_, rs, _ := p.collect(12)
	require.Nil(t, rs[12].Error)
	assertGone(t, pid, "the closed session's process")

	p.send(load(13, sid))
	ups, rs, _ := p.collect(13)
	require.Nil(t, rs[13].Error, "load in a new child")
	require.Len(t, ups, 2, "the replay comes before the response")
	assert.Equal(t, "user_message_chunk", ups[0]["sessionUpdate"])
	assert.Equal(t, "agent_message_chunk", ups[1]["sessionUpdate"])
	assert.NotEqual(t, pid, holder(t, p.state, sid))

	// A load of the open thread reopens it in a new process, whose replay
	// reaches the client before the answer.
	pid = holder(t, p.state, sid)
	p.send(load(14, sid))
	ups, rs, _ = p.collect(14)
	require.Nil(t, rs[14].Error, "a load of the open thread")
	require.Len(t, ups, 2, "the replay again, before the response")
	assertGone(t, pid, "the process that served the thread before the load")
	p.send(prompt(19, sid, "again"))
	_, rs, _ = p.collect(19)
	require.Nil(t, rs[19].Error, "the thread goes on in its new process")

	// session/list and session/delete are served against the same store.
	p.send(`{"jsonrpc":"2.0","id":15,"method":"session/list","params":{}}`)
	_, rs, _ = p.collect(15)
	require.Nil(t, rs[15].Error)
	assert.Contains(t, string(rs[15].Result), sid)
	pid = holder(t, p.state, sid)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":16,"method":"session/delete","params":{"sessionId":%q}}`, sid))
	_, rs, _ = p.collect(16)
	require.Nil(t, rs[16].Error, "deleting the open thread closes it, then deletes it")
	// Its child was sent session/close: the third close in its log (the
	// client's close, the load's, the delete's).
	p.awaitEvents(3, "session_closed", "session", sid)
	assertGone(t, pid, "the deleted thread's process")
	p.send(prompt(18, sid, "gone"))
	_, rs, _ = p.collect(18)
	require.NotNil(t, rs[18].Error, "a prompt to the deleted thread")
	assert.Contains(t, rs[18].Error.Message, "not open on this connection")
	assert.NoFileExists(t, filepath.Join(p.state, "sessions", sid+".jsonl"))
	p.close()
}

// Verify that a child killed mid-turn fails its pending prompt with an
// error naming the session, that the thread's next prompt is answered (the
// router reopens the session in a new child, with session/resume, and the
// session goes on where its log stopped), and that the other sessions go
// on.
func TestFanout_childKilled(t *testing.T) {
	t.Parallel()
	p := startFanout(t, `{"chunks":[{"text":"Streaming"},{"delayMs":600000}]}`, `{"chunks":[{"text":"Back."}]}`)
	p.call(initLine)
	a, b := p.openSession(10), p.openSession(11)
	p.send(prompt(20, a, "long"))
	p.await(`{"params":{"update":{"content":{"text":"Streaming"}}}}`)
	require.NoError(t, syscall.Kill(holder(t, p.state, a), syscall.SIGKILL))
	_, rs, _ := p.collect(20)
	require.NotNil(t, rs[20].Error, "the prompt of a killed child")
	assert.Contains(t, rs[20].Error.Message, a)
	killed := holder(t, p.state, a)
	p.send(prompt(21, a, "again"))
	ups, rs, _ := p.collect(21)
	require.Nil(t, rs[21].Error, "the next prompt of a thread whose process died")
	assert.Equal(t, "end_turn", stopReason(t, rs[21]))
	assert.Contains(t, fmt.Sprint(ups), "Back.", "the session continued where its log stopped")
	assert.NotEqual(t, killed, holder(t, p.state, a), "in a new process")

	p.send(prompt(22, b, "still here"))
	p.await(`{"params":{"update":{"content":{"text":"Streaming"}}}}`)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, b))
	_, rs, _ = p.collect(22)
	assert.Equal(t, "cancelled", stopReason(t, rs[22]))
	p.close()
}

// Verify that stdin EOF with turns running in two children answers both
// prompts cancelled, ends every child, and exits 0.
func TestFanout_eofWithLiveTurns(t *testing.T) {
	t.Parallel()
	p := startFanout(t, `{"chunks":[{"text":"Streaming"},{"delayMs":600000}]}`)
	p.call(initLine)
	a, b := p.openSession(10), p.openSession(11)
	pids := []int{holder(t, p.state, a), holder(t, p.state, b)}
	p.sendTogether(prompt(20, a, "long"), prompt(21, b, "long"))
	for range 2 {
		p.await(`{"params":{"update":{"content":{"text":"Streaming"}}}}`)
	}
	p.stdin.Close()
	_, rs, _ := p.collect(20, 21)
	assert.Equal(t, "cancelled", stopReason(t, rs[20]))
	assert.Equal(t, "cancelled", stopReason(t, rs[21]))
	p.close() // asserts exit status 0
	for _, pid := range pids {
		assertGone(t, pid, "a child after EOF")
	}
	assert.Contains(t, lastTurnEnd(t, p.state, a), `"interrupted":true`)
}

// Verify stdin's EOF on a router with 100 sessions, each running a
// command: every child ends as one acpbridge does at EOF, however many end
// at once on however few cores: its prompt answered cancelled (by the
// child, or by the router for a child that ended first), its turn kept
// (the prompt and the command's call, written as they happened), and its
// end, where the child wrote it within the one second it has to exit,
// marked interrupted. On an idle machine every child writes its end
// (docs/reliability.md); a machine loaded far enough may leave one
// without it, and such a turn loads as an interrupted one
// (TestProcess_kill9MidTurn), so the end is not asserted for every child.
func TestFanout_eofWithManyCommands(t *testing.T) {
	t.Parallel()
	const n = 100
	p := startProcess(t, nil, "--fanout", "--max-children", strconv.Itoa(n+4), "--model",
		"replay:"+writeFixture(t, `{"chunks":[{"toolCall":{"id":"c","name":"run_command","input":{"command":"sleep 600"}}}]}`))
	p.call(initLine)
	var sids, lines []string
	for i := range n {
		sid := p.openSession(1000 + i)
		sids = append(sids, sid)
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, 2000+i, sid),
			prompt(3000+i, sid, "run it"))
	}
	p.sendTogether(lines...)
	for range n {
		p.await(`{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update","status":"in_progress"}}}`)
	}
	p.stdin.Close()
	ids := make([]int, n)
	for i := range ids {
		ids[i] = 3000 + i
	}
	_, rs, _ := p.collect(ids...)
	for i, sid := range sids {
		assert.Equal(t, "cancelled", stopReason(t, rs[3000+i]), "session %d's prompt", i)
		log, err := os.ReadFile(filepath.Join(p.state, "sessions", sid+".jsonl"))
		require.NoError(t, err)
		assert.Contains(t, string(log), `"text":"run it"`, "session %d's prompt, kept", i)
		assert.Contains(t, string(log), `"type":"tool_call"`, "session %d's command, kept", i)
		if end := lastTurnEnd(t, p.state, sid); end != "" {
			assert.Contains(t, end, `"interrupted":true`, "session %d's turn end", i)
		}
	}
	p.close() // asserts exit status 0
}

// Verify that kill -9 of the router ends its children (no orphans).
func TestFanout_kill9Router(t *testing.T) {
	t.Parallel()
	p := startFanout(t, `{"chunks":[{"text":"Streaming"},{"delayMs":600000}]}`)
	p.call(initLine)
	a := p.openSession(10)
	pid := holder(t, p.state, a)
	p.send(prompt(20, a, "long"))
	p.await(`{"params":{"update":{"content":{"text":"Streaming"}}}}`)
	kids := proc.Descendants(p.cmd.Process.Pid)
	require.Contains(t, kids, pid)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	p.drainKilled()
	for _, k := range kids {
		assertGone(t, k, "a child of the killed router")
	}
}

// Verify that the router answers bad input as acpbridge does and serves
// on: not JSON, a bad version, a request for an unknown session, an
// unknown method.
func TestFanout_badInput(t *testing.T) {
	t.Parallel()
	p := startFanout(t, `{"chunks":[{"text":"x"}]}`)
	p.call(initLine)
	for _, c := range []struct {
		line string
		id   string
		code int
	}{
		{`{"jsonrpc":"2.0","id":5,"method":"session/list","params":{`, `5`, -32700},
		{`{"jsonrpc":"1.0","id":6,"method":"session/list","params":{}}`, `6`, -32600},
		{`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}`, `7`, -32002},
		{`{"jsonrpc":"2.0","id":8,"method":"session/teleport","params":{}}`, `8`, -32601},
		{`{"jsonrpc":"2.0","id":9,"method":7}`, `9`, -32600},
	} {
		_, err := p.stdin.Write([]byte(c.line + "\n"))
		require.NoError(t, err)
		r := decodeResponse(t, p.await(`{"id":`+c.id+`}`))
		require.NotNil(t, r.Error, c.line)
		assert.Equal(t, c.code, r.Error.Code, c.line)
	}
	sid := p.openSession(10)
	// A request id reused while the first is in flight: the second is
	// refused, the first runs.
	p.sendTogether(prompt(30, sid, "first"), prompt(30, sid, "again"))
	var got []response
	for len(got) < 2 {
		got = append(got, decodeResponse(t, p.await(`{"id":30}`)))
	}
	var errs, results int
	for _, r := range got {
		if r.Error != nil {
			assert.Equal(t, -32600, r.Error.Code)
			errs++
		} else {
			results++
		}
	}
	assert.Equal(t, 1, errs, "the reused id")
	assert.Equal(t, 1, results, "the first request")
	p.close()
}

// Verify that sixty openings that fail (a relative cwd, an unknown session
// to load) in one write are each answered with an error, those over
// --max-children naming the flag, and that the router serves on: the next
// thread opens and the router exits 0.
func TestFanout_failingOpeningsInOneWrite(t *testing.T) {
	t.Parallel()
	p := startProcess(t, nil, "--fanout", "--max-children", "4", "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"x"}]}`))
	p.call(initLine)
	var lines []string
	var ids []int
	for i := range 60 {
		id := 100 + i
		ids = append(ids, id)
		if i%2 == 0 {
			lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"relative/dir","mcpServers":[]}}`, id))
		} else {
			lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/load","params":{"sessionId":"sess_nope%d","cwd":"$CWD","mcpServers":[]}}`, id, i))
		}
	}
	p.sendTogether(lines...)
	_, rs, _ := p.collect(ids...)
	for _, id := range ids {
		r := rs[id]
		require.NotNil(t, r.Error, "opening %d", id)
		switch {
		case strings.Contains(r.Error.Message, "--max-children 4"):
		case id%2 == 0:
			assert.Equal(t, -32602, r.Error.Code, "a relative cwd: %s", r.Error.Message)
		default:
			assert.Contains(t, r.Error.Message, "not found", "an unknown session")
		}
	}
	p.openSession(10)
	p.close()
}

// Verify that SIGTERM ends the router as stdin's EOF does: every live turn
// answered cancelled and persisted as interrupted, status 0.
func TestFanout_signal(t *testing.T) {
	t.Parallel()
	p := startFanout(t, `{"chunks":[{"text":"Streaming"},{"delayMs":600000}]}`)
	p.call(initLine)
	a, b := p.openSession(10), p.openSession(11)
	p.sendTogether(prompt(20, a, "long"), prompt(21, b, "long"))
	for range 2 {
		p.await(`{"params":{"update":{"content":{"text":"Streaming"}}}}`)
	}
	endBySignal(t, p, syscall.SIGTERM)
	for _, sid := range []string{a, b} {
		assert.Contains(t, lastTurnEnd(t, p.state, sid), `"interrupted":true`, "session %s", sid)
	}
}

// Verify that --max-children caps the router's processes, the warm spare
// included: with every thread busy, one more session/new is refused with an
// error naming the flag; session/list and session/delete still answer at
// the cap; and after a close a new thread opens again.
func TestFanout_maxChildren(t *testing.T) {
	t.Parallel()
	p := startProcess(t, nil, "--fanout", "--max-children", "2", "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"Streaming"},{"delayMs":600000}]}`))
	p.call(initLine)
	a := p.openSession(10)
	b := p.openSession(11)
	for i, sid := range []string{a, b} {
		p.send(prompt(50+i, sid, "busy"))
		p.await(fmt.Sprintf(`{"params":{"sessionId":%q,"update":{"content":{"text":"Streaming"}}}}`, sid))
	}
	p.send(`{"jsonrpc":"2.0","id":12,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`)
	_, rs, _ := p.collect(12)
	require.NotNil(t, rs[12].Error, "a third session/new over --max-children 2, no thread idle")
	assert.Contains(t, rs[12].Error.Message, "--max-children 2")
	// At the cap, what names no session is still answered (by a child of
	// the moment): the list shows both sessions, a delete is the agent's.
	r := decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":20,"method":"session/list","params":{}}`))
	require.Nil(t, r.Error, "session/list at the cap")
	assert.Equal(t, 2, strings.Count(string(r.Result), `"sessionId"`))
	r = decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":21,"method":"session/delete","params":{"sessionId":"sess_unknown"}}`))
	assert.Nil(t, r.Error, "session/delete at the cap is the agent's to answer")
	p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":13,"method":"session/close","params":{"sessionId":%q}}`, a))
	p.openSession(14)
	p.close()
}

// Verify that session/new requests waiting at --max-children are served in
// arrival order whenever a process or a thread frees, not only at the first
// process's end: with one thread idle and one in a turn, two session/new
// in one write; the first has the idle thread evicted and opens once its
// process ended; the second, which found nothing idle, opens once the busy
// thread's turn ends (here: cancelled) and its process gives way.
func TestFanout_waitersAtMaxChildrenServedInOrder(t *testing.T) {
	t.Parallel()
	p := startProcess(t, nil, "--fanout", "--spares", "0", "--max-children", "2", "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"Streaming"},{"delayMs":600000}]}`))
	p.call(initLine)
	idle := p.openSession(10)
	busy := p.openSession(11)
	p.send(prompt(50, busy, "busy"))
	p.await(fmt.Sprintf(`{"params":{"sessionId":%q,"update":{"content":{"text":"Streaming"}}}}`, busy))
	p.sendTogether(`{"jsonrpc":"2.0","id":12,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":13,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`)
	_, rs, _ := p.collect(12)
	require.Nil(t, rs[12].Error, "the first waits for the idle thread's process, then opens")
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, busy))
	_, rs, order := p.collect(50, 13)
	assert.JSONEq(t, `{"stopReason":"cancelled"}`, string(rs[50].Result))
	require.Nil(t, rs[13].Error, "the second opens once the busy thread is idle and gives way")
	assert.Equal(t, []int{50, 13}, order)
	// Both evicted threads are still the client's: they reopen on use.
	for i, sid := range []string{idle, busy} {
		r := decodeResponse(t, p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"ask"}}`, 60+i, sid)))
		assert.Nil(t, r.Error, "%s reopens", sid)
	}
	p.close()
}

// Verify that the spares are refilled once threads have opened: three
// session/new in one write are each served by a process of their own, two
// new spares then start and answer their initialize, and the next thread
// opens in one of them. The trace (a FIFO the router and its children all
// write) tells when a spare is ready without a wait on the clock.
func TestFanout_sparesRefilled(t *testing.T) {
	t.Parallel()
	trace := filepath.Join(t.TempDir(), "trace")
	mkfifo(t, trace)
	f, err := os.OpenFile(trace, os.O_RDWR, 0) // a reader that never blocks the writers' open
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	ready := readyChildren(t, f)
	p := startProcess(t, nil, "--fanout", "--trace", trace, "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"x"}]}`))
	p.call(initLine)
	router := p.cmd.Process.Pid
	first := map[int]bool{}
	for len(first) < 2 {
		if pid := nextReady(t, ready); pid != router {
			first[pid] = true
		}
	}
	p.sendTogether(newLine(10), newLine(11), newLine(12))
	_, rs, _ := p.collect(10, 11, 12)
	holders := map[int]bool{}
	for id := 10; id <= 12; id++ {
		require.Nil(t, rs[id].Error, "session/new %d", id)
		var res struct{ SessionID string }
		require.NoError(t, json.Unmarshal(rs[id].Result, &res))
		holders[holder(t, p.state, res.SessionID)] = true
	}
	assert.Len(t, holders, 3, "each thread in a process of its own")
	assert.NotContains(t, holders, router)
	refilled := map[int]bool{}
	for len(refilled) < 2 {
		if pid := nextReady(t, ready); pid != router && !holders[pid] && !first[pid] {
			refilled[pid] = true
		}
	}
	sid := p.openSession(13)
	assert.Contains(t, refilled, holder(t, p.state, sid), "the next thread opens in a refilled spare")
	p.close()
}

// Verify that the spares are held back from a turn. At the router's start
// one spare starts and the others wait for it to be ready or for the first
// thread; an editor opening a thread at its start (initialize and
// session/new in one write) has that thread's first turn run before any
// other spare starts; the spare replacing one a thread took waits for the
// thread's first turn, whose answer ends the wait; a thread that does not
// end a turn (none asked, or one that runs on) holds the spares back no
// longer than the router's bound. The router's log is one ordered stream:
// what it says between two of its events is what it did between them.
func TestFanout_sparesHeldFromTheFirstTurn(t *testing.T) {
	t.Parallel()
	p := startProcess(t, nil, "--fanout", "--log-level", "debug", "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"Quick."}]}`))
	p.sendTogether(initLine, newLine(10))
	_, rs, _ := p.collect(0, 10)
	require.Nil(t, rs[10].Error)
	var res struct{ SessionID string }
	require.NoError(t, json.Unmarshal(rs[10].Result, &res))
	_, r := p.turnUpdates(20, res.SessionID, "hello")
	require.Nil(t, r.Error)
	p.awaitEvents(3, "spare_started") // the first spare, then the second and the one replacing the first thread's
	log := p.events.String()
	started := func(log string) int { return strings.Count(log, eventText("spare_started")) }
	atStart := strings.Index(log, eventText("spares_waiting", "for", "the first spare or thread"))
	waited := strings.Index(log, eventText("spares_waited"))
	require.True(t, atStart >= 0 && waited > atStart, "the spares were held at the router's start:\n%s", log)
	assert.Equal(t, 1, started(log[:waited]), "more than one spare started before the first was ready or the first thread's turn ended:\n%s", log)

	sid := p.openSession(11)
	_, r = p.turnUpdates(21, sid, "hello")
	require.Nil(t, r.Error)
	p.awaitEvents(4, "spare_started")
	log = p.events.String()
	wait := strings.LastIndex(log, eventText("spares_waiting", "for", "the turns in flight"))
	require.True(t, wait >= 0, "the spares waited for the second thread's first turn:\n%s", log)
	waited = wait + strings.Index(log[wait:], eventText("spares_waited"))
	require.True(t, waited > wait, "the second thread's wait ended:\n%s", log)
	assert.Equal(t, 3, started(log[:waited]), "a spare started before the second thread's first turn ended:\n%s", log)
	// A turn's answer ends a wait: the bound ends one only where its turn
	// outlasted a second, which a loaded machine may do to one of two
	// quick turns, not to both.
	assert.Contains(t, log, eventText("spares_waited", "why", "no turn in flight"), "no turn's answer ended a wait:\n%s", log)

	p.openSession(12) // and no prompt
	p.awaitEvent("spares_waited", "why", "the wait passed")
	p.awaitEvents(5, "spare_started")
	p.close()
}

// newLine is a session/new request with id.
func newLine(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`, id)
}

// nextReady is the next process readyChildren saw answer initialize; the
// test fails when none does within hang (a spare that never starts).
func nextReady(t *testing.T, ready <-chan int) int {
	t.Helper()
	select {
	case pid := <-ready:
		return pid
	case <-time.After(hang):
		t.Fatalf("no spare answered its initialize within %v", hang)
		return 0
	}
}

// readyChildren reads a --trace FIFO and sends the pid of every process
// that answers an initialize sent to it (the router's spares; the router
// answers the client's from its own process too, which the caller tells
// apart).
func readyChildren(t *testing.T, trace *os.File) <-chan int {
	ready := make(chan int, 64)
	go func() {
		sc := bufio.NewScanner(trace)
		sc.Buffer(nil, 1<<20)
		asked := map[int]bool{}
		for sc.Scan() {
			var l struct {
				Pid int
				Dir string
				Msg struct {
					ID     json.RawMessage
					Method string
				}
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch {
			case l.Dir == "in" && l.Msg.Method == acp.MethodInitialize:
				asked[l.Pid] = true
			case l.Dir == "out" && l.Msg.Method == "" && asked[l.Pid]:
				delete(asked, l.Pid)
				ready <- l.Pid
			}
		}
	}()
	return ready
}

// Verify that when a child dies with a permission request of its on the
// client's screen, the router withdraws that request ($/cancel_request
// with the id the client saw) and answers the prompt with an error naming
// the session; and that initialize is answered by the router itself, with
// the capabilities a direct acpbridge gives.
func TestFanout_deadChildWithdrawsItsRequests(t *testing.T) {
	t.Parallel()
	p := startFanout(t, `{"chunks":[{"toolCall":{"id":"w","name":"write_file","input":{"path":"a.txt","content":"A"}}}]}`)
	r := decodeResponse(t, p.call(initLine))
	require.Nil(t, r.Error)
	assert.Contains(t, string(r.Result), `"sessionCapabilities":{"close":{},"list":{},"resume":{},"delete":{},"additionalDirectories":{},"systemPrompt":{"mode":{"override":{}}}}`)
	a := p.openSession(10)
	p.send(prompt(20, a, "write"))
	ask := decodeLoose2(t, p.await(`{"method":"session/request_permission"}`))
	require.NoError(t, syscall.Kill(holder(t, p.state, a), syscall.SIGKILL))
	var withdrawn, answer map[string]json.RawMessage
	for withdrawn == nil || answer == nil { // in either order
		line := p.next("the withdrawal and the prompt's answer")
		require.NotNil(t, line)
		m := decodeLoose2(t, line)
		if string(m["method"]) == `"$/cancel_request"` {
			withdrawn = m
		} else if string(m["id"]) == "20" {
			answer = m
		}
	}
	assert.JSONEq(t, string(ask["id"]), string(withdrawn["params"]), "the request withdrawn is the one on screen")
	assert.Contains(t, string(answer["error"]), "the process of session "+a)
	p.close()
}

// decodeLoose2 is a line's members, their values as they are.
func decodeLoose2(t *testing.T, line []byte) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(line, &m), "%s", line)
	if params, ok := m["params"]; ok && bytes.Contains(params, []byte("requestId")) {
		var p struct{ RequestID json.RawMessage }
		require.NoError(t, json.Unmarshal(params, &p))
		m["params"] = p.RequestID
	}
	return m
}

// Verify that a line of exactly --max-line-bytes passes through the router
// to its child (which reads it re-wrapped, with a longer id), and that one
// byte more is refused by the router naming the flag.
func TestFanout_lineLimitExact(t *testing.T) {
	t.Parallel()
	const limit = 4096
	p := startProcess(t, nil, "--fanout", "--max-line-bytes", fmt.Sprint(limit), "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"ok"}]}`, `{"chunks":[{"text":"ok"}]}`))
	p.call(initLine)
	sid := p.openSession(1)
	for id := 100; id < 110; id++ { // the child's ids for the client's requests reach two digits
		p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"ask"}}`, id, sid))
	}
	line := func(id, size int) string {
		head := prompt(id, sid, "")
		return prompt(id, sid, strings.Repeat("x", size-len(head)))
	}
	exact := line(2, limit)
	require.Len(t, exact, limit)
	p.send(exact)
	_, r := p.updatesUntil(2)
	require.Nil(t, r.Error, "a line of exactly the limit")
	p.send(line(3, limit+1))
	r = decodeResponse(t, p.await(`{"id":3}`))
	require.NotNil(t, r.Error, "one byte over")
	assert.Contains(t, r.Error.Message, "--max-line-bytes")
	p.close()
}

// Verify that under ACPBRIDGE_DETERMINISTIC (scenario record
// --deterministic) children opened at once make ids of their own: three
// session/new in one write all open (they collided on sess_1_1, 1002).
func TestFanout_deterministicIDsApart(t *testing.T) {
	t.Parallel()
	p := startProcessWith(t, nil, func(cmd *exec.Cmd, _ *testAgent) {
		cmd.Env = append(os.Environ(), "ACPBRIDGE_DETERMINISTIC=1")
	}, "--fanout", "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"x"}]}`))
	p.call(initLine)
	p.sendTogether(newLine(10), newLine(11), newLine(12))
	_, rs, _ := p.collect(10, 11, 12)
	ids := map[string]bool{}
	for id := 10; id <= 12; id++ {
		require.Nil(t, rs[id].Error, "session/new %d", id)
		var res struct{ SessionID string }
		require.NoError(t, json.Unmarshal(rs[id].Result, &res))
		ids[res.SessionID] = true
	}
	assert.Len(t, ids, 3)
	p.close()
}

// Verify that --fanout forwards $/cancel_request to the child running the
// request, with that child's id for it.
func TestCancelRequest_fanout(t *testing.T) {
	t.Parallel()
	p := startProcess(t, nil, "--fanout", "--model", "replay:"+slowFixture(t))
	p.call(initLine)
	sid := p.openSession(10)
	p.send(prompt(11, sid, "slow"))
	p.await(`{"method":"session/update","params":{"update":{"content":{"text":"Slow"}}}}`)
	p.send(cancelRequest(11))
	_, rs, _ := p.collect(11)
	require.Nil(t, rs[11].Error)
	assert.JSONEq(t, `{"stopReason":"cancelled"}`, string(rs[11].Result))
	p.close()
}

// Verify idle eviction: ten threads prompted once and then idle past
// --idle-timeout give their processes back; three of them prompted again
// each answer in a new process (their sessions resumed), and the others
// stay evicted.
func TestFanout_idleEviction(t *testing.T) {
	t.Parallel()
	entries := []string{`{"chunks":[{"text":"Once."}]}`, `{"chunks":[{"text":"Again."}]}`}
	p := startProcess(t, nil, "--fanout", "--idle-timeout", "300ms", "--model", "replay:"+writeFixture(t, entries...))
	p.call(initLine)
	var sids []string
	var pids []int
	for i := range 10 {
		sid := p.openSession(10 + i)
		_, r := p.turnUpdates(20+i, sid, "once")
		require.Nil(t, r.Error)
		sids, pids = append(sids, sid), append(pids, holder(t, p.state, sid))
	}
	for _, pid := range pids {
		assertGone(t, pid, "an idle thread's process")
	}
	for i, sid := range sids[:3] {
		ups, r := p.turnUpdates(40+i, sid, "again")
		require.Nil(t, r.Error, "thread %d after its eviction", i)
		assert.Contains(t, strings.Join(ups, "\n"), "Again.", "thread %d continued its session", i)
		assert.NotEqual(t, pids[i], holder(t, p.state, sid), "thread %d in a new process", i)
	}
	for i, sid := range sids[3:] {
		assert.Equal(t, pids[3+i], holder(t, p.state, sid), "thread %d stays evicted (its log's holder is the process that ended)", 3+i)
	}
	p.close()
}

// Verify that a thread streaming a long answer past --idle-timeout is not
// evicted: its turn is cancelled by the client, not by the router.
func TestFanout_busyNotEvicted(t *testing.T) {
	t.Parallel()
	p := startProcess(t, nil, "--fanout", "--idle-timeout", "200ms", "--log-level", "debug", "--model", "replay:"+writeFixture(t,
		`{"chunks":[{"text":"Streaming"},{"delayMs":600000}]}`, `{"chunks":[{"text":"Quick."}]}`))
	p.call(initLine)
	busy := p.openSession(10)
	p.send(prompt(20, busy, "long"))
	p.await(`{"params":{"update":{"content":{"text":"Streaming"}}}}`)
	idle := p.openSession(11)
	p.awaitEvent("evicting", "session", idle) // past the timeout, busy's prompt in flight all along
	// A loaded machine may deliver the prompt after busy sat idle past the
	// timeout: that eviction is right, and the prompt reopened the thread.
	// The router's log is one ordered stream, read past idle's eviction:
	// every eviction of busy with its prompt in flight would be one with
	// no reopening after it.
	log := p.events.String()
	assert.Equal(t, strings.Count(log, eventText("reopening", "session", busy)), strings.Count(log, eventText("evicting", "session", busy)),
		"busy evicted with its prompt in flight")
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, busy))
	_, rs, _ := p.collect(20)
	assert.Equal(t, "cancelled", stopReason(t, rs[20]), "the busy thread's own process answered")
	p.close()
}

// Verify that --max-children counts live processes: with a cap of 4, ten
// threads opened one after another and each prompted all work, the least
// recently used idle one giving its process up for the next.
func TestFanout_capEvictsLeastRecent(t *testing.T) {
	t.Parallel()
	entries := make([]string, 20)
	for i := range entries {
		entries[i] = `{"chunks":[{"text":"ok"}]}`
	}
	p := startProcess(t, nil, "--fanout", "--max-children", "4", "--model", "replay:"+writeFixture(t, entries...))
	p.call(initLine)
	var sids []string
	for i := range 10 {
		sid := p.openSession(100 + i)
		_, r := p.turnUpdates(200+i, sid, "hello")
		require.Nil(t, r.Error, "thread %d", i)
		sids = append(sids, sid)
	}
	_, r := p.turnUpdates(300, sids[0], "the first again")
	require.Nil(t, r.Error, "the first thread, evicted long ago, reopened")
	p.close()
}

// Verify that a thread whose process was killed while idle answers its
// next prompt with its history: the model's request holds the earlier turn
// (the session resumed from its log in a new process).
func TestFanout_recoveredHistory(t *testing.T) {
	t.Parallel()
	f := newFakeOpenAI(t, fakeReply{file: "text.sse"}, fakeReply{file: "text.sse"})
	p := startProcessWith(t, nil, func(cmd *exec.Cmd, _ *testAgent) {
		cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+testKey)
	}, "--fanout", "--model", "openai:gpt-test", "--base-url", f.srv.URL+"/v1", "--models", "gpt-test")
	p.call(initLine)
	sid := p.openSession(1)
	_, r := p.turnUpdates(2, sid, "the first question")
	require.Nil(t, r.Error)
	require.NoError(t, syscall.Kill(holder(t, p.state, sid), syscall.SIGKILL))
	p.awaitEvent("child_ended")
	_, r = p.turnUpdates(3, sid, "the second question")
	require.Nil(t, r.Error)
	assert.Equal(t, "end_turn", stopReason(t, r))
	sent, _ := json.Marshal(f.request(1).body["messages"])
	assert.Contains(t, string(sent), "the first question", "the earlier turn reached the model")
	assert.Contains(t, string(sent), "Hello there!", "and the answer to it")
	p.close()
}

// Verify that a thread waiting on the client's permission answer past
// --idle-timeout keeps its process (another, idle, is evicted meanwhile),
// and its turn completes once the client answers.
func TestFanout_askingNotEvicted(t *testing.T) {
	t.Parallel()
	p := startProcess(t, nil, "--fanout", "--idle-timeout", "200ms", "--log-level", "debug", "--model", "replay:"+writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"w1","name":"write_file","input":{"path":"x.txt","content":"x"}}}]}`, `{"chunks":[{"text":"Written."}]}`))
	p.call(initLine)
	asking := p.openSession(10)
	idle := p.openSession(11)
	p.send(prompt(20, asking, "write"))
	var req struct{ ID json.RawMessage }
	require.NoError(t, json.Unmarshal(p.await(`{"method":"session/request_permission"}`), &req))
	p.awaitEvent("evicting", "session", idle) // the idle one, past the timeout
	assert.False(t, p.hasEvent("evicting", "session", asking))
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`, req.ID))
	_, rs, _ := p.collect(20)
	assert.Equal(t, "end_turn", stopReason(t, rs[20]), "its own process answered")
	p.close()
}
