// session.go holds the agent, its one optional SessionRecord, and every
// session method: initialize, session/new, load, resume, list, delete, close,
// prompt, cancel, set_mode and set_config_option.
//
// The rules:
//   - The agent holds at most one *SessionRecord. It is set (not yet ready)
//     the moment a session/new, load or resume claims it, so a second one is
//     rejected even while the first is being created or loaded.
//   - The rejection uses codeSessionLive, names the live id, and carries
//     {"activeSessionId": id}. The live session is not touched.
//   - A record has at most one running turn. session/cancel cancels it;
//     session/close cancels it, waits for it, and frees the record.
//   - a.mu protects a.sess and every mutable field of the record; the turn
//     goroutine takes it for the short reads it needs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/creachadair/jrpc2"
	"github.com/creachadair/jrpc2/handler"
)

// config is the parsed command line.
type config struct {
	modelSpec       string
	stateDir        string
	baseURL         string
	record          string
	trace           string
	maxTurnRequests int
	maxLineBytes    int
	models          []string // --models
}

// agent serves one connection.
type agent struct {
	cfg      config
	out      *wire
	srv      *jrpc2.Server
	model    model     // nil when no model is configured
	recorder *recorder // --record, or nil
	store    *store
	log      *slog.Logger
	stderr   io.Writer // where child processes' stderr goes
	newID    func(prefix string) string
	now      func() time.Time

	mu          sync.Mutex // protects the fields below and the live record's fields
	initialized bool
	client      clientCapabilities
	sess        *SessionRecord
}

// SessionRecord is the one session this process serves.
type SessionRecord struct {
	id        string
	cwd       string
	roots     []string // cwd, then the additional directories
	realRoots []string // roots with their symlinks resolved

	ready   bool               // false while session/new, load or resume is still opening it
	abort   context.CancelFunc // ends an opening load; set while !ready
	opened  chan struct{}      // closed when opening has finished, either way
	closing bool               // session/close has begun: no new turn may start
	turn    *turn              // the running turn, or nil

	title   string
	mode    string
	rules   map[string]bool // tool name → allow (true) or reject (false) always
	created time.Time
	updated time.Time

	mcp  *mcpHub       // the session's MCP servers
	file *sessionFile  // the persisted log; nil only while opening
	conv *conversation // what the model is sent
	enc  []byte        // scratch for encoding the turn's tool updates
}

// turn is one running session/prompt.
type turn struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the prompt handler has finished
}

// handlers is the dispatch table: every ACP method acpbridge serves.
func (a *agent) handlers() handler.Map {
	return handler.Map{
		methodInitialize:     a.guard(a.initialize),
		methodAuthenticate:   a.guard(a.authenticate),
		methodSessionNew:     a.guard(a.session(a.newSession)),
		methodSessionLoad:    a.guard(a.session(a.loadSession)),
		methodSessionResume:  a.guard(a.session(a.resumeSession)),
		methodSessionList:    a.guard(a.session(a.listSessions)),
		methodSessionDelete:  a.guard(a.session(a.deleteSession)),
		methodSessionClose:   a.guard(a.session(a.closeSession)),
		methodSessionPrompt:  a.guard(a.session(a.prompt)),
		methodSessionCancel:  a.guard(a.cancel),
		methodSessionSetMode: a.guard(a.session(a.setMode)),
		methodSessionSetConf: a.guard(a.session(a.setConfigOption)),
		methodCancelRequest:  a.guard(a.cancelRequest),
	}
}

// guard turns a panic into an internal error and every error into a
// *jrpc2.Error, so that no handler can end the process or leak jrpc2's codes.
func (a *agent) guard(h jrpc2.Handler) jrpc2.Handler {
	return func(ctx context.Context, req *jrpc2.Request) (res any, err error) {
		defer func() {
			if p := recover(); p != nil {
				a.log.Error("handler panicked", "method", req.Method(), "panic", p, "stack", string(debug.Stack()))
				res, err = nil, rpcError(codeInternal, "internal error in %s: %v (a bug in acpbridge; the process keeps serving)", req.Method(), p)
			}
		}()
		res, err = h(ctx, req)
		if err != nil {
			err = asRPCError(err)
		}
		return res, err
	}
}

