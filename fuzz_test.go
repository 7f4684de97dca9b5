// fuzz_test.go holds the fuzz targets: the inbound message path of a
// running server, the replay fixture parser, and the session store loader.
// `go test` runs their seeds (taken from fixtures/); `go test -fuzz` runs
// them longer (README).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creachadair/jrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/acp"
	"acpbridge/internal/channel"
	"acpbridge/internal/model"
	"acpbridge/internal/scenario"
	"acpbridge/internal/store"
	"acpbridge/internal/tools"
)

// fixtureSections returns the named section of every fixtures/*.txtar.
func fixtureSections(t testing.TB, name string) []string {
	paths, err := filepath.Glob("fixtures/*.txtar")
	require.NoError(t, err)
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		_, sections := scenario.ParseArchive(string(b))
		for _, s := range sections {
			if s.Name == name || strings.HasPrefix(s.Name, name) {
				out = append(out, s.Data)
			}
		}
	}
	return out
}

// runsCommands reports whether a line asks for MCP servers, which would
// start programs: a fuzzer must not run arbitrary ones.
func runsCommands(line []byte) bool {
	var m struct {
		Params struct {
			McpServers []json.RawMessage `json:"mcpServers"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return bytes.Contains(line, []byte("mcpServers"))
	}
	return len(m.Params.McpServers) > 0
}

// FuzzInbound sends an arbitrary line to a running server: it must not
// panic or hang, every request in it must get a response with its id, every
// line it writes must be a valid ACP message, and it must go on serving.
func FuzzInbound(f *testing.F) {
	for _, script := range fixtureSections(f, "transcript") {
		for _, l := range strings.Split(script, "\n") {
			if line, ok := strings.CutPrefix(l, "> "); ok {
				f.Add([]byte(line))
			}
		}
	}
	for _, s := range []string{``, `not json`, `[]`, `42`, `{"jsonrpc":"2.0","id":null,"method":"session/list"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"session/new","params":{"cwd":"/"}}`, `{"jsonrpc":"2.0","id":7,"result":{}}`,
		`{"jsonrpc":"2.0","id":"x","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"resource","resource":{}}]}}`,
		`{"jsonrpc":"2.0","id":3,"method":7}`, `{"jsonrpc":"2.0","id":1.0,"result":null}`, `{"jsonrpc":"2.0","id":1,"result":{"outcome":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		line = bytes.ReplaceAll(line, []byte("\n"), []byte(" "))
		if runsCommands(line) {
			t.Skip("asks for MCP servers")
		}
		ta := startAgent(t, "--log-level", "error")
		ta.call(initLine)
		ta.call(`{"jsonrpc":"2.0","id":"setup","method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`)
		ta.stdin.Write(append(line, '\n'))
		ta.call(`{"jsonrpc":"2.0","id":"after","method":"session/list","params":{}}`)
		ta.close()
		var req map[string]json.RawMessage
		if json.Unmarshal(line, &req) != nil || req["method"] == nil {
			return
		}
		id := req["id"]
		if len(id) == 0 || string(id) == "null" || !(id[0] == '"' || (id[0] == '-' || id[0] >= '0' && id[0] <= '9') && !bytes.ContainsAny(id, ".eE")) {
			return // a notification, or an id ACP does not allow (answered with a null id)
		}
		var want any
		if json.Unmarshal(id, &want) != nil {
			return
		}
		for _, l := range ta.got {
			var r struct {
				ID     json.RawMessage
				Method string
			}
			if json.Unmarshal(l, &r) == nil && r.Method == "" && bytes.Equal(r.ID, id) {
				return
			}
		}
		t.Errorf("request with id %s got no response:\n%s", id, line)
	})
}

// replayHarness is the least of an agent the replay model needs.
func replayHarness(t *testing.T, out io.Writer) (*agent, *SessionRecord) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &agent{out: channel.NewWire(strings.NewReader(""), out, 1<<20, nil), newID: counterIDs(), now: time.Now, log: log}
	st := &store.Store{Dir: t.TempDir(), Log: log}
	s := &SessionRecord{id: "s", created: time.Now(), conv: &model.Conversation{}, box: newBox(acp.ModeAsk, ""), ws: tools.Open([]string{"/"})}
	f, err := st.Create(infoOf(s))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	s.file = f
	return a, s
}

// FuzzReplay parses an arbitrary fixture: no panic, no hang (its delays
// end with the call's context), every line written is JSON, and model calls
// after an error go on from the next entry.
func FuzzReplay(f *testing.F) {
	for _, s := range fixtureSections(f, "replay.jsonl") {
		f.Add([]byte(s))
	}
	f.Add([]byte("{\"chunks\":[{\"text\":\"a\"},{\"delayMs\":10}]}\n# c\n\n{\"chunks\":[{\"text\":\"a\",\"thought\":\"b\"}]}\n{\"expect\":\"x\",\"chunks\":[]}\n"))
	f.Add([]byte(`{"chunks":[{"toolCall":{"id":"1","name":"x","input":"not an object"}}],"stop":"refusal"}`))
	f.Fuzz(func(t *testing.T, fixture []byte) {
		path := filepath.Join(t.TempDir(), "f.jsonl")
		require.NoError(t, os.WriteFile(path, fixture, 0o644))
		m, err := model.NewReplay(path)
		require.NoError(t, err)
		var out bytes.Buffer
		a, s := replayHarness(t, &out)
		s.conv.Add(model.Message{Role: "user", Text: "hello"})
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			st := &modelStream{a: a, s: s}
			stop, err := m.Complete(ctx, &model.Request{Conv: s.conv}, st)
			cancel()
			st.endMessage()
			if err == nil {
				assert.Contains(t, []acp.StopReason{acp.StopEndTurn, acp.StopToolUse, acp.StopMaxTokens, acp.StopRefusal}, stop)
				for _, c := range st.calls {
					assert.True(t, json.Valid(c.Input), "a tool call's input is JSON")
				}
			} else if !errors.Is(err, context.DeadlineExceeded) {
				var rerr *jrpc2.Error
				assert.True(t, errors.As(err, &rerr) && rerr.Code == acp.CodeModelFailed, "error %v", err)
			}
		}
		a.out.Flush()
		for _, l := range bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")) {
			if len(l) > 0 {
				assert.True(t, json.Valid(l), "written line is not JSON: %s", l)
			}
		}
	})
}

