// Package mcp holds the MCP servers the editor passes in session/new, load and
// resume: stdio (command, args, env), streamable HTTP and SSE (url,
// headers), connected with the official MCP Go SDK. Their tools join the
// built-in ones as mcp__<server>__<tool>.
//
// The rules:
//   - Servers connect concurrently, all within mcpStartTimeout (15 s; a
//     test may give another bound, Options.StartTimeout); the session
//     does not wait longer. A server that fails to start, or dies later, is
//     logged in detail and the user is told once, in the conversation, at
//     the start of the next turn (no update may come before the response
//     that creates the session). The session goes on without its tools.
//   - A tool-list change notification refreshes that server's tools; a call
//     to a name not (yet) listed refreshes once before it fails.
//   - Closing a session closes its servers: a stdio server gets its stdin
//     closed, SIGTERM after mcpGrace, SIGKILL after another; and dies with
//     acpbridge should acpbridge be killed (internal/proc).
package mcp

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"acpbridge/internal/acp"
	"acpbridge/internal/events"
	"acpbridge/internal/proc"
	"acpbridge/internal/tools"
)

const (
	mcpStartTimeout = 15 * time.Second
	mcpGrace        = 200 * time.Millisecond // between closing stdin, SIGTERM and SIGKILL
	nameLimit       = 64                     // function names models accept
)

// ServerSpec is an ACP McpServer as received.
type ServerSpec struct {
	Type    string      `json:"type"` // "" (stdio), "http" or "sse"
	Name    string      `json:"name"`
	Command string      `json:"command"`
	Args    []string    `json:"args"`
	Env     []nameValue `json:"env"`
	URL     string      `json:"url"`
	Headers []nameValue `json:"headers"`
}

type nameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ParseServers decodes the mcpServers param; an absent one is empty.
func ParseServers(raw json.RawMessage) ([]ServerSpec, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var specs []ServerSpec
	if err := json.Unmarshal(raw, &specs); err != nil {
		return nil, acp.InvalidParams("mcpServers", "%s", acp.DescribeJSONError(err))
	}
	for i, s := range specs {
		field := fmt.Sprintf("mcpServers[%d]", i)
		switch {
		case s.Name == "":
			return nil, acp.InvalidParams(field+".name", "required")
		case (s.Type == "" || s.Type == "stdio") && s.Command == "":
			return nil, acp.InvalidParams(field+".command", "required for a stdio server")
		case (s.Type == "http" || s.Type == "sse") && s.URL == "":
			return nil, acp.InvalidParams(field+".url", "required for an %s server", s.Type)
		}
	}
	return specs, nil
}

// Hub is a session's MCP servers.
type Hub struct {
	version string      // acpbridge's, told to the servers
	procs   *proc.Guard // starts and ends stdio servers
	env     []string    // a stdio server's environment before its own env
	log     *slog.Logger
	stderr  io.Writer          // where stdio servers' stderr goes
	cancel  context.CancelFunc // ends the connections' context

	wg sync.WaitGroup // the watch and refresh goroutines; close waits for them

	mu      sync.Mutex // protects the fields below and every server's dead and tools
	servers []*mcpServer
	notices []string // for the user, not yet shown
	closed  bool
}

// mcpServer is one connected server.
type mcpServer struct {
	spec    ServerSpec
	prefix  string // mcp__<server>__
	session *mcp.ClientSession
	pgid    int         // a stdio server's process group, or 0
	tools   []*mcp.Tool // h.mu
	dead    error       // h.mu: why it stopped, once it has
	// h.mu: a refresh of the tools is running, and another is due after it
	// (a flood of list_changed notifications costs one refresh in flight).
	refreshing, stale bool
}

// Tool is one server tool as offered to the model.
type Tool struct {
	name   string // mcp__<server>__<tool>
	server *mcpServer
	tool   *mcp.Tool
}

// Options is what the servers of a session are started with.
type Options struct {
	Version string      // acpbridge's, told to the servers
	Procs   *proc.Guard // starts and ends stdio servers
	// StartTimeout bounds the servers' start; 0 is mcpStartTimeout.
	// In-process tests, whose servers run in the test process on a
	// loaded machine, give a deadlock guard instead.
	StartTimeout time.Duration
	Env          []string // a stdio server's environment before its own env (proc.ChildEnv)
	Log          *slog.Logger
	Stderr       io.Writer // where stdio servers' stderr goes
}

