// hostile_test.go feeds the agent bad input and checks that every request
// gets exactly one response with the right code, that nothing else is
// answered, and that the process keeps serving.

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
)

// Verify each kind of bad input: its response (id and code), or that it
// gets none; and that a normal turn works afterwards.
func TestHostile_badInput(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	cases := []struct {
		name   string
		line   string
		id     string // the response's id as JSON; "" for no response
		code   int
		phrase string // in the message
	}{
		{"malformed JSON, id readable", `{"jsonrpc":"2.0","id":5,"method":"session/list","params":{`, `5`, -32700, "not valid JSON"},
		{"not JSON at all", `not json`, `null`, -32700, "not valid JSON"},
		{"deeply nested JSON", `{"jsonrpc":"2.0","id":6,"method":"session/list","params":{"cwd":` + deep + `}}`, `6`, -32700, ""},
		{"a blank line", ``, "", 0, ""},
		{"spaces only", "   \t ", "", 0, ""},
		{"not an object", `42`, `null`, -32700, ""},
		{"empty batch", `[]`, `null`, -32600, "batches"},
		{"a batch", `[{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}]`, `null`, -32600, "batches"},
		{"no jsonrpc member", `{"id":7,"method":"session/list","params":{}}`, `7`, -32600, ""},
		{"unknown method", `{"jsonrpc":"2.0","id":"u1","method":"session/teleport","params":{}}`, `"u1"`, -32601, ""},
		{"unknown notification", `{"jsonrpc":"2.0","method":"_zed/whatever","params":{}}`, "", 0, ""},
		{"a response nobody asked for", `{"jsonrpc":"2.0","id":4242,"result":{"outcome":"x"}}`, "", 0, ""},
		{"an error response nobody asked for", `{"jsonrpc":"2.0","id":"zz","error":{"code":1,"message":"no"}}`, "", 0, ""},
		{"neither a request nor a response", `{"foo":"boo"}`, `null`, -32600, "needs a method"},
		{"an empty object", `{}`, `null`, -32600, "needs a method"},
		{"an id alone", `{"jsonrpc":"2.0","id":23}`, `null`, -32600, "needs a method"},
		{"params an array", `{"jsonrpc":"2.0","id":8,"method":"session/list","params":[1]}`, `8`, -32602, "must be an object"},
		{"params a string", `{"jsonrpc":"2.0","id":9,"method":"session/list","params":"x"}`, `9`, -32600, ""},
		{"missing sessionId", `{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"prompt":[]}}`, `10`, -32602, "sessionId: required"},
		{"missing prompt", `{"jsonrpc":"2.0","id":11,"method":"session/prompt","params":{"sessionId":"sess_1"}}`, `11`, -32602, "prompt: required"},
		{"wrong type", `{"jsonrpc":"2.0","id":12,"method":"session/prompt","params":{"sessionId":5,"prompt":[]}}`, `12`, -32602, "sessionId: must be a string"},
		{"null cwd", `{"jsonrpc":"2.0","id":13,"method":"session/new","params":{"cwd":null,"mcpServers":[]}}`, `13`, -32602, "cwd: required"},
		{"relative cwd", `{"jsonrpc":"2.0","id":14,"method":"session/new","params":{"cwd":"src","mcpServers":[]}}`, `14`, -32602, "not an absolute path"},
		{"nonexistent cwd", `{"jsonrpc":"2.0","id":15,"method":"session/new","params":{"cwd":"/no/such/place","mcpServers":[]}}`, `15`, -32602, "does not exist"},
		{"bad mcpServers", `{"jsonrpc":"2.0","id":16,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[{"command":"x"}]}}`, `16`, -32602, "mcpServers[0].name"},
		{"image without data", `{"jsonrpc":"2.0","id":17,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"image","data":"","mimeType":"image/png"}]}}`, `17`, -32602, "an image needs data (base64) or a uri"},
		{"unknown block type", `{"jsonrpc":"2.0","id":18,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"hologram"}]}}`, `18`, -32602, "unknown content block type"},
		{"id a string", `{"jsonrpc":"2.0","id":"é-1","method":"session/list","params":{}}`, `"é-1"`, 0, ""},
		{"id negative", `{"jsonrpc":"2.0","id":-5,"method":"session/list","params":{}}`, `-5`, 0, ""},
		{"id fractional", `{"jsonrpc":"2.0","id":1.5,"method":"session/list","params":{}}`, `null`, -32600, "integers or strings"},
		{"id beyond 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"session/list","params":{}}`, `9007199254740993`, 0, ""},
		{"id null", `{"jsonrpc":"2.0","id":null,"method":"session/list","params":{}}`, `null`, -32600, "integers or strings"},
		{"id true", `{"jsonrpc":"2.0","id":true,"method":"session/list","params":{}}`, `null`, -32600, ""},
		{"id an object", `{"jsonrpc":"2.0","id":{"a":1},"method":"session/list","params":{}}`, `null`, -32600, ""},
		{"method not a string", `{"jsonrpc":"2.0","id":20,"method":7,"params":{}}`, `20`, -32600, "method must be a string"},
		{"a prompt with an extra member", `{"jsonrpc":"2.0","id":21,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[]},"x":1}`, `21`, -32600, "extra fields"},
		{"a prompt with a bad version", `{"jsonrpc":"1.0","id":22,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[]}}`, `22`, -32600, ""},
		{"set_mode, no such session", `{"jsonrpc":"2.0","id":19,"method":"session/set_mode","params":{"sessionId":"nope","modeId":"ask"}}`, `19`, -32002, ""},
	}
	fixture := writeFixture(t, `{"expect":"still","chunks":[{"text":"Still serving."}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	ta.call(initLine)
	sid := ta.newSession()
	require.Equal(t, "sess_1", sid)
	for i, c := range cases {
		_, err := ta.stdin.Write([]byte(ta.expand(c.line) + "\n"))
		require.NoError(t, err)
		// A marker request follows the case. Responses come in any order
		// (requests run concurrently), so read until the marker's and, when
		// one is due, the case's have come. What needs no answer is dealt
		// with as it is read, before the marker is.
		marker := fmt.Sprintf(`"m%d"`, i)
		ta.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"session/list","params":{}}`, marker))
		var got []response
		for sawMarker := false; !sawMarker || (c.id != "" && len(got) == 0); {
			r := decodeResponse(t, ta.await(`{"jsonrpc":"2.0"}`))
			if string(r.ID) == marker {
				sawMarker = true
				continue
			}
			got = append(got, r)
		}
		if c.id == "" {
			assert.Empty(t, got, "%s: no response is due", c.name)
			continue
		}
		if !assert.Len(t, got, 1, "%s: exactly one response", c.name) {
			continue
		}
		r := got[0]
		assert.Equal(t, c.id, string(r.ID), "%s: the response's id", c.name)
		if c.code == 0 {
			assert.Nil(t, r.Error, "%s", c.name)
			continue
		}
		if assert.NotNil(t, r.Error, "%s: an error", c.name) {
			assert.Equal(t, c.code, r.Error.Code, "%s: %s", c.name, r.Error.Message)
			assert.Contains(t, r.Error.Message, c.phrase, c.name)
		}
	}
	_, r := ta.turnUpdates(100, sid, "still there?")
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{"stopReason":"end_turn"}`, string(r.Result))
}

// Verify the line-size limit: a longer line is answered with an error
// carrying its id (when the line's start shows one) and skipped, and the
// next line is served.
func TestHostile_longLine(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--max-line-bytes", "1024")
	ta.call(initLine)
	big := fmt.Sprintf(`{"jsonrpc":"2.0","id":77,"method":"session/list","params":{"cwd":"/%s"}}`, strings.Repeat("a", 5000))
	r := decodeResponse(t, ta.call(big))
	require.NotNil(t, r.Error)
	assert.Equal(t, -32600, r.Error.Code)
	assert.Contains(t, r.Error.Message, "exceeds the line limit of 1024 bytes")
	assert.Contains(t, r.Error.Message, "--max-line-bytes")
	noID := fmt.Sprintf(`{"jsonrpc":"2.0","params":{"pad":"%s"},"id":78,"method":"session/list"}`, strings.Repeat("b", 5000))
	ta.send(noID)
	r = decodeResponse(t, ta.await(`{"jsonrpc":"2.0"}`))
	assert.Equal(t, "null", string(r.ID), "the id lies beyond the bytes looked at")
	r = decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":79,"method":"session/list","params":{}}`))
	assert.Nil(t, r.Error, "the next line is served")
}