// session requires initialize first.
func (a *agent) session(h jrpc2.Handler) jrpc2.Handler {
	return func(ctx context.Context, req *jrpc2.Request) (any, error) {
		a.mu.Lock()
		ok := a.initialized
		a.mu.Unlock()
		if !ok {
			return nil, rpcError(codeNotInitialized, "%s before initialize: send initialize first", req.Method())
		}
		return h(ctx, req)
	}
}

// decodeParams decodes req's params into v and names the field on failure.
func decodeParams(req *jrpc2.Request, v any) error {
	if !req.HasParams() {
		return nil
	}
	var raw json.RawMessage
	if err := req.UnmarshalParams(&raw); err != nil {
		return rpcError(codeInvalidParams, "invalid params: %v", err)
	}
	if len(raw) > 0 && raw[0] == '[' {
		return invalidParams("params", "must be an object, not an array")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return invalidParams(te.Field, "must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
		}
		return rpcError(codeInvalidParams, "invalid params: %s", describeJSONError(err))
	}
	return nil
}

// required returns *p or an error naming field.
func required(field string, p *string) (string, error) {
	if p == nil {
		return "", invalidParams(field, "required")
	}
	return *p, nil
}

func (a *agent) initialize(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p initializeParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.initialized = true
	a.client = p.ClientCapabilities
	a.mu.Unlock()
	return initializeResult{
		ProtocolVersion: protocolVersion,
		AgentCapabilities: agentCapabilities{
			LoadSession:        true,
			PromptCapabilities: promptCapabilities{EmbeddedContext: true},
			McpCapabilities:    mcpCapabilities{HTTP: true, SSE: true},
			SessionCapabilities: sessionCapabilities{
				Close:                 supported,
				List:                  supported,
				Resume:                supported,
				Delete:                supported,
				AdditionalDirectories: supported,
			},
		},
		AuthMethods: []struct{}{},
		AgentInfo:   implementation{Name: "acpbridge", Title: "acpbridge", Version: version},
	}, nil
}

// authenticate succeeds: acpbridge advertises no auth methods and takes its
// model key from the environment.
func (a *agent) authenticate(ctx context.Context, req *jrpc2.Request) (any, error) {
	return struct{}{}, nil
}

// errSessionLive is the one-session rule's rejection.
func errSessionLive(id string) error {
	return rpcError(codeSessionLive,
		"acpbridge serves one session per process and session %s is live here; close it with session/close, or start another acpbridge process for another conversation", id).
		WithData(map[string]string{"activeSessionId": id})
}

// claim makes a new, not yet ready record with id the live one, or fails
// with the one-session rejection.
func (a *agent) claim(id string) (*SessionRecord, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sess != nil {
		return nil, errSessionLive(a.sess.id)
	}
	s := &SessionRecord{id: id, opened: make(chan struct{}), rules: map[string]bool{}}
	a.sess = s
	return s, nil
}

// finishOpen makes s ready, or frees the slot when err is set.
func (a *agent) finishOpen(s *SessionRecord, err error) {
	a.mu.Lock()
	if err == nil {
		s.ready = true
	} else if a.sess == s {
		a.sess = nil
	}
	s.abort = nil
	a.mu.Unlock()
	close(s.opened)
	if err != nil {
		s.mcp.close()
		if s.file != nil {
			s.file.close()
		}
	}
}

// setRoots sets the session's roots; roots[0] is the cwd.
func (s *SessionRecord) setRoots(roots []string) {
	s.cwd, s.roots = roots[0], roots
	s.realRoots = make([]string, len(roots))
	for i, r := range roots {
		s.realRoots[i] = realPath(r)
	}
}

// checkRoots validates cwd and the additional directories: absolute paths
// of existing directories.
func checkRoots(cwd *string, extra []string) ([]string, error) {
	if cwd == nil {
		return nil, invalidParams("cwd", "required: the absolute path of the session's working directory")
	}
	roots := append([]string{*cwd}, extra...)
	for i, dir := range roots {
		field := "cwd"
		if i > 0 {
			field = fmt.Sprintf("additionalDirectories[%d]", i-1)
		}
		if !filepath.IsAbs(dir) {
			return nil, invalidParams(field, "%q is not an absolute path", dir)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			return nil, invalidParams(field, "%q does not exist", dir)
		}
		if !fi.IsDir() {
			return nil, invalidParams(field, "%q is not a directory", dir)
		}
		roots[i] = filepath.Clean(dir)
	}
	return roots, nil
}