// Start connects the servers of specs, concurrently, within the start-up
// bound (o.StartTimeout, else mcpStartTimeout; see the package comment);
// when opening ends first (the session's close, or the connection's end),
// the servers still connecting are given up at once.
func Start(opening context.Context, specs []ServerSpec, o Options) *Hub {
	h := &Hub{version: o.Version, procs: o.Procs, env: o.Env, log: o.Log, stderr: o.Stderr}
	if len(specs) == 0 {
		return h
	}
	bound := cmp.Or(o.StartTimeout, mcpStartTimeout)
	// The connections live on ctx (an SSE stream is a request made with the
	// context Connect gets); the start-up bound cancels only the servers
	// still connecting when it passes.
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	var all []starting
	used := map[string]bool{}
	for _, spec := range specs {
		prefix := uniquePrefix(spec.Name, used)
		sctx, scancel := context.WithCancel(ctx)
		st := starting{srv: &mcpServer{spec: spec, prefix: prefix}, cancel: scancel, done: make(chan error, 1), bound: bound}
		go func() { st.done <- h.connect(sctx, st.srv) }()
		all = append(all, st)
	}
	h.await(opening, all, bound)
	return h
}

// await waits for the starting servers, up to the start-up bound: those
// that connected serve; the others are reported, to the log and to the
// user (a notice at the next prompt).
func (h *Hub) await(opening context.Context, all []starting, bound time.Duration) {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	expired := false
	for _, st := range all {
		err := st.wait(opening, timer.C, &expired)
		name := st.srv.spec.Name
		if err != nil {
			h.log.Error("MCP server unavailable", events.Of(events.MCPUnavailable), "server", name, "err", err)
			h.notices = append(h.notices, fmt.Sprintf("MCP server `%s` is unavailable: %v. acpbridge goes on without its tools.", name, err))
			continue
		}
		h.servers = append(h.servers, st.srv)
		h.log.Info("MCP server connected", "server", name, "tools", len(st.srv.tools))
	}
}

// uniquePrefix is the prefix of the tools of the server name, mcp__NAME__,
// made unlike the used ones (two servers whose names sanitise alike).
func uniquePrefix(name string, used map[string]bool) string {
	prefix := "mcp__" + sanitize(name, 24) + "__"
	for used[prefix] {
		prefix = prefix[:len(prefix)-2] + "_" + "__"
	}
	used[prefix] = true
	return prefix
}

// starting is a server connecting while Start waits.
type starting struct {
	srv    *mcpServer
	cancel context.CancelFunc
	done   chan error
	bound  time.Duration // the start-up bound, for the error
}

// wait returns how connecting ended, waiting until the start-up deadline;
// once it has passed (expired), a server still connecting is cancelled.
func (st starting) wait(opening context.Context, deadline <-chan time.Time, expired *bool) error {
	if !*expired {
		select {
		case err := <-st.done:
			return err
		case <-deadline:
			*expired = true
		case <-opening.Done():
			*expired = true
		}
	}
	select {
	case err := <-st.done:
		return err
	default:
		st.cancel()
		<-st.done
		if opening.Err() != nil {
			return fmt.Errorf("its start was given up: %v", context.Cause(opening))
		}
		return fmt.Errorf("it did not start within %v", st.bound)
	}
}

func (h *Hub) connect(ctx context.Context, srv *mcpServer) error {
	transport, err := h.transport(srv)
	if err != nil {
		return err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "acpbridge", Version: h.version}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{}, // no roots, no sampling
	})
	session, err := client.Connect(ctx, coalescing{transport, func() { h.refreshSoon(srv) }}, nil)
	if err != nil {
		h.killGroup(srv)
		return fmt.Errorf("connecting failed: %w", err)
	}
	srv.session = session
	tools, err := listTools(ctx, session)
	if err != nil {
		session.Close()
		h.killGroup(srv)
		return fmt.Errorf("listing its tools failed: %w", err)
	}
	srv.tools = tools
	h.goOwned(func() { h.watch(srv) })
	return nil
}