// Verify that requests sent right before stdin closes are still answered
// (jrpc2 alone drops the ones still queued when it stops).
func TestHostile_answeredBeforeEOF(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", anyModel)
	var lines []string
	lines = append(lines, initLine)
	for i := 1; i <= 20; i++ {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/list","params":{}}`, i))
	}
	_, err := ta.stdin.Write([]byte(strings.Join(lines, "\n") + "\n"))
	require.NoError(t, err)
	ta.close()
	ids := map[string]bool{}
	for _, l := range ta.got {
		var r struct{ ID json.RawMessage }
		json.Unmarshal(l, &r)
		ids[string(r.ID)] = true
	}
	for i := 0; i <= 20; i++ {
		assert.True(t, ids[fmt.Sprint(i)], "request %d was answered", i)
	}
}

// Verify that a client's answer the agent cannot use fails the request it
// answers, with a message the model gets, and is never answered itself;
// and that ids are matched as JSON values (1.0 answers request 1).
func TestHostile_clientAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, answer, want string
	}{
		{"too long", `{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"},"pad":"` + strings.Repeat("x", 2000) + `"}}`, "over the line limit"},
		{"not JSON", `{"jsonrpc":"2.0","id":1,"result":{"outcome":`, "not valid JSON"},
		{"unknown option", `{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"yes_please"}}}`, "not one of the options offered"},
		{"no outcome", `{"jsonrpc":"2.0","id":1,"result":{}}`, "has no outcome"},
		{"null result", `{"jsonrpc":"2.0","id":1,"result":null}`, "has no result"},
		{"id 1.0", `{"jsonrpc":"2.0","id":1.0,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`, "Wrote 1 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fixture := writeFixture(t,
				`{"chunks":[{"toolCall":{"id":"c1","name":"write_file","input":{"path":"a.txt","content":"A"}}}]}`,
				fmt.Sprintf(`{"expect":%q,"chunks":[{"text":"Told."}]}`, c.want))
			ta := startAgent(t, "--model", "replay:"+fixture, "--max-line-bytes", "1024")
			ta.call(`{"jsonrpc":"2.0","id":100,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
			r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":101,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
			require.Nil(t, r.Error)
			ta.send(prompt(102, "sess_1", "write"))
			ta.await(`{"id":1,"method":"session/request_permission"}`)
			_, err := ta.stdin.Write([]byte(c.answer + "\n"))
			require.NoError(t, err)
			for {
				line := ta.next("the prompt's response")
				require.NotNil(t, line)
				m, _ := decodeLoose(line)
				if m["method"] == nil {
					require.NotEqual(t, "1", fmt.Sprint(m["id"]), "the agent answered the client's answer: %s", line)
				}
				if fmt.Sprint(m["id"]) == "102" {
					r := decodeResponse(t, line)
					require.Nil(t, r.Error, "the turn failed instead of telling the model")
					assert.JSONEq(t, `{"stopReason":"end_turn"}`, string(r.Result))
					break
				}
			}
		})
	}
}

// Verify that requests with a malformed envelope (an unknown member, a
// wrong version marker) written just before stdin's end are still
// answered, with jrpc2's words and their ids, before the process exits.
func TestHostile_malformedAnsweredBeforeEOF(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", anyModel)
	ta.sendTogether(initLine,
		`{"jsnrpc":"2.0","id":10,"method":"session/list"}`,
		`{"jsonrpc":"2.0","id":11,"method":"session/list","params":{},"x":1}`,
		`{"jsonrpc":"1.0","id":12,"method":"session/list"}`)
	ta.stdin.Close()
	_, rs, _ := ta.collect(0, 10, 11, 12)
	for id, want := range map[int]string{10: "invalid version marker", 11: "extra fields in request", 12: "invalid version marker"} {
		require.NotNil(t, rs[id].Error, "request %d", id)
		assert.Equal(t, -32600, rs[id].Error.Code)
		assert.Equal(t, want, rs[id].Error.Message)
	}
}

// Verify that a replay fixture that is a FIFO with no writer holds
// nothing: session/new opens at once (twice on the connection, after a
// close), and a prompt is answered with what is wrong with --model.
func TestHostile_fixtureFIFO(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "replay.jsonl")
	mkfifo(t, fifo)
	ta := startAgent(t, "--model", "replay:"+fifo)
	sid := ta.newSession()
	_, r := ta.turnUpdates(2, sid, "hi")
	require.NotNil(t, r.Error)
	assert.Contains(t, r.Error.Message, "is not a regular file")
	ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":%q}}`, sid))
	r = decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	assert.Nil(t, r.Error, "a second session/new")
}

// Verify what a code review found: `close A; new B; delete A` in one write
// deletes A once its close has freed it (it was refused with 1002 naming
// this very process), and session/close with an empty session id is
// refused like any unknown id, with or without a live session.
func TestHostile_reviewFindings(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", anyModel)
	r := decodeResponse(t, ta.call(initLine))
	require.Nil(t, r.Error)
	r = decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/close","params":{"sessionId":""}}`))
	require.NotNil(t, r.Error, "close of an empty id with no session open")
	assert.Equal(t, -32002, r.Error.Code)
	ta.call(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`)
	ta.sendTogether(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"sess_1"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/delete","params":{"sessionId":"sess_1"}}`)
	_, rs, _ := ta.collect(3, 4, 5)
	for id := 3; id <= 5; id++ {
		require.Nil(t, rs[id].Error, "request %d", id)
	}
	_, err := os.Stat(filepath.Join(ta.state, "sessions", "sess_1.jsonl"))
	assert.ErrorIs(t, err, os.ErrNotExist, "sess_1 deleted")
	r = decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":6,"method":"session/close","params":{"sessionId":""}}`))
	require.NotNil(t, r.Error, "close of an empty id with sess_2 open")
	assert.Equal(t, -32002, r.Error.Code)
}
