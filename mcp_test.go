// mcp_test.go tests MCP servers passed in session/new: a small server built
// with the same SDK, run over stdio (this test binary, re-executed) and over
// streamable HTTP and SSE (httptest), driven by replay fixtures.

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/acp"
)

type textIn struct {
	Text string `json:"text,omitempty"`
}

// newTestMCPServer has the tools the tests call.
func newTestMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "helper", Version: "1"}, nil)
	text := func(t string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo text", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return text("echo: " + in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			r := text("it broke")
			r.IsError = true
			return r, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "touch", Description: "Changes something"},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return text("touched"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "picture", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a dot:"}, &mcp.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_tool", Description: "Adds the tool late"},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: "late", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
				func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
					return text("late tool ran"), nil, nil
				})
			return text("added"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "table", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			rows := make([]map[string]any, 4000) // some 200 KB of structured content
			for i := range rows {
				rows[i] = map[string]any{"id": i, "name": fmt.Sprintf("row %d of the table", i)}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "4000 rows"}}, StructuredContent: map[string]any{"rows": rows}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "die", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	return s
}

// runTestMCPServer serves newTestMCPServer on stdio until stdin closes.
func runTestMCPServer() {
	if f := os.Getenv("ACPBRIDGE_TEST_MCP_PID"); f != "" {
		os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	newTestMCPServer().Run(context.Background(), &mcp.StdioTransport{})
}

// floodNotifications is how many notifications/tools/list_changed the
// flooding server sends after its first tools/list.
const floodNotifications = 10_000

// runFloodMCPServer is a hostile stdio MCP server: after the first
// tools/list it sends floodNotifications notifications/tools/list_changed
// as fast as it can, and from then on lists two tools (so that the client
// shows, by listing two, that it read past the flood).
func runFloodMCPServer() {
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	sc := bufio.NewScanner(os.Stdin)
	flooded := false
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || len(m.ID) == 0 {
			continue
		}
		switch m.Method {
		case "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"flood","version":"1"}}}`+"\n", m.ID, m.Params.ProtocolVersion)
		case "tools/list":
			tools := `{"name":"one","inputSchema":{"type":"object"}}`
			if flooded {
				tools += `,{"name":"two","inputSchema":{"type":"object"}}`
			}
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[%s]}}`+"\n", m.ID, tools)
			if !flooded {
				flooded = true
				for range floodNotifications {
					out.WriteString(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n")
				}
			}
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
		}
		out.Flush()
	}
}

// stdioSpec is the mcpServers entry that runs this test binary as a server.
func stdioSpec(t *testing.T, name string) (string, string) {
	exe, err := os.Executable()
	require.NoError(t, err)
	pidFile := filepath.Join(t.TempDir(), "pid")
	spec := fmt.Sprintf(`{"name":%q,"command":%q,"args":[],"env":[{"name":"ACPBRIDGE_TEST_MCP","value":"stdio"},{"name":"ACPBRIDGE_TEST_MCP_PID","value":%q}]}`, name, exe, pidFile)
	return spec, pidFile
}

// newSessionWith creates a session with mcpServers and returns its id.
func (ta *testAgent) newSessionWith(servers string) string {
	ta.t.Helper()
	ta.call(initLine)
	r := decodeResponse(ta.t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[`+servers+`]}}`))
	require.Nil(ta.t, r.Error, "session/new")
	var res struct{ SessionID string }
	require.NoError(ta.t, json.Unmarshal(r.Result, &res))
	return res.SessionID
}

// gone reports whether the process in pidFile no longer exists.
func gone(t *testing.T, pidFile string) bool {
	return processGone(serverPid(t, pidFile))
}

// serverPid is the pid the MCP server wrote to pidFile.
func serverPid(t *testing.T, pidFile string) int {
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err, "the MCP server wrote no pid")
	pid, _ := strconv.Atoi(string(b))
	return pid
}