// transport is how srv is reached: its command, started in its own group,
// or its URL with its headers.
func (h *Hub) transport(srv *mcpServer) (mcp.Transport, error) {
	spec := srv.spec
	switch spec.Type {
	case "", "stdio":
		cmd := h.procs.Command(spec.Command, spec.Args)
		cmd.Env = slices.Clone(h.env)
		for _, e := range spec.Env {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
		cmd.Stderr = h.stderr
		// Its own process group, so that close ends what a wrapper (sh -c,
		// npx, uvx) started too; and it dies with acpbridge, even when
		// acpbridge is killed (internal/proc).
		return &groupTransport{CommandTransport: mcp.CommandTransport{Command: cmd, TerminateDuration: mcpGrace}, srv: srv, h: h}, nil
	case "http", "sse":
		client := &http.Client{Transport: headerTransport{headers: spec.Headers, base: http.DefaultTransport}}
		if spec.Type == "http" {
			return &mcp.StreamableClientTransport{Endpoint: spec.URL, HTTPClient: client, DisableStandaloneSSE: true}, nil
		}
		return &mcp.SSEClientTransport{Endpoint: spec.URL, HTTPClient: client}, nil
	}
	return nil, fmt.Errorf("its type %q is not one of stdio, http, sse", spec.Type)
}

// groupTransport is the SDK's command transport that also notes the
// server's process group, for killGroup.
type groupTransport struct {
	mcp.CommandTransport
	srv *mcpServer
	h   *Hub
}

func (t *groupTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	started := t.h.procs.Starting()
	conn, err := t.CommandTransport.Connect(ctx) // it starts the command
	started(t.Command)
	if p := t.Command.Process; p != nil {
		t.srv.pgid = p.Pid
		if err := t.h.procs.Started(t.Command); err != nil {
			t.h.log.Warn("an MCP server's children may outlive acpbridge if it is killed", "server", t.srv.spec.Name, "err", err)
		}
	}
	return conn, err
}

// coalescing is a transport whose connection takes the server's
// notifications/tools/list_changed off the stream before the SDK
// dispatches them (a goroutine each): each one asks for a refresh, which
// refreshSoon coalesces. A server flooding them costs a decode each, and
// nothing queues behind them (100,000 used to hold the end of the process
// for seconds).
type coalescing struct {
	mcp.Transport
	changed func()
}

func (t coalescing) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return coalescingConn{conn, t.changed}, nil
}

type coalescingConn struct {
	mcp.Connection
	changed func()
}

func (c coalescingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if req, ok := msg.(*jsonrpc.Request); ok && err == nil && !req.ID.IsValid() && req.Method == "notifications/tools/list_changed" {
			c.changed()
			// A flood never blocks this loop: let the process's other
			// goroutines run (on one P, stdin's end waited seconds).
			runtime.Gosched()
			continue
		}
		return msg, err
	}
}

// killGroup ends whatever is left of a stdio server's process group: the
// SDK ends only the process it started, and a wrapper's child would live on.
func (h *Hub) killGroup(srv *mcpServer) {
	if srv.pgid > 0 {
		h.procs.KillGroup(srv.pgid)
	}
}

// goOwned runs f on a goroutine that close waits for.
func (h *Hub) goOwned(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		f()
	}()
}

func listTools(ctx context.Context, s *mcp.ClientSession) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// watch notes when a server's connection ends on its own.
func (h *Hub) watch(srv *mcpServer) {
	err := srv.session.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if err == nil {
		err = errors.New("its connection closed")
	}
	err = namedLimit(err)
	srv.dead = err
	h.log.Error("MCP server stopped", events.Of(events.MCPStopped), "server", srv.spec.Name, "err", err)
	h.notices = append(h.notices, fmt.Sprintf("MCP server `%s` stopped (%v). acpbridge goes on without its tools.", srv.spec.Name, err))
}

// refreshSoon refreshes srv's tools on a goroutine of its own (not the
// connection's), unless a refresh is running: then one more runs after it,
// however many notifications came meanwhile.
func (h *Hub) refreshSoon(srv *mcpServer) {
	h.mu.Lock()
	if srv.refreshing {
		srv.stale = true
		h.mu.Unlock()
		return
	}
	srv.refreshing = true
	h.mu.Unlock()
	h.goOwned(func() {
		late := 0 // refreshes in a row that timed out
		for {
			if errors.Is(h.refresh(srv), context.DeadlineExceeded) {
				late++ // a server still flooding the connection: its answer comes later
			} else {
				late = 0
			}
			h.mu.Lock()
			again := (srv.stale || (late > 0 && late < refreshTries)) && !h.closed
			srv.stale, srv.refreshing = false, again
			h.mu.Unlock()
			if !again {
				return
			}
		}
	})
}

// refreshTries is how many refreshes in a row may time out before the
// tools are left as last listed (until the server's next notification).
const refreshTries = 4