func (a *agent) newSession(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p sessionParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	roots, err := checkRoots(p.Cwd, p.AdditionalDirectories)
	if err != nil {
		return nil, err
	}
	specs, err := parseMCPServers(p.McpServers)
	if err != nil {
		return nil, err
	}
	s, err := a.claim(a.newID("sess"))
	if err != nil {
		return nil, err
	}
	s.setRoots(roots)
	s.mode = modeAsk
	s.created = a.now()
	s.updated = s.created
	s.conv = newConversation(a.model)
	s.file, err = a.store.create(s)
	if err == nil {
		s.mcp = startMCP(specs, a.log, a.stderr)
	}
	a.finishOpen(s, err)
	if err != nil {
		return nil, err
	}
	a.log.Info("session created", "session", s.id, "cwd", s.cwd)
	return newSessionResult{SessionID: s.id, Modes: s.modeState(), ConfigOptions: a.configOptions(s)}, nil
}

func (a *agent) loadSession(ctx context.Context, req *jrpc2.Request) (any, error) {
	return a.openSession(ctx, req, true)
}

func (a *agent) resumeSession(ctx context.Context, req *jrpc2.Request) (any, error) {
	return a.openSession(ctx, req, false)
}

// openSession serves session/load (replay true) and session/resume.
func (a *agent) openSession(ctx context.Context, req *jrpc2.Request, replay bool) (any, error) {
	var p sessionParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	id, err := required("sessionId", p.SessionID)
	if err != nil {
		return nil, err
	}
	roots, err := checkRoots(p.Cwd, p.AdditionalDirectories)
	if err != nil {
		return nil, err
	}
	specs, err := parseMCPServers(p.McpServers)
	if err != nil {
		return nil, err
	}
	s, err := a.claim(id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.mu.Lock()
	s.abort = cancel
	a.mu.Unlock()

	err = a.restore(ctx, s, roots, replay)
	if err == nil && ctx.Err() == nil {
		s.mcp = startMCP(specs, a.log, a.stderr)
	}
	if ctx.Err() != nil {
		err = rpcError(codeRequestCancelled, "loading session %s was ended by session/close", id)
	}
	a.finishOpen(s, err)
	if err != nil {
		return nil, err
	}
	a.log.Info("session opened", "session", s.id, "replay", replay, "cwd", s.cwd)
	return openSessionResult{Modes: s.modeState(), ConfigOptions: a.configOptions(s)}, nil
}

// restore reads s from the store, takes its lock, and replays its history
// when asked. The roots of the request replace the stored ones.
func (a *agent) restore(ctx context.Context, s *SessionRecord, roots []string, replay bool) error {
	conv := newConversation(a.model)
	hist, f, err := a.store.open(ctx, s.id, conv)
	if err != nil {
		return err
	}
	s.conv = conv
	s.file = f
	s.setRoots(roots)
	s.title, s.mode, s.created, s.updated = hist.title, hist.mode, hist.created, hist.updated
	maps.Copy(s.rules, hist.rules)
	if hist.model != "" && a.model != nil && slices.Contains(a.model.models(), hist.model) {
		a.model.choose(hist.model)
	}
	if err := f.writeInfo(a.store.info(s)); err != nil {
		return err
	}
	if !replay {
		return nil
	}
	return f.replay(hist.good, func(rec record) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return a.replayRecord(s.id, rec)
	})
}

