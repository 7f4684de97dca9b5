// store_test.go tests the session store beyond the transcripts: what is left
// on disk, a load that close ends, and list paging.

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
	"acpbridge/internal/store"
)

// Verify that a failed load of a log with a corrupt middle record leaves the
// file byte for byte as it was.
func TestStore_corruptMiddleUntouched(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", anyModel)
	dir := filepath.Join(ta.state, "sessions")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	log := `{"type":"session","v":1,"sessionId":"sess_bad","cwd":"/","createdAt":"2026-01-01T00:00:00Z"}` + "\n" +
		"garbage\n" + `{"type":"agent","messageId":"m","text":"x"}` + "\n"
	path := filepath.Join(dir, "sess_bad.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(log), 0o600))
	ta.call(initLine)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"sess_bad","cwd":"$CWD","mcpServers":[]}}`))
	require.NotNil(t, r.Error)
	assert.Contains(t, r.Error.Message, path+" is corrupt at line 2")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, log, string(b))
}

// Verify that loading a log with a torn last record cuts it off, so that
// the records appended after it start on a line of their own.
func TestStore_tornTailTruncated(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", "replay:fixtures/hello.jsonl")
	dir := filepath.Join(ta.state, "sessions")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	good := `{"type":"session","v":1,"sessionId":"sess_t","cwd":"/","createdAt":"2026-01-01T00:00:00Z"}` + "\n"
	path := filepath.Join(dir, "sess_t.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(good+`{"type":"user","blo`), 0o600))
	ta.call(initLine)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"sess_t","cwd":"$CWD","mcpServers":[]}}`))
	require.Nil(t, r.Error)
	ta.call(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess_t","prompt":[{"type":"text","text":"hello"}]}}`)
	ta.close()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), good+`{"type":"user"`), "log after the turn:\n%s", b)
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		assert.True(t, json.Valid([]byte(line)), "line %d is not JSON: %s", i+1, line)
	}
}

// Verify that session/close during a load ends the load (it fails), answers
// {}, and leaves the process free; and that session/new during the load is
// rejected naming the session being loaded. The load is held in the middle
// by making its log a FIFO that the test writes only later.
func TestStore_closeDuringLoad(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", "replay:fixtures/hello.jsonl")
	ta.call(initLine)
	ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`)
	ta.call(`{"jsonrpc":"2.0","id":2,"method":"session/close","params":{"sessionId":"sess_1"}}`)
	path := filepath.Join(ta.state, "sessions", "sess_1.jsonl")
	log, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.Remove(path))
	mkfifo(t, path)

	ta.send(`{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"sess_1","cwd":"$CWD","mcpServers":[]}}`)
	// Opening the FIFO for writing returns once the load has opened it to
	// read: the load is under way and holds the process's one slot.
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.NotNil(t, r.Error, "session/new during a load")
	assert.Equal(t, 1001, r.Error.Code)
	assert.Contains(t, r.Error.Message, "sess_1")

	ta.send(`{"jsonrpc":"2.0","id":5,"method":"session/close","params":{"sessionId":"sess_1"}}`)
	ta.awaitEvent("opening_ended")
	w.Write(log)
	w.Close()
	// The two answers may come in either order.
	got := map[string]response{}
	for range 2 {
		r := decodeResponse(t, ta.await(`{"jsonrpc":"2.0"}`))
		got[string(r.ID)] = r
	}
	require.Contains(t, got, "3")
	require.Contains(t, got, "5")
	require.NotNil(t, got["3"].Error, "the load that close ended")
	assert.Equal(t, -32800, got["3"].Error.Code)
	assert.Nil(t, got["5"].Error)
	assert.JSONEq(t, `{}`, string(got["5"].Result))
	r = decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	assert.Nil(t, r.Error, "session/new after the ended load")
}

// Verify that session/list pages through many sessions newest first with
// no session repeated or missed.
func TestStore_listPaging(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", anyModel)
	dir := filepath.Join(ta.state, "sessions")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	const n = 2*store.ListPage + 7
	for i := range n {
		inf := store.Info{SessionID: fmt.Sprintf("s%03d", i), Cwd: "/w", CreatedAt: "2026-01-01T00:00:00Z",
			UpdatedAt: fmt.Sprintf("2026-01-01T00:%02d:%02dZ", i/60, i%60)}
		b, _ := json.Marshal(inf)
		require.NoError(t, os.WriteFile(filepath.Join(dir, inf.SessionID+".json"), b, 0o600))
	}
	ta.call(initLine)
	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		params := `{}`
		if cursor != "" {
			params = fmt.Sprintf(`{"cursor":%q}`, cursor)
		}
		r := decodeResponse(t, ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/list","params":%s}`, page+1, params)))
		require.Nil(t, r.Error)
		var res acp.ListResult
		require.NoError(t, json.Unmarshal(r.Result, &res))
		for _, s := range res.Sessions {
			seen = append(seen, s.SessionID)
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
		require.Less(t, page, 10, "too many pages")
	}
	require.Len(t, seen, n)
	for i, id := range seen {
		assert.Equal(t, fmt.Sprintf("s%03d", n-1-i), id, "position %d", i)
	}
}