// FuzzStoreLoad loads an arbitrary session log: no panic; either a clear
// store error or a session whose replay reads back.
func FuzzStoreLoad(f *testing.F) {
	for _, s := range fixtureSections(f, "state/sessions/") {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"type":"session","v":1,"sessionId":"s","cwd":"/","createdAt":"2026-01-01T00:00:00Z"}` + "\n" +
		`{"type":"user","messageId":"m","blocks":[{"type":"text","text":"hi"}]}` + "\n" +
		`{"type":"tool_call","toolCallId":"c","call":{"id":"1","name":"read_file","input":{}}}` + "\n" +
		`{"type":"tool_result","toolCallId":"c","call":{"id":"1","name":"read_file","input":{}},"status":"completed","result":"x"}` + "\n" +
		`{"type":"turn_end","stopReason":"refusal"}` + "\n" + `{"type":"rule","tool":"x","allow":true}` + "\n" + `{"type":"agent","text":"to`))
	f.Fuzz(func(t *testing.T, log []byte) {
		log = bytes.ReplaceAll(log, []byte("$CWD"), []byte("/"))
		st := &store.Store{Dir: t.TempDir(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		require.NoError(t, os.WriteFile(st.Path("sess_f", ".jsonl"), log, 0o600))
		conv := &model.Conversation{Full: true}
		h, file, err := st.Open(context.Background(), "sess_f", newFeeder(conv).add)
		if err != nil {
			var serr *store.Error
			require.True(t, errors.As(err, &serr), "a store error: %v", err)
			assert.Equal(t, acp.CodeStoreFailed, wireError(err).Code, err.Error())
			return
		}
		defer file.Close()
		require.NoError(t, file.Replay(h.Good, func(store.Record) error { return nil }))
		fi, err := os.Stat(st.Path("sess_f", ".jsonl"))
		require.NoError(t, err)
		assert.Equal(t, h.Good, fi.Size(), "the log was cut to its valid part")
	})
}

// FuzzClientAnswer sends arbitrary lines where the agent waits for the
// answer to its permission request, then the real answer: the agent never
// answers a response (no line of its own carries the request's id 1 without
// a method), the turn ends with a result, and every line it writes is ACP.
func FuzzClientAnswer(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`,
		`{"jsonrpc":"2.0","id":1.0,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`,
		`{"jsonrpc":"2.0","id":"1","result":{"outcome":{"outcome":"cancelled"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":null}`, `{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"yes"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"outcome":`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603}}`,
		`{"jsonrpc":"2.0","id":1,"error":"boom"}`, `{"id":1}`, `not json`,
	} {
		f.Add([]byte(s))
	}
	fixture := writeFixture(f, `{"chunks":[{"toolCall":{"id":"w","name":"write_file","input":{"path":"a.txt","content":"A"}}}]}`, `{"chunks":[{"text":"Done."}]}`)
	f.Fuzz(func(t *testing.T, line []byte) {
		line = bytes.ReplaceAll(line, []byte("\n"), []byte(" "))
		ta := startAgent(t, "--log-level", "error", "--max-line-bytes", "4096", "--model", "replay:"+fixture)
		ta.call(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
		ta.call(`{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`)
		ta.send(`{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"go"}]}}`)
		ta.await(`{"method":"session/request_permission"}`)
		ta.stdin.Write(append(line, '\n'))
		ta.stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"reject_once"}}}` + "\n"))
		for {
			l := ta.next("the prompt's response")
			if l == nil {
				t.Fatal("EOF before the prompt's response")
			}
			m, _ := decodeLoose(l)
			if n, isNum := m["id"].(json.Number); isNum && m["method"] == nil {
				if f, err := n.Float64(); err == nil && f == 1 {
					t.Fatalf("the agent answered a response to its request 1: %s", l)
				}
			}
			if m["id"] == "p" {
				if m["error"] != nil {
					t.Fatalf("the turn failed: %s", l)
				}
				break
			}
		}
		ta.close()
	})
}
