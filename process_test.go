//go:build linux

// process_test.go tests what crosses processes on the built binary: a
// session reopened in a new process, kill -9, the lock between two live
// processes, and exit on stdin EOF.

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that a session created in one process, with two turns, is loaded
// whole by a new process (every update of both turns replayed, in order,
// before the response), and that the next turn continues it.
func TestProcess_loadInNewProcess(t *testing.T) {
	t.Parallel()
	fixture := writeFixture(t,
		`{"expect":"one","chunks":[{"thought":"Hmm."},{"text":"First"},{"text":" answer."}]}`,
		`{"expect":"two","chunks":[{"text":"Second answer."}],"stop":"max_tokens"}`,
		`{"expect":"three","chunks":[{"text":"Third."}]}`)
	p1 := startProcess(t, nil, "--model", "replay:"+fixture)
	sid := p1.newSession()
	p1.send(prompt(2, sid, "turn one"))
	turn1, r := p1.updatesUntil(2)
	require.Nil(t, r.Error)
	p1.send(prompt(3, sid, "turn two"))
	turn2, r := p1.updatesUntil(3)
	require.Nil(t, r.Error)
	p1.close()

	// What the client saw live, as load must replay it: the user's prompt
	// first, and no session_info_update (not part of the conversation).
	var want []string
	want = append(want, `{"content":{"text":"turn one","type":"text"},"sessionUpdate":"user_message_chunk"}`)
	want = append(want, turn1[:len(turn1)-1]...) // the last is session_info_update
	want = append(want, `{"content":{"text":"turn two","type":"text"},"sessionUpdate":"user_message_chunk"}`)
	want = append(want, turn2...)

	// The same fixture: the session continues it at entry 3.
	p2 := startProcess(t, p1.testAgent, "--model", "replay:"+fixture)
	p2.call(initLine)
	p2.send(load(1, sid))
	replayed, r := p2.updatesUntil(1)
	require.Nil(t, r.Error, "load")
	// Load replays each message whole under its original messageId; the
	// live stream may have split it into several chunks.
	want, got := foldChunks(t, want), foldChunks(t, replayed)
	require.Len(t, got, len(want), "replayed messages:\n%s", strings.Join(got, "\n"))
	for i := range want {
		if strings.Contains(want[i], "user_message_chunk") {
			got[i] = withoutMessageID(t, got[i])
		}
		assert.JSONEq(t, want[i], got[i], "replayed message %d", i)
	}
	p2.send(prompt(2, sid, "turn three"))
	_, r = p2.updatesUntil(2)
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{"stopReason":"end_turn"}`, string(r.Result))
}

// Verify that kill -9 in the middle of a turn loses no completed turn: the
// next process loads the session (the lock died with the process), replays
// the first turn and the interrupted prompt, and goes on.
func TestProcess_kill9MidTurn(t *testing.T) {
	t.Parallel()
	fixture := writeFixture(t,
		`{"chunks":[{"text":"Done."}]}`,
		`{"chunks":[{"text":"Streaming"},{"delayMs":600000}]}`,
		`{"expect":"again","chunks":[{"text":"Back."}]}`)
	p1 := startProcess(t, nil, "--model", "replay:"+fixture)
	sid := p1.newSession()
	p1.call(prompt(2, sid, "complete turn"))
	p1.send(prompt(3, sid, "interrupted turn"))
	p1.await(`{"params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":"Streaming"}}}}`)
	require.NoError(t, p1.cmd.Process.Signal(syscall.SIGKILL))
	p1.drainKilled()

	// The same fixture: the entry the killed turn used is not played again.
	p2 := startProcess(t, p1.testAgent, "--model", "replay:"+fixture)
	p2.call(initLine)
	p2.send(load(1, sid))
	replayed, r := p2.updatesUntil(1)
	require.Nil(t, r.Error, "load after kill -9")
	require.GreaterOrEqual(t, len(replayed), 3)
	assert.JSONEq(t, `{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"complete turn"}}`, withoutMessageID(t, replayed[0]))
	assert.JSONEq(t, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Done."}}`, withoutMessageID(t, replayed[1]))
	assert.JSONEq(t, `{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"interrupted turn"}}`, withoutMessageID(t, replayed[2]))
	p2.send(prompt(2, sid, "again"))
	_, r = p2.updatesUntil(2)
	assert.Nil(t, r.Error)
}