func (a *agent) closeSession(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p sessionIDParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	id, err := required("sessionId", p.SessionID)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	s := a.sess
	if s == nil || s.id != id {
		a.mu.Unlock()
		return nil, a.errNotLive(id)
	}
	if !s.ready {
		// A load or resume in progress: end it; it frees the slot itself.
		if s.abort != nil {
			s.abort()
		}
		a.log.Info("session/close ends the load of the session", "session", id)
		a.mu.Unlock()
		<-s.opened
		return struct{}{}, nil
	}
	if s.closing {
		a.mu.Unlock()
		return nil, a.errNotLive(id)
	}
	s.closing = true
	t := s.turn
	a.mu.Unlock()
	if t != nil {
		t.cancel()
		<-t.done
	}
	a.release(s)
	a.log.Info("session closed", "session", id)
	return struct{}{}, nil
}

// release frees the live record s and closes what it holds.
func (a *agent) release(s *SessionRecord) {
	a.mu.Lock()
	if a.sess == s {
		a.sess = nil
	}
	a.mu.Unlock()
	s.mcp.close()
	if s.file != nil {
		if err := s.file.close(); err != nil {
			a.log.Error("closing session file", "session", s.id, "err", err)
		}
	}
}

// shutdown ends the live session when the connection is gone.
func (a *agent) shutdown() {
	a.mu.Lock()
	s := a.sess
	var t *turn
	if s != nil {
		s.closing = true
		t = s.turn
	}
	a.mu.Unlock()
	if s == nil {
		return
	}
	if t != nil {
		t.cancel()
		<-t.done
	}
	if s.ready {
		a.release(s)
	}
}

// errNotLive answers a request for a session this process does not serve.
func (a *agent) errNotLive(id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sess == nil {
		return rpcError(codeResourceNotFound, "session %s is not live in this process (no session is); open it with session/load or session/resume, or create one with session/new", id).
			WithData(map[string]string{"sessionId": id})
	}
	return rpcError(codeResourceNotFound, "session %s is not live in this process; the live session is %s", id, a.sess.id).
		WithData(map[string]string{"sessionId": id, "activeSessionId": a.sess.id})
}

// live returns the ready, not closing record with id.
func (a *agent) liveLocked(id string) *SessionRecord {
	s := a.sess
	if s == nil || s.id != id || !s.ready || s.closing {
		return nil
	}
	return s
}

func (a *agent) prompt(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p promptParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	id, err := required("sessionId", p.SessionID)
	if err != nil {
		return nil, err
	}
	if p.Prompt == nil {
		return nil, invalidParams("prompt", "required: an array of content blocks")
	}
	blocks, err := parsePrompt(p.Prompt)
	if err != nil {
		return nil, err
	}
	if a.model == nil {
		return nil, rpcError(codeNoModel,
			"no model is configured: start acpbridge with --model openai:MODEL (with OPENAI_API_KEY, and --base-url for Ollama and other servers) or --model replay:FIXTURE.jsonl, or set ACPBRIDGE_MODEL")
	}
	a.mu.Lock()
	s := a.liveLocked(id)
	if s == nil {
		a.mu.Unlock()
		return nil, a.errNotLive(id)
	}
	if s.turn != nil {
		a.mu.Unlock()
		return nil, rpcError(codeTurnRunning,
			"a turn is already running in session %s; wait for its response or cancel it with session/cancel before sending another prompt", id)
	}
	tctx, cancel := context.WithCancel(ctx)
	t := &turn{cancel: cancel, done: make(chan struct{})}
	s.turn = t
	a.mu.Unlock()
	defer func() {
		cancel()
		a.mu.Lock()
		s.turn = nil
		a.mu.Unlock()
		close(t.done)
	}()

	stop, err := a.runTurn(tctx, s, blocks, p.Prompt)
	if err != nil {
		return nil, err
	}
	return promptResult{StopReason: stop}, nil
}

