// logbytes_test.go pins the bytes of a session log with tool calls of every
// kind: the log's encoding is hand-written for speed and must write what
// encoding/json wrote (testdata/toolcalls.jsonl was recorded before the
// rewrite; `go test -run TestLogBytes -update` records it again).

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogBytes_toolCalls(t *testing.T) {
	t.Parallel()
	fixture := writeFixture(t,
		`{"chunks":[{"thought":"Look <first> & \"then\" act."},{"text":"Reading.\n"},{"toolCall":{"id":"r1","name":"read_file","input":{"path":"f.txt"}}}]}`,
		`{"chunks":[{"toolCall":{"id":"w1","name":"write_file","input":{"path":"new.txt","content":"héllo\n\tworld\u2028"}}},{"toolCall":{"id":"e1","name":"edit_file","input":{"path":"new.txt","old_text":"héllo","new_text":"hi"}}}]}`,
		`{"chunks":[{"toolCall":{"id":"c1","name":"run_command","input":{"command":"printf 'a\\bb'"}}},{"toolCall":{"id":"l1","name":"list_directory","input":{}}}]}`,
		`{"chunks":[{"toolCall":{"id":"p1","name":"update_plan","input":{"entries":[{"content":"check","status":"completed"}]}}},{"toolCall":{"id":"x1","name":"read_file","input":{"path":"../outside"}}},{"usage":{"inputTokens":12,"outputTokens":34}}]}`,
		`{"chunks":[{"text":"Done."}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	require.NoError(t, os.WriteFile(filepath.Join(ta.cwd, "f.txt"), []byte("on disk\n"), 0o644))
	ta.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`)
	var res struct{ SessionID string }
	require.NoError(t, json.Unmarshal(decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`)).Result, &res))
	sid := res.SessionID
	ta.send(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":"` + sid + `","modeId":"bypass"}}`)
	ta.send(prompt(3, sid, "go <now> & \"then\""))
	for {
		line := ta.next("the prompt's response")
		require.NotNil(t, line)
		if strings.Contains(string(line), `"method":"fs/read_text_file"`) {
			var req struct{ ID json.RawMessage }
			require.NoError(t, json.Unmarshal(line, &req))
			ta.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"content":` + benchFileJSON + `}}`)
		}
		if strings.Contains(string(line), `"id":3,`) {
			break
		}
	}
	ta.close()
	b, err := os.ReadFile(filepath.Join(ta.state, "sessions", sid+".jsonl"))
	require.NoError(t, err)
	got := strings.NewReplacer(ta.cwd, "$CWD", filepath.Dir(ta.cwd), "$TMP").Replace(string(b))
	const golden = "testdata/toolcalls.jsonl"
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), got, "the session log's bytes")
}

// Replay lends each chunk's text to the turn for the call only: what the
// turn keeps (the session log, a --record file, the client's updates) is
// copied, so every text comes out as it went in, whatever came after it.
func TestReplay_lentTextIsCopied(t *testing.T) {
	t.Parallel()
	fixture := writeFixture(t, `{"chunks":[{"text":"one"},{"text":"tw\u00f8"},{"thought":"three"},{"text":"four \"4\""}]}`)
	record := filepath.Join(t.TempDir(), "rec.jsonl")
	ta := startAgent(t, "--model", "replay:"+fixture, "--record", record)
	sid := ta.newSession()
	ta.send(prompt(2, sid, "go"))
	ups, r := ta.updatesUntil(2)
	require.Nil(t, r.Error)
	var texts []string
	for _, u := range ups {
		var m struct{ Content struct{ Text string } }
		json.Unmarshal([]byte(u), &m)
		if m.Content.Text != "" {
			texts = append(texts, m.Content.Text)
		}
	}
	assert.Equal(t, []string{"one", "twø", "three", `four "4"`}, texts)
	ta.close()
	rec, err := os.ReadFile(record)
	require.NoError(t, err)
	assert.Contains(t, string(rec), `"chunks":[{"text":"one"},{"text":"twø"},{"thought":"three"},{"text":"four \"4\""}]`)
	log, err := os.ReadFile(filepath.Join(ta.state, "sessions", sid+".jsonl"))
	require.NoError(t, err)
	assert.Contains(t, string(log), `"text":"onetwø"`)
	assert.Contains(t, string(log), `"text":"three"`)
}
