// tools.go holds the built-in tools (read_file, write_file, edit_file,
// run_command), the permission flow and the path rules.
//
// One model tool call goes: prepare (decode the input, resolve paths, title,
// kind) → tool_call pending → permission, if the mode and the session's
// "always" rules ask for it → in_progress → run → tool_call_update completed
// or failed → its result goes back to the model. A call that cannot even be
// prepared (unknown tool, bad input, a path outside the roots) is announced
// and failed the same way, so the user sees it and the model is told.
//
// Files go through the client's fs/* methods and commands through its
// terminal/* methods when the client advertised them; otherwise acpbridge does
// the work itself, within the same roots.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/creachadair/jrpc2"

	"acpbridge/internal/acp"
	"acpbridge/internal/clip"
	"acpbridge/internal/model"
	"acpbridge/internal/store"
)

var builtinTools = []model.Tool{
	{Name: "read_file", Description: "Read a text file, at most 2,000 lines a call (line and limit read a part). Relative paths are resolved against the session's working directory.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"file path"},"line":{"type":"integer","description":"first line to read, 1-based"},"limit":{"type":"integer","description":"most lines to read"}},"required":["path"]}`)},
	{Name: "write_file", Description: "Create or overwrite a text file with the given content.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`)},
	{Name: "edit_file", Description: "Replace old_text with new_text in a file; old_text must occur exactly once.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"old_text":{"type":"string"},"new_text":{"type":"string"}},"required":["path","old_text","new_text"]}`)},
	{Name: "run_command", Description: "Run a shell command line (sh -c) and return its exit status and output.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"cwd":{"type":"string","description":"working directory, default the session's"},"timeout_ms":{"type":"integer","description":"default 120000"}},"required":["command"]}`)},
}

// allBuiltinTools is what the model is offered before any MCP tool.
var allBuiltinTools = append(slices.Clip(builtinTools), exploreTools...)

// Permission classes: which modes ask before a tool runs.
const (
	permRead    = "read"    // never asks
	permEdit    = "edit"    // asks in ask; refused in read_only
	permExecute = "execute" // asks in ask and accept_edits; refused in read_only
)

// capOutcome cuts what a tool returns, to the model and in text content,
// at readMaxBytes, saying so.
func capOutcome(out *outcome) {
	out.result = capResult(out.result)
	for i, c := range out.content {
		if len(c.Text) > readMaxBytes {
			out.content[i] = acp.TextOut(capResult(c.Text))
		}
	}
}

// outcome is what running a tool produced.
type outcome struct {
	failed    bool
	content   []acp.ToolContent
	rawOutput any
	result    string // what the model is told
	after     func() // runs after the final update (releases a terminal)
}

func failure(format string, args ...any) outcome {
	msg := fmt.Sprintf(format, args...)
	return outcome{failed: true, content: []acp.ToolContent{acp.TextOut(msg)}, rawOutput: map[string]string{"error": msg}, result: "Error: " + msg}
}

// prepared is a tool call ready to announce.
type prepared struct {
	call      model.ToolCall
	id        string // the ACP toolCallId
	title     string
	kind      string
	perm      string
	locations []acp.Location
	bad       *outcome // set when the call cannot run
	run       func(ctx context.Context, p *prepared) outcome
}

// runTools runs the model's tool calls in order. When it stops early, each
// call still gets a result in the conversation: the model's next request
// must answer every tool call it made, or servers reject it.
func (a *agent) runTools(ctx context.Context, s *SessionRecord, calls []model.ToolCall) error {
	for i, c := range calls {
		if err := a.runTool(ctx, s, c); err != nil {
			s.conv.AnswerUnrun(calls[i:], "the turn was cancelled")
			return err
		}
	}
	return nil
}

func (a *agent) runTool(ctx context.Context, s *SessionRecord, c model.ToolCall) error {
	p := a.prepare(s, c)
	p.id = a.newID("call")
	var locs json.RawMessage
	if len(p.locations) > 0 {
		locs = acp.MustJSON(p.locations)
	}
	announce := acp.ToolCallUpdate{SessionUpdate: "tool_call", ToolCallID: p.id, Title: p.title, Kind: p.kind,
		Status: "pending", Locations: locs, RawInput: c.Input}
	// Tool updates are not flushed by themselves: the next callback, pause
	// or response flushes them, and local work that blocks flushes first.
	if err := a.toolUpdate(s, &announce); err != nil {
		return err
	}
	if err := s.file.Append(store.Record{Type: store.RecToolCall, ToolCallID: p.id, Call: (*store.Call)(&c), Title: p.title, Kind: p.kind, Locations: locs}); err != nil {
		return err
	}

	var out outcome
	switch {
	case p.bad != nil:
		out = *p.bad
	default:
		allowed, err := a.permit(ctx, s, p)
		if err != nil {
			a.finishTool(s, p, failure("cancelled before it ran"))
			return err
		}
		if allowed != nil {
			out = *allowed
			break
		}
		if err := a.toolUpdate(s, &acp.ToolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: p.id, Status: "in_progress"}); err != nil {
			return err
		}
		out = p.run(ctx, p)
	}
	capOutcome(&out)
	err := a.finishTool(s, p, out)
	if out.after != nil {
		out.after()
	}
	if err != nil {
		return err
	}
	s.conv.Add(model.Message{Role: "tool", ToolCallID: c.ID, Text: out.result})
	if a.stopped(ctx) {
		return errTurnCancelled
	}
	return nil
}

// toolUpdate writes a tool_call or tool_call_update, unflushed.
func (a *agent) toolUpdate(s *SessionRecord, u *acp.ToolCallUpdate) error {
	s.enc = acp.AppendToolCallUpdate(s.enc[:0], s.id, u)
	return a.out.Notify(acp.MethodSessionUpdate, s.enc)
}

// finishTool announces the final status and persists it.
func (a *agent) finishTool(s *SessionRecord, p *prepared, out outcome) error {
	status := "completed"
	if out.failed {
		status = "failed"
	}
	var content, raw json.RawMessage
	if len(out.content) > 0 {
		content = acp.MustJSON(out.content)
	}
	if out.rawOutput != nil {
		raw = acp.MustJSON(out.rawOutput)
	}
	err := a.toolUpdate(s, &acp.ToolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: p.id, Status: status, Content: content, RawOutput: raw})
	if err != nil {
		return err
	}
	rec := store.Record{Type: store.RecToolResult, ToolCallID: p.id, Call: (*store.Call)(&p.call), Status: status, Content: content, RawOutput: raw, Result: out.result}
	if len(out.content) == 1 && out.content[0].Text != "" && out.content[0].Text == out.result {
		// The text is stored once: the result is the content's text.
		rec.Result, rec.ResultIsContent = "", true
	}
	return s.file.Append(rec)
}

// permit decides whether p may run. It returns nil to run it, an outcome
// to fail it with, or errTurnCancelled.
func (a *agent) permit(ctx context.Context, s *SessionRecord, p *prepared) (*outcome, error) {
	a.mu.Lock()
	mode := s.mode
	rule, hasRule := s.rules[p.call.Name]
	a.mu.Unlock()
	if p.perm == permRead || mode == acp.ModeBypass {
		return nil, nil
	}
	if mode == acp.ModeReadOnly {
		o := failure("refused: the session is in read_only mode, which allows no edits, commands or MCP tools that change things; switch the mode to let %s run", p.call.Name)
		return &o, nil
	}
	if mode == acp.ModeAcceptEdits && p.perm == permEdit {
		return nil, nil
	}
	if hasRule {
		if rule {
			return nil, nil
		}
		o := failure("refused: the user chose to always reject %s in this session", p.call.Name)
		return &o, nil
	}
	req := map[string]any{
		"sessionId": s.id,
		"toolCall":  acp.ToolCallUpdate{ToolCallID: p.id, Title: p.title, Kind: p.kind, Status: "pending", RawInput: p.call.Input},
		"options": []map[string]string{
			{"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
			{"optionId": "allow_always", "name": "Always allow " + p.call.Name, "kind": "allow_always"},
			{"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
			{"optionId": "reject_always", "name": "Always reject " + p.call.Name, "kind": "reject_always"},
		},
	}
	var res struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if err := a.call(ctx, s, acp.MethodRequestPermission, req, &res); err != nil {
		if a.stopped(ctx) {
			return nil, errTurnCancelled
		}
		o := failure("the permission request failed: %v", err)
		return &o, nil
	}
	if res.Outcome.Outcome == "cancelled" || ctx.Err() != nil {
		return nil, errTurnCancelled
	}
	if why := unusablePermission(res.Outcome.Outcome, res.Outcome.OptionID); why != "" {
		o := failure("the permission request failed: the client's answer %s, so %s did not run", why, p.call.Name)
		return &o, nil
	}
	switch res.Outcome.OptionID {
	case "allow_once":
		return nil, nil
	case "allow_always", "reject_always":
		allow := res.Outcome.OptionID == "allow_always"
		a.mu.Lock()
		s.rules[p.call.Name] = allow
		a.mu.Unlock()
		if err := s.file.Append(store.Record{Type: store.RecRule, Tool: p.call.Name, Allow: &allow}); err != nil {
			return nil, err
		}
		if allow {
			return nil, nil
		}
	}
	o := failure("the user rejected this %s call", p.call.Name)
	return &o, nil
}

// unusablePermission says what is wrong with a permission answer that is
// neither cancelled nor one of the options offered, or "".
func unusablePermission(outcome, optionID string) string {
	switch {
	case outcome == "":
		return "has no outcome"
	case outcome != "selected":
		return fmt.Sprintf("has the unknown outcome %q", outcome)
	case !slices.Contains([]string{"allow_once", "allow_always", "reject_once", "reject_always"}, optionID):
		return fmt.Sprintf("selects %q, which is not one of the options offered", optionID)
	}
	return ""
}

// call makes a request to the client and decodes its result into res. A
// client's error comes back worded for the person who reads it. Before a
// wait that may be long (a person deciding, a command running) the session
// log is written; a quick fs or terminal call leaves it for the next pause.
func (a *agent) call(ctx context.Context, s *SessionRecord, method string, params, res any) error {
	if method == acp.MethodRequestPermission || method == acp.MethodTerminalWait {
		if err := s.file.Flush(); err != nil {
			return err
		}
	}
	raw, err := a.out.Call(ctx, method, params)
	var rerr *jrpc2.Error
	if errors.As(err, &rerr) {
		return fmt.Errorf("%s (error %d)", rerr.Message, rerr.Code)
	}
	if err != nil {
		return err
	}
	if res == nil {
		return nil
	}
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("the client's answer to %s has no result", method)
	}
	if err := json.Unmarshal(raw, res); err != nil {
		return fmt.Errorf("the client's answer to %s: %s", method, acp.DescribeJSONError(err))
	}
	return nil
}

// prepare decodes a call's input and resolves what it touches.
func (a *agent) prepare(s *SessionRecord, c model.ToolCall) *prepared {
	p := &prepared{call: c, kind: "other", title: c.Name, perm: permExecute}
	fail := func(format string, args ...any) *prepared {
		o := failure(format, args...)
		p.bad = &o
		return p
	}
	decode := func(v any) bool {
		if err := json.Unmarshal(c.Input, v); err != nil {
			fail("invalid input for %s: %s", c.Name, acp.DescribeJSONError(err))
			return false
		}
		return true
	}
	if p, ok := a.prepareExplore(s, p, decode, fail); ok {
		return p
	}
	switch c.Name {
	case "read_file":
		var in struct {
			Path  string `json:"path"`
			Line  *int   `json:"line"`
			Limit *int   `json:"limit"`
		}
		p.kind, p.perm = "read", permRead
		if !decode(&in) {
			return p
		}
		path, err := s.resolve(in.Path)
		p.title = "Read " + s.display(in.Path)
		if err != nil {
			return fail("%v", err)
		}
		w := window{first: 1, limit: readMaxLines}
		if in.Line != nil {
			if *in.Line < 1 {
				return fail("read_file: line must be 1 or more (the first line is 1), not %d", *in.Line)
			}
			w.first = *in.Line
		}
		if in.Limit != nil {
			if *in.Limit < 1 {
				return fail("read_file: limit must be 1 or more, not %d", *in.Limit)
			}
			w.limit = *in.Limit
		}
		line := 0
		if in.Line != nil {
			line = w.first
		}
		p.locations = []acp.Location{{Path: path, Line: line}}
		p.run = func(ctx context.Context, p *prepared) outcome { return a.readFile(ctx, s, path, w) }
	case "write_file":
		var in struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}
		p.kind, p.perm = "edit", permEdit
		if !decode(&in) {
			return p
		}
		path, err := s.resolve(in.Path)
		p.title = "Write " + s.display(in.Path)
		if err != nil {
			return fail("%v", err)
		}
		p.locations = []acp.Location{{Path: path}}
		p.run = func(ctx context.Context, p *prepared) outcome { return a.writeFile(ctx, s, path, in.Content) }
	case "edit_file":
		var in struct {
			Path    string `json:"path"`
			OldText string `json:"old_text"`
			NewText string `json:"new_text"`
		}
		p.kind, p.perm = "edit", permEdit
		if !decode(&in) {
			return p
		}
		path, err := s.resolve(in.Path)
		p.title = "Edit " + s.display(in.Path)
		if err != nil {
			return fail("%v", err)
		}
		if in.OldText == "" {
			return fail("edit_file needs a non-empty old_text")
		}
		p.locations = []acp.Location{{Path: path}}
		p.run = func(ctx context.Context, p *prepared) outcome {
			return a.editFile(ctx, s, path, in.OldText, in.NewText)
		}
	case "run_command":
		var in struct {
			Command   string `json:"command"`
			Cwd       string `json:"cwd"`
			TimeoutMs int64  `json:"timeout_ms"`
		}
		p.kind, p.perm = "execute", permExecute
		if !decode(&in) {
			return p
		}
		p.title = "Run " + clip.Marked(in.Command, 80)
		if strings.TrimSpace(in.Command) == "" {
			return fail("run_command needs a command")
		}
		dir := s.cwd
		if in.Cwd != "" {
			d, err := s.resolve(in.Cwd)
			if err != nil {
				return fail("%v", err)
			}
			dir = d
		}
		timeout := 120 * time.Second
		switch {
		case in.TimeoutMs < 0:
			return fail("run_command: timeout_ms must be positive, not %d", in.TimeoutMs)
		case in.TimeoutMs > maxCommandTimeout.Milliseconds():
			return fail("run_command: timeout_ms may be at most %d (%v), not %d", maxCommandTimeout.Milliseconds(), maxCommandTimeout, in.TimeoutMs)
		case in.TimeoutMs > 0:
			timeout = time.Duration(in.TimeoutMs) * time.Millisecond
		}
		p.run = func(ctx context.Context, p *prepared) outcome {
			return a.runCommand(ctx, s, p, in.Command, dir, timeout)
		}
	default:
		if strings.HasPrefix(c.Name, "mcp__") {
			t, err := s.mcp.lookup(c.Name)
			if err != nil {
				p.title = c.Name
				return fail("%v", err)
			}
			p.kind, p.title, p.perm = t.kind(), t.title(), permExecute
			if t.readOnly() {
				p.perm = permRead
			}
			p.run = func(ctx context.Context, p *prepared) outcome {
				a.pause(s) // the server may take a while
				return t.call(ctx, c.Input)
			}
			return p
		}
		var names []string
		for _, t := range a.tools(s) {
			names = append(names, t.Name)
		}
		p.title = "Unknown tool " + c.Name
		return fail("unknown tool %q; the tools are %s", c.Name, strings.Join(names, ", "))
	}
	return p
}

// tools is what the model is offered: the built-in tools, then the MCP
// servers' tools.
func (a *agent) tools(s *SessionRecord) []model.Tool {
	specs := allBuiltinTools
	if mt := s.mcp.tools(); len(mt) > 0 {
		specs = append(slices.Clip(specs), make([]model.Tool, 0, len(mt))...)
		for _, t := range mt {
			specs = append(specs, t.spec())
		}
	}
	return specs
}

// resolve makes path absolute (relative to cwd) and checks that it lies
// within the session's roots, symlinks resolved.
func (s *SessionRecord) resolve(path string) (string, error) {
	if path == "" {
		return "", errors.New("a path is required")
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(s.cwd, path)
	}
	path = filepath.Clean(path)
	real := ""
	for i, root := range s.roots {
		if within(path, root) {
			// Only the part below the root can hold a symlink not yet resolved.
			rel, _ := filepath.Rel(root, path)
			real = followLinks(s.realRoots[i], strings.Split(rel, "/"), 0)
			break
		}
	}
	if real == "" {
		real = realPath(path) // perhaps an alias of a root through a symlink
	}
	for _, root := range s.realRoots {
		if within(real, root) {
			return path, nil
		}
	}
	return "", fmt.Errorf("%s is outside the session's directories (%s): acpbridge only touches files under them", path, strings.Join(s.roots, ", "))
}

// display shortens a path under cwd for a title.
func (s *SessionRecord) display(path string) string {
	if rel, err := filepath.Rel(s.cwd, filepath.Join(s.cwd, path)); err == nil && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(path) {
		return rel
	}
	return path
}

func within(path, root string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// --- files ---

func (a *agent) clientCaps() acp.ClientCapabilities {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.client
}

// askClientRead reads a file through the client.
func (a *agent) askClientRead(ctx context.Context, s *SessionRecord, path string, line, limit int) (string, error) {
	params := struct {
		SessionID string `json:"sessionId"`
		Path      string `json:"path"`
		Line      int    `json:"line,omitempty"`
		Limit     int    `json:"limit,omitempty"`
	}{s.id, path, line, limit}
	var res struct {
		Content string `json:"content"`
	}
	if err := a.call(ctx, s, acp.MethodFSRead, params, &res); err != nil {
		return "", fmt.Errorf("the editor could not read %s: %v", path, err)
	}
	return res.Content, nil
}

// readWhole reads a whole file (for an edit or a diff) through the client
// when it can, else from disk.
func (a *agent) readWhole(ctx context.Context, s *SessionRecord, path string) (string, error) {
	if _, err := checkRegular(path); err != nil {
		return "", err
	}
	if !a.clientCaps().FS.ReadTextFile {
		return s.readWhole(path)
	}
	text, err := a.askClientRead(ctx, s, path, 0, 0)
	if err == nil && len(text) > wholeFileBytes {
		err = fmt.Errorf("%s is over %d bytes, too large to edit or diff whole; read it in parts with read_file", path, wholeFileBytes)
	}
	return text, err
}

// writeText writes a file through the client when it can, else to disk.
func (a *agent) writeText(ctx context.Context, s *SessionRecord, path, content string) error {
	if _, err := checkRegular(path); err != nil {
		return err
	}
	if a.clientCaps().FS.WriteTextFile {
		// Resolved again: a link may have appeared while permission was asked.
		if _, err := s.resolve(path); err != nil {
			return err
		}
		params := struct {
			SessionID string `json:"sessionId"`
			Path      string `json:"path"`
			Content   string `json:"content"`
		}{s.id, path, content}
		if err := a.call(ctx, s, acp.MethodFSWrite, params, nil); err != nil {
			return fmt.Errorf("the editor could not write %s: %v", path, err)
		}
		return nil
	}
	return s.writeLocal(path, content)
}

// readFile serves read_file: a window of lines within the caps.
func (a *agent) readFile(ctx context.Context, s *SessionRecord, path string, w window) outcome {
	if exists, err := checkRegular(path); err != nil || (!exists && !a.clientCaps().FS.ReadTextFile) {
		if err == nil {
			err = fmt.Errorf("cannot read %s: it does not exist", path)
		}
		return failure("%v", err)
	}
	var text string
	var err error
	if a.clientCaps().FS.ReadTextFile {
		var got string
		line := 0 // the client's default, the first line
		if w.first > 1 {
			line = w.first
		}
		got, err = a.askClientRead(ctx, s, path, line, min(w.limit, readMaxLines)+1) // one more: does the file go on?
		if err == nil {
			text, err = readLines(ctx, strings.NewReader(got), w.first, w)
		}
	} else {
		var f *os.File
		if f, err = s.openLocal(path, os.O_RDONLY, 0); err == nil {
			text, err = readLines(ctx, f, 1, w)
			f.Close()
		}
	}
	if err != nil {
		return failure("%v", err)
	}
	result := text
	if result == "" {
		result = "(empty)"
	}
	return outcome{content: []acp.ToolContent{acp.TextOut(text)}, rawOutput: map[string]any{"path": path, "bytes": len(text)}, result: result}
}

func (a *agent) writeFile(ctx context.Context, s *SessionRecord, path, content string) outcome {
	// A new file's diff has no old text, and the client is not asked for a
	// file that is not on disk (it would answer an error the user sees).
	var old *string
	exists, err := checkRegular(path)
	if err != nil {
		return failure("%v", err)
	}
	if exists {
		prev, err := a.readWhole(ctx, s, path)
		if err != nil {
			return failure("%v", err)
		}
		old = &prev
	}
	if ctx.Err() != nil {
		return failure("cancelled before writing %s", path)
	}
	if err := a.writeText(ctx, s, path, content); err != nil {
		return failure("%v", err)
	}
	return outcome{
		content:   []acp.ToolContent{{Type: "diff", Path: path, OldText: old, NewText: &content}},
		rawOutput: map[string]any{"path": path, "bytes": len(content)},
		result:    fmt.Sprintf("Wrote %d bytes to %s.", len(content), path),
	}
}

func (a *agent) editFile(ctx context.Context, s *SessionRecord, path, oldText, newText string) outcome {
	prev, err := a.readWhole(ctx, s, path)
	if err != nil {
		return failure("%v", err)
	}
	switch n := strings.Count(prev, oldText); n {
	case 1:
	case 0:
		return failure("old_text does not occur in %s; read the file and copy the text exactly", path)
	default:
		return failure("old_text occurs %d times in %s; include more surrounding lines so that it occurs once", n, path)
	}
	next := strings.Replace(prev, oldText, newText, 1)
	if ctx.Err() != nil {
		return failure("cancelled before editing %s", path)
	}
	if err := a.writeText(ctx, s, path, next); err != nil {
		return failure("%v", err)
	}
	return outcome{
		content:   []acp.ToolContent{{Type: "diff", Path: path, OldText: &prev, NewText: &next}},
		rawOutput: map[string]any{"path": path},
		result:    fmt.Sprintf("Edited %s: replaced 1 occurrence.", path),
	}
}