// cancel serves session/cancel. It only cancels: a notification handler
// must return at once (later messages wait for it).
func (a *agent) cancel(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p sessionIDParams
	if err := decodeParams(req, &p); err != nil || p.SessionID == nil {
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sess; s != nil && s.id == *p.SessionID && s.turn != nil {
		s.turn.cancel()
	}
	return nil, nil
}

// cancelRequest accepts $/cancel_request and ignores it: a turn is
// cancelled with session/cancel, and every other request is answered at once.
func (a *agent) cancelRequest(ctx context.Context, req *jrpc2.Request) (any, error) {
	return nil, nil
}

// parsePrompt checks every block of a prompt.
func parsePrompt(raw []json.RawMessage) ([]contentBlock, error) {
	blocks := make([]contentBlock, len(raw))
	for i, r := range raw {
		field := fmt.Sprintf("prompt[%d]", i)
		b := &blocks[i]
		if err := json.Unmarshal(r, b); err != nil {
			return nil, invalidParams(field, "not a content block: %v", err)
		}
		switch b.Type {
		case "text":
			if b.Text == nil {
				return nil, invalidParams(field+".text", "required for a text block")
			}
		case "resource_link":
			if b.URI == "" || b.Name == "" {
				return nil, invalidParams(field, "a resource_link needs uri and name")
			}
		case "resource":
			if b.Resource == nil || b.Resource.URI == "" || (b.Resource.Text == nil && b.Resource.Blob == nil) {
				return nil, invalidParams(field+".resource", "an embedded resource needs uri and text or blob")
			}
		case "image", "audio":
			return nil, invalidParams(field, "%s content is not supported (promptCapabilities.%s is false); send text, resource_link or resource blocks", b.Type, b.Type)
		case "":
			return nil, invalidParams(field+".type", "required")
		default:
			return nil, invalidParams(field+".type", "unknown content block type %q", b.Type)
		}
	}
	return blocks, nil
}

// promptText renders a prompt as the text the model reads.
func promptText(blocks []contentBlock) string {
	var sb strings.Builder
	for i, b := range blocks {
		if i > 0 {
			sb.WriteString("\n\n")
		}
		switch b.Type {
		case "text":
			sb.WriteString(*b.Text)
		case "resource_link":
			fmt.Fprintf(&sb, "[%s](%s)", b.Name, b.URI)
		case "resource":
			r := b.Resource
			if r.Text != nil {
				fmt.Fprintf(&sb, "<resource uri=%q>\n%s\n</resource>", r.URI, *r.Text)
			} else {
				fmt.Fprintf(&sb, "<resource uri=%q mimeType=%q>(binary, %d base64 bytes)</resource>", r.URI, r.MimeType, len(*r.Blob))
			}
		}
	}
	return sb.String()
}

// titleFrom makes a session title from the first prompt.
func titleFrom(blocks []contentBlock) string {
	var t string
	for _, b := range blocks {
		switch {
		case b.Type == "text" && strings.TrimSpace(*b.Text) != "":
			t = *b.Text
		case b.Type == "resource_link":
			t = b.Name
		case b.Type == "resource":
			t = filepath.Base(b.Resource.URI)
		}
		if t != "" {
			break
		}
	}
	t = strings.TrimSpace(t)
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		t = strings.TrimSpace(t[:i])
	}
	if r := []rune(t); len(r) > 80 {
		t = string(r[:79]) + "…"
	}
	return t
}

// update sends a session/update with a struct payload and flushes.
func (a *agent) update(sessionID string, u any) error {
	if err := a.out.notifyJSON(sessionID, u); err != nil {
		return err
	}
	return a.out.flush()
}

// --- modes and config options ---

const (
	modeAsk         = "ask"
	modeAcceptEdits = "accept_edits"
	modeReadOnly    = "read_only"
	modeBypass      = "bypass"
)

var sessionModes = []sessionMode{
	{ID: modeAsk, Name: "Ask", Description: "Ask before every edit, command and MCP tool that changes things"},
	{ID: modeAcceptEdits, Name: "Accept edits", Description: "Edit files without asking; ask before commands and MCP tools"},
	{ID: modeReadOnly, Name: "Read only", Description: "Refuse edits, commands and MCP tools that change things"},
	{ID: modeBypass, Name: "Bypass", Description: "Never ask"},
}

func (s *SessionRecord) modeState() *modeState {
	return &modeState{CurrentModeID: s.mode, AvailableModes: sessionModes}
}