// Verify that a second process cannot load or resume a session the first
// holds (the error names the first's pid), and can once the first exits.
func TestProcess_lockHeld(t *testing.T) {
	t.Parallel()
	fixture := writeFixture(t, `{"chunks":[{"text":"x"}]}`)
	p1 := startProcess(t, nil, "--model", "replay:"+fixture)
	sid := p1.newSession()

	p2 := startProcess(t, p1.testAgent, "--model", "replay:"+fixture)
	p2.call(initLine)
	for i, req := range []string{load(1, sid),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/resume","params":{"sessionId":%q,"cwd":"$CWD"}}`, sid)} {
		r := decodeResponse(t, p2.call(req))
		require.NotNil(t, r.Error, "request %d while another process holds the session", i)
		assert.Equal(t, 1002, r.Error.Code)
		assert.Contains(t, r.Error.Message, "pid "+strconv.Itoa(p1.cmd.Process.Pid))
	}
	r := decodeResponse(t, p2.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"session/delete","params":{"sessionId":%q}}`, sid)))
	require.NotNil(t, r.Error, "delete while another process holds the session")
	assert.Equal(t, 1002, r.Error.Code)
	p1.close()
	r = decodeResponse(t, p2.call(load(3, sid)))
	assert.Nil(t, r.Error, "load after the holder exited")
}

// Verify that stdin EOF in the middle of a turn ends the process with
// status 0, and that the turn is persisted as cancelled, so the session
// loads and continues.
func TestProcess_eofMidTurn(t *testing.T) {
	t.Parallel()
	fixture := writeFixture(t, `{"chunks":[{"text":"Streaming"},{"delayMs":600000}]}`)
	p1 := startProcess(t, nil, "--model", "replay:"+fixture)
	sid := p1.newSession()
	p1.send(prompt(2, sid, "long turn"))
	p1.await(`{"params":{"update":{"sessionUpdate":"agent_message_chunk"}}}`)
	p1.close() // asserts exit status 0

	b, err := os.ReadFile(filepath.Join(p1.state, "sessions", sid+".jsonl"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `{"type":"agent","messageId":`)
	assert.Contains(t, string(b), `"text":"Streaming"}`)
	assert.Regexp(t, `\{"type":"turn_end",.*"stopReason":"cancelled"`, string(b))
}

// Verify that a session resumed in a new process continues the replay
// fixture where it stopped (acpx starts a process per reopen): the first
// prompt after the reopen plays entry 2, not entry 1.
func TestProcess_replayContinuesAfterReopen(t *testing.T) {
	t.Parallel()
	fixture := writeFixture(t, `{"expect":"one","chunks":[{"text":"First."}]}`, `{"expect":"two","chunks":[{"text":"Second."}]}`)
	p1 := startProcess(t, nil, "--model", "replay:"+fixture)
	sid := p1.newSession()
	p1.send(prompt(2, sid, "one"))
	_, r := p1.updatesUntil(2)
	require.Nil(t, r.Error)
	p1.close()

	p2 := startProcess(t, p1.testAgent, "--model", "replay:"+fixture)
	p2.call(initLine)
	r = decodeResponse(t, p2.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":%q,"cwd":"$CWD"}}`, sid)))
	require.Nil(t, r.Error, "resume")
	p2.send(prompt(2, sid, "two"))
	ups, r := p2.updatesUntil(2)
	require.Nil(t, r.Error, "the prompt after the reopen")
	require.NotEmpty(t, ups)
	assert.Contains(t, ups[0], `"text":"Second."`)
}

// Verify ACPBRIDGE_DETERMINISTIC (scenario record --deterministic): ids
// and the clock are the same on every run, and a second process with the
// same part in the same state directory skips the session id already
// stored instead of failing on it.
func TestProcess_deterministicIDs(t *testing.T) {
	t.Setenv("ACPBRIDGE_DETERMINISTIC", "1") // not parallel: the children inherit it
	p1 := startProcess(t, nil, "--model", anyModel)
	assert.Equal(t, "sess_1_1", p1.newSession())
	p1.close()
	p2 := startProcess(t, p1.testAgent, "--model", anyModel)
	assert.Equal(t, "sess_1_2", p2.newSession(), "the stored sess_1_1 is skipped")
	p2.close()
	b, err := os.ReadFile(filepath.Join(p1.state, "sessions", "sess_1_1.jsonl"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"createdAt":"2026-01-01T01:00:01Z"`, "the clock starts at 2026-01-01 plus the part's hours")

	t.Setenv("ACPBRIDGE_DETERMINISTIC", "first")
	out, err := exec.Command(binary(t), "--state-dir", t.TempDir()).CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), `ACPBRIDGE_DETERMINISTIC="first": give a part number, 1 or more`)
}