// updateKinds summarises updates as "kind status" lines.
func updateKinds(ups []string) []string {
	var out []string
	for _, u := range ups {
		var m struct{ SessionUpdate, Status, Kind string }
		json.Unmarshal([]byte(u), &m)
		var parts []string
		for _, p := range []string{m.SessionUpdate, m.Kind, m.Status} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

// Verify a stdio MCP server's tools end to end: a read-only tool runs
// without asking and its text goes to the model; isError is failed; a tool
// that changes things asks first in ask mode; images pass to the client; a
// tool added later (list_changed) can be called; and session/close ends the
// server's process.
func TestMCP_stdio(t *testing.T) {
	t.Parallel()
	spec, pidFile := stdioSpec(t, "helper")
	fixture := writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"m1","name":"mcp__helper__echo","input":{"text":"hi"}}}]}`,
		`{"expect":"echo: hi","chunks":[{"toolCall":{"id":"m2","name":"mcp__helper__fail","input":{}}}]}`,
		`{"expect":"Error: it broke","chunks":[{"toolCall":{"id":"m3","name":"mcp__helper__touch","input":{}}}]}`,
		`{"expect":"touched","chunks":[{"toolCall":{"id":"m4","name":"mcp__helper__picture","input":{}}}]}`,
		`{"expect":"an image, image/png","chunks":[{"toolCall":{"id":"m5","name":"mcp__helper__add_tool","input":{}}}]}`,
		`{"expect":"added","chunks":[{"toolCall":{"id":"m6","name":"mcp__helper__late","input":{}}}]}`,
		`{"expect":"late tool ran","chunks":[{"text":"All done."}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	sid := ta.newSessionWith(spec)
	ta.send(prompt(2, sid, "use the tools"))
	for _, title := range []string{"touch (helper)", "add_tool (helper)"} {
		req := ta.await(`{"method":"session/request_permission"}`)
		assert.Contains(t, string(req), `"title":"`+title+`"`)
		var perm struct{ ID int }
		json.Unmarshal(req, &perm)
		ta.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`, perm.ID))
	}
	_, r := ta.updatesUntil(2)
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{"stopReason":"end_turn"}`, string(r.Result))
	all := append([]string{}, ta.gotUpdates()...)
	assert.Equal(t, []string{
		"tool_call read pending", "tool_call_update in_progress", "tool_call_update completed", // echo
		"tool_call read pending", "tool_call_update in_progress", "tool_call_update failed", // fail
		"tool_call other pending", "tool_call_update in_progress", "tool_call_update completed", // touch, after asking
		"tool_call read pending", "tool_call_update in_progress", "tool_call_update completed", // picture
		"tool_call other pending", "tool_call_update in_progress", "tool_call_update completed", // add_tool
		"tool_call read pending", "tool_call_update in_progress", "tool_call_update completed", // late
		"agent_message_chunk", "session_info_update",
	}, updateKinds(all))
	joined := strings.Join(all, "\n")
	assert.Contains(t, joined, `"content":[{"type":"content","content":{"type":"text","text":"echo: hi"}}]`)
	assert.Contains(t, joined, `{"type":"content","content":{"data":"iVBORw==","mimeType":"image/png","type":"image"}}`)

	require.False(t, gone(t, pidFile), "the server runs while the session is live")
	ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":%q}}`, sid))
	assert.True(t, gone(t, pidFile), "the server's process ended with session/close")
}

// Verify that an MCP tool's structuredContent of 200 KB reaches the editor
// as a preview (rawOutput within its share), so that no line of the turn,
// nor of its replay on load, outgrows 64 KiB; the model is told the
// tool's text.
func TestMCP_structuredContentPreviewed(t *testing.T) {
	t.Parallel()
	spec, _ := stdioSpec(t, "helper")
	fixture := writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"t1","name":"mcp__helper__table","input":{}}}]}`,
		`{"expect":"4000 rows","chunks":[{"text":"Read."}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	sid := ta.newSessionWith(spec)
	_, r := ta.turnUpdates(2, sid, "read the table")
	require.Nil(t, r.Error)
	joined := strings.Join(ta.gotUpdates(), "\n")
	assert.Contains(t, joined, `"rawOutput":"{\"structuredContent\":{\"rows\":[{\"id\":0`, "a preview of the structured content")
	assert.Contains(t, joined, "not shown here")
	ta.close()
	q := startAgentLike(t, ta, "--model", "replay:"+fixture)
	q.call(initLine)
	q.send(load(1, sid))
	_, r = q.updatesUntil(1)
	require.Nil(t, r.Error)
	for _, l := range append(ta.got, q.got...) {
		assert.Less(t, len(l), 64<<10, "a line of %d bytes: %.120s", len(l), l)
	}
}

// gotUpdates returns the params.update of every session/update read so far.
func (ta *testAgent) gotUpdates() []string {
	var out []string
	for _, l := range ta.got {
		var m struct {
			Method string
			Params struct{ Update json.RawMessage }
		}
		if json.Unmarshal(l, &m) == nil && m.Method == acp.MethodSessionUpdate &&
			(ta.keepUsage || !strings.Contains(string(m.Params.Update), `"sessionUpdate":"usage_update"`)) {
			out = append(out, string(m.Params.Update))
		}
	}
	return out
}

// Verify that a server that fails to start leaves the session working, and
// that the user is told once, in the conversation, at the next turn.
func TestMCP_failsToStart(t *testing.T) {
	t.Parallel()
	fixture := writeFixture(t, `{"chunks":[{"text":"Fine without it."}]}`, `{"chunks":[{"text":"Again."}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	sid := ta.newSessionWith(`{"name":"broken","command":"/nonexistent/mcp-server","args":[],"env":[]}`)
	ups, r := ta.turnUpdates(2, sid, "hi")
	require.Nil(t, r.Error)
	require.NotEmpty(t, ups)
	assert.Contains(t, ups[0], "MCP server `broken` is unavailable")
	assert.Contains(t, ups[0], "/nonexistent/mcp-server")
	assert.Contains(t, ups[1], "Fine without it.")
	ups, _ = ta.turnUpdates(3, sid, "again")
	assert.NotContains(t, strings.Join(ups, "\n"), "unavailable", "told once")
	ta.awaitEvent("mcp_unavailable", "server", "broken") // the log says so too
}

// Verify that a server that dies mid-session fails the call that killed
// it, is reported at the next turn, and its tools fail with a clear error
// from then on; the session goes on.
func TestMCP_dies(t *testing.T) {
	t.Parallel()
	spec, _ := stdioSpec(t, "helper")
	fixture := writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"m1","name":"mcp__helper__die","input":{}}}]}`,
		`{"chunks":[{"text":"It died."}]}`,
		`{"chunks":[{"toolCall":{"id":"m2","name":"mcp__helper__echo","input":{"text":"x"}}}]}`,
		`{"expect":"not running","chunks":[{"text":"Still here."}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	sid := ta.newSessionWith(spec)
	ups, r := ta.turnUpdates(2, sid, "kill it")
	require.Nil(t, r.Error)
	assert.Contains(t, strings.Join(updateKinds(ups), ","), "tool_call_update failed")
	ta.awaitEvent("mcp_stopped")
	ups, r = ta.turnUpdates(3, sid, "try again")
	require.Nil(t, r.Error)
	assert.Contains(t, ups[0], "MCP server `helper` stopped")
	assert.Contains(t, strings.Join(ups, "\n"), "is not running")
}

// Verify that closing stdin ends the process and every stdio server.
func TestMCP_stdinEOF(t *testing.T) {
	t.Parallel()
	spec, pidFile := stdioSpec(t, "helper")
	ta := startAgent(t, "--model", anyModel)
	ta.newSessionWith(spec)
	require.False(t, gone(t, pidFile))
	ta.close()
	// The process exits within a second of EOF, its servers' ending done
	// by then or not (a real process's keeper ends what is left,
	// TestSignal_kill9EndsCommandChildren); here the test process lives
	// on, so the server's end is awaited, bounded.
	assert.True(t, awaitExit(serverPid(t, pidFile), hang), "the server's process ended with stdin")
}

// Verify streamable HTTP and SSE servers, with their headers sent.
func TestMCP_http(t *testing.T) {
	t.Parallel()
	guard := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer t0k" {
				http.Error(w, "no token", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	// A server each: one SDK server behind both transports, its sessions
	// started at once (in-process, the start bound is hang: see
	// startAgentLike).
	httpServer, sseServer := newTestMCPServer(), newTestMCPServer()
	streamable := httptest.NewServer(guard(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return httpServer }, nil)))
	t.Cleanup(streamable.Close)
	sse := httptest.NewServer(guard(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return sseServer }, nil)))
	t.Cleanup(sse.Close)
	fixture := writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"h1","name":"mcp__web__echo","input":{"text":"over http"}}},{"toolCall":{"id":"h2","name":"mcp__old__echo","input":{"text":"over sse"}}}]}`,
		`{"expect":"echo: over sse","chunks":[{"text":"Both."}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	headers := `"headers":[{"name":"Authorization","value":"Bearer t0k"}]`
	sid := ta.newSessionWith(fmt.Sprintf(`{"type":"http","name":"web","url":%q,%s},{"type":"sse","name":"old","url":%q,%s},{"type":"http","name":"locked","url":%q,"headers":[]}`,
		streamable.URL, headers, sse.URL, headers, streamable.URL))
	ups, r := ta.turnUpdates(2, sid, "both transports")
	require.Nil(t, r.Error, "stderr:\n%s", ta.stderr.String())
	joined := strings.Join(ups, "\n")
	assert.Contains(t, ups[0], "MCP server `locked` is unavailable", "the server without its header")
	assert.Contains(t, joined, `"text":"echo: over http"`)
	assert.Contains(t, joined, `"text":"echo: over sse"`)
}

// Verify on the built binary that an MCP server flooding
// notifications/tools/list_changed is read through: the tools are listed
// again once the flood is read, and stdin's end still ends the process
// (on one P it used to wait seconds). What the flood costs in memory is
// held by what the code keeps, not by the process's RSS (which a loaded
// machine moves): TestCoalescingConn_floodHoldsNothing, internal/mcp.
func TestMCP_listChangedFloodBounded(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	p := startProcess(t, nil, "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"ok"}]}`))
	p.newSessionWith(fmt.Sprintf(`{"name":"flood","command":%q,"args":[],"env":[{"name":"ACPBRIDGE_TEST_MCP","value":"flood"}]}`, exe))
	p.events.waitFor(t, `"event":"mcp_tools_changed","server":"flood","tools":2`)
	p.close() // asserts exit status 0
}