// Verify that the conversation rebuilt from a log is what the model was
// sent: a refused turn is left out, assistant text and its tool calls form
// one message, and a tool call with no recorded result (a crash) is
// answered so that the history stays well formed.
func TestStore_feedConversation(t *testing.T) {
	t.Parallel()
	call := &store.Call{ID: "c1", Name: "read_file", Input: json.RawMessage(`{"path":"a"}`)}
	call2 := &store.Call{ID: "c2", Name: "run_command", Input: json.RawMessage(`{"command":"make"}`)}
	text := func(s string) []json.RawMessage {
		return []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"type":"text","text":%q}`, s))}
	}
	records := []store.Record{
		{Type: store.RecUser, Blocks: text("one")},
		{Type: store.RecThought, Text: "not sent to the model"},
		{Type: store.RecAgent, Text: "Let me "},
		{Type: store.RecAgent, Text: "look."},
		{Type: store.RecToolCall, Call: call},
		{Type: store.RecToolResult, Call: call, Result: "contents"},
		{Type: store.RecAgent, Text: "Done."},
		{Type: store.RecTurnEnd, StopReason: string(acp.StopEndTurn)},
		{Type: store.RecUser, Blocks: text("bad request")},
		{Type: store.RecAgent, Text: "No."},
		{Type: store.RecTurnEnd, StopReason: string(acp.StopRefusal)},
		{Type: store.RecUser, Blocks: text("build it")},
		{Type: store.RecToolCall, Call: call2},
	}
	c := &model.Conversation{Full: true}
	f := newFeeder(c, model.ImageBudget)
	for _, r := range records {
		f.add(r)
	}
	f.finish()
	var got []string
	for _, m := range c.Msgs {
		s := m.Role + ":" + m.Text
		for _, tc := range m.ToolCalls {
			s += " [" + tc.ID + "]"
		}
		if m.ToolCallID != "" {
			s += " (" + m.ToolCallID + ")"
		}
		got = append(got, s)
	}
	assert.Equal(t, []string{
		"user:one",
		"assistant:Let me look. [c1]",
		"tool:contents (c1)",
		"assistant:Done.",
		"user:build it",
		"assistant: [c2]",
		"tool:The tool call was interrupted: acpbridge stopped before it finished. Its effects are unknown. (c2)",
	}, got)
}

// Verify that a session log write that fails in the middle of a turn (here:
// the log swapped for a read-only descriptor, as a full disk would fail)
// fails that turn with 1006 and loses no record: once writes work again,
// everything the failed turn held is in the log, in order.
func TestStore_writeFailureLosesNothing(t *testing.T) {
	t.Parallel()
	fixture := writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"c1","name":"write_file","input":{"path":"a.txt","content":"A"}}}]}`,
		`{"chunks":[{"text":"Written."}]}`,
		`{"chunks":[{"text":"Second answer."}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	sid := ta.newSession()
	ta.agent.mu.Lock()
	f := ta.agent.sess.file
	ta.agent.mu.Unlock()
	path := filepath.Join(ta.state, "sessions", sid+".jsonl")
	ro, err := os.Open(path)
	require.NoError(t, err)
	defer ro.Close()

	ta.send(prompt(2, sid, "first"))
	ta.await(`{"method":"session/request_permission"}`)
	good := f.SwapLog(ro) // the turn waits for the answer: its writes fail from here
	ta.send(`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`)
	_, r := ta.updatesUntil(2)
	require.NotNil(t, r.Error, "the turn whose writes failed")
	assert.Equal(t, 1006, r.Error.Code)

	f.SwapLog(good)
	ta.send(prompt(3, sid, "second"))
	_, r = ta.updatesUntil(3)
	require.Nil(t, r.Error, "the turn after writes work again")
	ta.close()

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var order []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec store.Record
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "a torn or broken record: %s", l)
		order = append(order, rec.Type+":"+rec.Text)
	}
	assert.Equal(t, []string{"session:", "user:", "modelState:", "modelState:", "usage:", "tool_call:", "tool_result:", "modelState:", "modelState:", "agent:Written.", "usage:", "turn_end:",
		"user:", "modelState:", "modelState:", "agent:Second answer.", "usage:", "turn_end:"}, order)
}

// Verify that session/close ends a load in its first (checking) pass over
// a long log at once, rather than after reading it all.
func TestStore_closeDuringLongLoad(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"close", "EOF"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			ta := startAgent(t, "--model", "replay:fixtures/hello.jsonl")
			sid := ta.newSession()
			ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/close","params":{"sessionId":%q}}`, sid))
			path := filepath.Join(ta.state, "sessions", sid+".jsonl")
			log, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.Remove(path))
			mkfifo(t, path)
			ta.send(load(3, sid))
			w, err := os.OpenFile(path, os.O_WRONLY, 0)
			require.NoError(t, err)
			defer w.Close()
			// The first pass is under way: feed it records, then end it.
			w.Write(log)
			for range 5000 {
				fmt.Fprintf(w, `{"type":"agent","messageId":"m","text":"x"}`+"\n")
			}
			if end == "close" {
				ta.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"session/close","params":{"sessionId":%q}}`, sid))
				ta.awaitEvent("opening_ended")
			} else {
				ta.stdin.Close()
			}
			// The writer keeps the FIFO open, so only watching ctx ends the
			// pass: the load must answer while the log is still being written.
			go func() {
				for range 100000 {
					if _, err := fmt.Fprintf(w, `{"type":"agent","messageId":"m","text":"x"}`+"\n"); err != nil {
						return
					}
				}
			}()
			got := map[string]response{}
			for range map[string]int{"close": 2, "EOF": 1}[end] {
				r := decodeResponse(t, ta.await(`{"jsonrpc":"2.0"}`))
				got[string(r.ID)] = r
			}
			require.NotNil(t, got["3"].Error)
			assert.Equal(t, -32800, got["3"].Error.Code)
			if end == "close" {
				assert.Nil(t, got["4"].Error)
				assert.Contains(t, got["3"].Error.Message, "was ended by session/close")
			} else {
				assert.Contains(t, got["3"].Error.Message, "was ended by the connection's end", "no close was sent")
			}
		})
	}
}

// Verify that a log whose last line is whole but no record, and a log
// without its session record on line 1, fail the load with 1006 naming the
// file, and are left byte for byte as they were.
func TestStore_damagedLogsUntouched(t *testing.T) {
	t.Parallel()
	header := `{"type":"session","v":1,"sessionId":"sess_d","cwd":"/","createdAt":"2026-01-01T00:00:00Z"}` + "\n"
	user := `{"type":"user","messageId":"m1","blocks":[{"type":"text","text":"hi"}]}` + "\n"
	for name, content := range map[string]string{
		"whole bad last line": header + user + "{\"type\":\"agent\",\"text\":\n",
		"no header":           user + `{"type":"agent","messageId":"m2","text":"hello"}` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			ta := startAgent(t, "--model", "replay:fixtures/hello.jsonl")
			dir := filepath.Join(ta.state, "sessions")
			require.NoError(t, os.MkdirAll(dir, 0o700))
			path := filepath.Join(dir, "sess_d.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
			ta.call(initLine)
			r := decodeResponse(t, ta.call(load(1, "sess_d")))
			require.NotNil(t, r.Error, "the load of a damaged log")
			assert.Equal(t, 1006, r.Error.Code)
			assert.Contains(t, r.Error.Message, path)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, content, string(b), "the log was changed")
		})
	}
}