// configOptions lists the session's config options with current values.
func (a *agent) configOptions(s *SessionRecord) []configOption {
	modes := make([]selectOption, len(sessionModes))
	for i, m := range sessionModes {
		modes[i] = selectOption{Value: m.ID, Name: m.Name, Description: m.Description}
	}
	opts := []configOption{{
		ID: "mode", Name: "Mode", Category: "mode", Type: "select",
		Description: "When acpbridge asks before using a tool", CurrentValue: s.mode, Options: modes,
	}}
	if a.model != nil {
		var models []selectOption
		for _, m := range a.model.models() {
			models = append(models, selectOption{Value: m, Name: m})
		}
		opts = append(opts, configOption{
			ID: "model", Name: "Model", Category: "model", Type: "select",
			CurrentValue: a.model.current(), Options: models,
		})
	}
	return opts
}

func (a *agent) setMode(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p setModeParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	id, err := required("sessionId", p.SessionID)
	if err != nil {
		return nil, err
	}
	mode, err := required("modeId", p.ModeID)
	if err != nil {
		return nil, err
	}
	if _, err := a.changeMode(id, mode, "modeId"); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (a *agent) setConfigOption(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p setConfigParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	id, err := required("sessionId", p.SessionID)
	if err != nil {
		return nil, err
	}
	cid, err := required("configId", p.ConfigID)
	if err != nil {
		return nil, err
	}
	var value string
	if err := json.Unmarshal(p.Value, &value); err != nil {
		return nil, invalidParams("value", "required: a string value id")
	}
	switch cid {
	case "mode":
		opts, err := a.changeMode(id, value, "value")
		if err != nil {
			return nil, err
		}
		return configOptionsResult{ConfigOptions: opts}, nil
	case "model":
		return a.changeModel(id, value)
	}
	return nil, invalidParams("configId", "unknown config option %q; the options are mode and model", cid)
}

// changeMode sets the mode, persists it and announces it both ways.
func (a *agent) changeMode(id, mode, field string) ([]configOption, error) {
	if !slices.ContainsFunc(sessionModes, func(m sessionMode) bool { return m.ID == mode }) {
		return nil, invalidParams(field, "unknown mode %q; the modes are ask, accept_edits, read_only and bypass", mode)
	}
	a.mu.Lock()
	s := a.liveLocked(id)
	if s == nil {
		a.mu.Unlock()
		return nil, a.errNotLive(id)
	}
	s.mode = mode
	opts := a.configOptions(s)
	a.mu.Unlock()
	if err := s.file.appendNow(record{Type: recConfig, Mode: mode}); err != nil {
		return nil, err
	}
	a.update(id, currentModeUpdate{SessionUpdate: "current_mode_update", CurrentModeID: mode})
	a.update(id, configOptionUpdate{SessionUpdate: "config_option_update", ConfigOptions: opts})
	return opts, nil
}

// changeModel picks the model for the next model call and persists it.
func (a *agent) changeModel(id, name string) (any, error) {
	if a.model == nil || !slices.Contains(a.model.models(), name) {
		var names []string
		if a.model != nil {
			names = a.model.models()
		}
		return nil, invalidParams("value", "unknown model %q; the models are %s", name, strings.Join(names, ", "))
	}
	a.mu.Lock()
	s := a.liveLocked(id)
	if s == nil {
		a.mu.Unlock()
		return nil, a.errNotLive(id)
	}
	a.model.choose(name)
	opts := a.configOptions(s)
	a.mu.Unlock()
	if err := s.file.appendNow(record{Type: recConfig, Model: name}); err != nil {
		return nil, err
	}
	a.update(id, configOptionUpdate{SessionUpdate: "config_option_update", ConfigOptions: opts})
	return configOptionsResult{ConfigOptions: opts}, nil
}

func (a *agent) listSessions(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p listParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	if p.Cwd != "" && !filepath.IsAbs(p.Cwd) {
		return nil, invalidParams("cwd", "%q is not an absolute path", p.Cwd)
	}
	return a.store.list(p.Cwd, p.Cursor)
}

func (a *agent) deleteSession(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p sessionIDParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	id, err := required("sessionId", p.SessionID)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	live := a.sess != nil && a.sess.id == id
	a.mu.Unlock()
	if live {
		return nil, rpcError(codeSessionLive, "session %s is live in this process and cannot be deleted; close it with session/close first", id).
			WithData(map[string]string{"activeSessionId": id})
	}
	if err := a.store.remove(id); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}