// Verify that a close, or stdin's end, written while a session's MCP
// server is starting gives its start up at once, rather than after the
// start-up bound: a server that never answers holds nothing.
func TestMCP_startGivenUp(t *testing.T) {
	t.Parallel()
	silent := `{"name":"silent","command":"sh","args":["-c","exec sleep 600"],"env":[]}`
	newLine := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[` + silent + `]}}`
	t.Run("close", func(t *testing.T) {
		t.Parallel()
		ta := startAgent(t, "--model", anyModel)
		ta.call(initLine)
		ta.sendTogether(newLine, `{"jsonrpc":"2.0","id":2,"method":"session/close","params":{"sessionId":"sess_1"}}`)
		r := decodeResponse(t, ta.await(`{"id":1}`))
		require.Nil(t, r.Error, "the session is created all the same")
		r = decodeResponse(t, ta.await(`{"id":2}`))
		require.Nil(t, r.Error)
		ta.awaitEvent("mcp_unavailable", "server", "silent") // its start given up as the session closed
		ta.close()
	})
	t.Run("EOF", func(t *testing.T) {
		t.Parallel()
		ta := startProcess(t, nil, "--model", anyModel)
		ta.call(initLine)
		ta.send(newLine)
		ta.stdin.Close()
		r := decodeResponse(t, ta.await(`{"id":1}`))
		require.Nil(t, r.Error)
		ta.close()
		ta.awaitEvent("mcp_unavailable", "server", "silent") // its start given up at the connection's end
	})
}