// refresh lists a server's tools again.
func (h *Hub) refresh(srv *mcpServer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tools, err := listTools(ctx, srv.session)
	if err != nil {
		h.log.Warn("refreshing an MCP server's tools failed", "server", srv.spec.Name, "err", err)
		return err
	}
	h.mu.Lock()
	srv.tools = tools
	h.mu.Unlock()
	h.log.Info("MCP server's tools changed", events.Of(events.MCPToolsChanged), "server", srv.spec.Name, "tools", len(tools))
	return nil
}

// TakeNotices returns what the user has not been told yet.
func (h *Hub) TakeNotices() []string {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.notices
	h.notices = nil
	return n
}

// Tools lists every live server's tools under their model-facing names.
func (h *Hub) Tools() []Tool {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Tool
	used := map[string]bool{}
	for _, srv := range h.servers {
		if srv.dead != nil {
			continue
		}
		for _, t := range srv.tools {
			name := toolName(srv.prefix, t.Name)
			if used[name] {
				continue
			}
			used[name] = true
			out = append(out, Tool{name: name, server: srv, tool: t})
		}
	}
	return out
}

// Lookup finds a tool by its model-facing name, refreshing the servers'
// lists once when it is not there (a list change not seen yet).
func (h *Hub) Lookup(name string) (Tool, error) {
	find := func() (Tool, bool) {
		for _, t := range h.Tools() {
			if t.name == name {
				return t, true
			}
		}
		return Tool{}, false
	}
	if t, ok := find(); ok {
		return t, nil
	}
	if h == nil {
		return Tool{}, fmt.Errorf("unknown tool %q: no MCP server is connected", name)
	}
	if err := h.refreshFor(name); err != nil {
		return Tool{}, err
	}
	if t, ok := find(); ok {
		return t, nil
	}
	return Tool{}, fmt.Errorf("unknown tool %q: no connected MCP server offers it", name)
}

// refreshFor lists again the tools of the servers whose prefix the tool
// name has, or says that such a server is not running.
func (h *Hub) refreshFor(name string) error {
	h.mu.Lock()
	servers := append([]*mcpServer(nil), h.servers...)
	h.mu.Unlock()
	for _, srv := range servers {
		if !strings.HasPrefix(name, srv.prefix) {
			continue
		}
		h.mu.Lock()
		dead := srv.dead
		h.mu.Unlock()
		if dead != nil {
			return fmt.Errorf("MCP server `%s` is not running (%v)", srv.spec.Name, dead)
		}
		h.refresh(srv)
	}
	return nil
}

// Close ends every server. It returns once they have exited.
func (h *Hub) Close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.closed = true
	servers := h.servers
	h.servers = nil
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Go(func() {
			if err := srv.session.Close(); err != nil {
				h.log.Debug("closing an MCP server", "server", srv.spec.Name, "err", err)
			}
			h.killGroup(srv)
		})
	}
	wg.Wait()
	if h.cancel != nil {
		h.cancel()
	}
	h.wg.Wait() // watch returns once its session has closed; refresh within its timeout
}

// headerTransport adds an HTTP server's configured headers to each request.
type headerTransport struct {
	headers []nameValue
	base    http.RoundTripper
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for _, h := range t.headers {
			req.Header.Set(h.Name, h.Value)
		}
	}
	return t.base.RoundTrip(req)
}

