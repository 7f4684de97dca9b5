// fuzz_test.go holds the fuzz target of a running server's inbound message
// path. `go test` runs its seeds (taken from fixtures/); `go test -fuzz`
// runs it longer (docs/reliability.md). The replay parser, the session log
// loader and the client's answers are fuzzed in their packages.

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"acpbridge/internal/scenario"
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