// sanitize keeps letters, digits, '_' and '-', at most n bytes.
func sanitize(s string, n int) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > n {
		b = b[:n]
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

// toolName is prefix + the sanitised tool name, within nameLimit; a
// name cut short ends with a hash of the whole so that it stays unique.
func toolName(prefix, tool string) string {
	name := prefix + sanitize(tool, len(tool)+1)
	if len(name) <= nameLimit {
		return name
	}
	sum := sha256.Sum256([]byte(tool))
	tag := hex.EncodeToString(sum[:4])
	return name[:nameLimit-len(tag)-1] + "_" + tag
}

// Spec is the tool as the model sees it.
func (t Tool) Spec() tools.Spec {
	schema, err := json.Marshal(t.tool.InputSchema)
	if err != nil || len(schema) == 0 || string(schema) == "null" {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	desc := t.tool.Description
	if desc == "" && t.tool.Annotations != nil {
		desc = t.tool.Annotations.Title
	}
	return tools.Spec{Name: t.name, Description: desc, Parameters: schema}
}

// ReadOnly reports whether the server marks the tool as changing nothing.
func (t Tool) ReadOnly() bool {
	return t.tool.Annotations != nil && t.tool.Annotations.ReadOnlyHint
}

// Kind is the ACP tool kind the tool's hints suggest.
func (t Tool) Kind() acp.ToolKind {
	a := t.tool.Annotations
	switch {
	case a == nil || !a.ReadOnlyHint:
		return acp.KindOther
	case a.OpenWorldHint != nil && *a.OpenWorldHint:
		return acp.KindFetch
	}
	return acp.KindRead
}

func (t Tool) Title() string {
	if t.tool.Annotations != nil && t.tool.Annotations.Title != "" {
		return t.tool.Annotations.Title
	}
	if t.tool.Title != "" {
		return t.tool.Title
	}
	return t.tool.Name + " (" + t.server.spec.Name + ")"
}

// Call runs the tool and turns its result into an tools.Outcome.
func (t Tool) Call(ctx context.Context, input json.RawMessage) tools.Outcome {
	res, err := t.server.session.CallTool(ctx, &mcp.CallToolParams{Name: t.tool.Name, Arguments: input})
	if err != nil {
		if ctx.Err() != nil {
			return tools.Failure("cancelled while MCP server `%s` ran %s", t.server.spec.Name, t.tool.Name)
		}
		return tools.Failure("MCP server `%s` failed to run %s: %v", t.server.spec.Name, t.tool.Name, namedLimit(err))
	}
	return outcomeOf(res)
}

// namedLimit is err, naming the limit when it is the SDK's refusal of a
// stdio message over its line limit (which it does not name).
func namedLimit(err error) error {
	if strings.Contains(err.Error(), "exceeded the configured maximum line length") {
		return fmt.Errorf("%w: a stdio MCP server's message may be at most %d MiB, and this one sent a larger one (a tool result that big does not fit)", err, mcp.DefaultMaxLineLength>>20)
	}
	return err
}

// outcomeOf is an MCP tool's result as the call's outcome: its content
// shown to the client, what the model is told, and its structured content.
func outcomeOf(res *mcp.CallToolResult) tools.Outcome {
	var o tools.Outcome
	var text []string
	for _, c := range res.Content {
		if shown, said, ok := toolContent(c); ok {
			o.Content = append(o.Content, shown)
			text = append(text, said)
		}
	}
	if res.StructuredContent != nil {
		b, _ := acp.Marshal(res.StructuredContent)
		if len(text) == 0 {
			o.Content = append(o.Content, acp.TextOut(string(b)))
			text = append(text, string(b))
		}
		o.RawOutput = map[string]json.RawMessage{"structuredContent": b}
	}
	o.Result = strings.Join(text, "\n")
	if o.Result == "" {
		o.Result = "(no output)"
	}
	if res.IsError {
		o.Failed = true
		o.Result = "Error: " + o.Result
	}
	return o
}

// toolContent is one piece of an MCP tool's result as the client is shown
// it and as the model is told it; ok is false for a piece it cannot show.
func toolContent(c mcp.Content) (shown acp.ToolContent, said string, ok bool) {
	block := func(v any) acp.ToolContent { return acp.ToolContent{Type: "content", Content: acp.MustJSON(v)} }
	switch c := c.(type) {
	case *mcp.TextContent:
		return acp.TextOut(c.Text), c.Text, true
	case *mcp.ImageContent:
		return block(map[string]string{"type": "image", "data": base64.StdEncoding.EncodeToString(c.Data), "mimeType": c.MIMEType}),
			fmt.Sprintf("[an image, %s, was shown to the user]", c.MIMEType), true
	case *mcp.AudioContent:
		return block(map[string]string{"type": "audio", "data": base64.StdEncoding.EncodeToString(c.Data), "mimeType": c.MIMEType}),
			fmt.Sprintf("[audio, %s]", c.MIMEType), true
	case *mcp.ResourceLink:
		return block(map[string]string{"type": "resource_link", "uri": c.URI, "name": c.Name}), fmt.Sprintf("[%s](%s)", c.Name, c.URI), true
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return shown, "", false
		}
		res := map[string]string{"uri": r.URI}
		if r.MIMEType != "" {
			res["mimeType"] = r.MIMEType
		}
		said = r.Text
		if r.Blob != nil {
			res["blob"] = base64.StdEncoding.EncodeToString(r.Blob)
			said = fmt.Sprintf("[a resource: %s]", r.URI)
		} else {
			res["text"] = r.Text
		}
		return block(map[string]any{"type": "resource", "resource": res}), said, true
	}
	return shown, "", false
}
