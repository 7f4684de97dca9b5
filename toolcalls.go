// toolcalls.go holds a turn's tool calls, the flow each one takes:
// prepare (internal/tools, or an MCP server's tool) → tool_call pending →
// permission, if the mode and the session's "always" rules ask for it →
// in_progress → run → tool_call_update completed or failed → its result
// goes back to the model. A call that
// cannot even be prepared (unknown tool, bad input, a path outside the
// roots) is announced and failed the same way, so the user sees it and the
// model is told. It also gives the tools the session as tools.Client.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/creachadair/jrpc2"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
	"acpbridge/internal/proc"
	"acpbridge/internal/store"
	"acpbridge/internal/tools"
)

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
	id := a.newID("call")
	if err := a.announce(s, c, p, id); err != nil {
		return err
	}
	out, err := a.runPrepared(ctx, s, c, p, id)
	if err != nil {
		return errors.Join(err, a.finishTool(s, c, id, tools.Failure("cancelled before it ran")))
	}
	tools.Cap(&out)
	tools.Redact(&out, a.keys.secret(), "["+proc.KeyVar+"]")
	tools.Preview(&out) // what the editor is shown; the model gets out.Result
	err = a.finishTool(s, c, id, out)
	if out.After != nil {
		out.After()
	}
	if err != nil {
		return err
	}
	s.conv.Add(model.Message{Role: "tool", ToolCallID: c.ID, Text: out.Result})
	if a.stopped(ctx) {
		return errTurnCancelled
	}
	return nil
}

// announce tells the client of the tool call id and logs it. The update is
// not flushed by itself: the next callback, pause or response flushes it,
// and local work that blocks flushes first.
func (a *agent) announce(s *SessionRecord, c model.ToolCall, p *tools.Call, id string) error {
	var locs json.RawMessage
	if len(p.Locations) > 0 {
		locs = acp.LocationsJSON(p.Locations)
	}
	start := acp.ToolCallStart(id, c.Name, p.Title, p.Kind, locs, c.Input)
	if err := a.toolUpdate(s, &start); err != nil {
		return err
	}
	return s.file.Append(store.Record{Type: store.RecToolCall, ToolCallID: id, Call: storedCall(c), Title: p.Title, Kind: string(p.Kind), Locations: locs})
}

// runPrepared asks permission when it must and runs the call; an error
// means the turn was cancelled (or the client is gone) before it ran.
func (a *agent) runPrepared(ctx context.Context, s *SessionRecord, c model.ToolCall, p *tools.Call, id string) (tools.Outcome, error) {
	if p.Err != nil {
		return tools.Failure("%v", p.Err), nil
	}
	refused, err := a.permit(ctx, s, c, p, id)
	if err != nil || refused != nil {
		return derefOutcome(refused), err
	}
	if err := a.toolUpdate(s, new(acp.ToolCallProgress(id, acp.StatusInProgress, nil, nil))); err != nil {
		return tools.Outcome{}, err
	}
	return p.Run(ctx, id), nil
}

func derefOutcome(o *tools.Outcome) tools.Outcome {
	if o == nil {
		return tools.Outcome{}
	}
	return *o
}

// toolUpdate writes a tool_call or tool_call_update, unflushed.
func (a *agent) toolUpdate(s *SessionRecord, u *acp.ToolCallUpdate) error {
	s.enc = acp.AppendToolCallUpdate(s.enc[:0], s.id, u)
	return a.out.Notify(acp.MethodSessionUpdate, s.enc)
}

// finishTool announces the final status and persists it.
func (a *agent) finishTool(s *SessionRecord, c model.ToolCall, id string, out tools.Outcome) error {
	status := acp.StatusCompleted
	if out.Failed {
		status = acp.StatusFailed
	}
	var content, raw json.RawMessage
	if len(out.Content) > 0 {
		content = acp.AppendToolContents(nil, out.Content)
	}
	if out.RawOutput != nil {
		if r, ok := out.RawOutput.(json.RawMessage); ok {
			raw = r // made by hand, compact already
		} else {
			raw = acp.MustJSON(out.RawOutput)
		}
	}
	err := a.toolUpdate(s, new(acp.ToolCallProgress(id, status, content, raw)))
	if err != nil {
		return err
	}
	rec := store.Record{Type: store.RecToolResult, ToolCallID: id, Call: storedCall(c), Status: string(status), Content: content, RawOutput: raw, Result: out.Result}
	if len(out.Content) == 1 && out.Content[0].Text != "" && out.Content[0].Text == out.Result {
		// The text is stored once: the result is the content's text.
		rec.Result, rec.ResultIsContent = "", true
	}
	return s.file.Append(rec)
}

// permit decides whether p may run: the mode and the session's rules, or
// else the user, asked through the client. It returns nil to run it, an
// outcome to fail it with, or errTurnCancelled.
func (a *agent) permit(ctx context.Context, s *SessionRecord, c model.ToolCall, p *tools.Call, id string) (*tools.Outcome, error) {
	if o, decided := a.permitWithoutAsking(s, c, p); decided {
		return o, nil
	}
	var res acp.PermissionResponse
	if err := a.call(ctx, s, acp.MethodRequestPermission, acp.NewPermissionRequest(s.id, id, c.Name, p.Title, p.Kind, c.Input), &res); err != nil {
		if a.stopped(ctx) {
			return nil, errTurnCancelled
		}
		o := tools.Failure("the permission request failed: %v", err)
		return &o, nil
	}
	if res.Outcome.Outcome == "cancelled" || ctx.Err() != nil {
		return nil, errTurnCancelled
	}
	if why := unusablePermission(res.Outcome.Outcome, res.Outcome.OptionID); why != "" {
		o := tools.Failure("the permission request failed: the client's answer %s, so %s did not run", why, c.Name)
		return &o, nil
	}
	switch res.Outcome.OptionID {
	case acp.AllowOnce:
		return nil, nil
	case acp.AllowAlways, acp.RejectAlways:
		allow := res.Outcome.OptionID == acp.AllowAlways
		if _, _, err := s.box.change(store.Record{Type: store.RecRule, Tool: c.Name, Allow: &allow}); err != nil {
			return nil, err
		}
		if allow {
			return nil, nil
		}
	}
	rejected := tools.Failure("the user rejected this %s call", c.Name)
	return &rejected, nil
}

// permitWithoutAsking decides what the session's mode and rules decide
// alone: decided is true with nil (run) or the refusal.
func (a *agent) permitWithoutAsking(s *SessionRecord, c model.ToolCall, p *tools.Call) (o *tools.Outcome, decided bool) {
	mode, rule, hasRule := s.box.rule(c.Name)
	switch {
	case p.Perm == tools.PermRead || mode == acp.ModeBypass:
		return nil, true
	case mode == acp.ModeReadOnly:
		o := tools.Failure("refused: the session is in read_only mode, which allows no edits, commands or MCP tools that change things; switch the mode to let %s run", c.Name)
		return &o, true
	case mode == acp.ModeAcceptEdits && p.Perm == tools.PermEdit:
		return nil, true
	case hasRule && rule:
		return nil, true
	case hasRule:
		o := tools.Failure("refused: the user chose to always reject %s in this session", c.Name)
		return &o, true
	}
	return nil, false
}

// unusablePermission says what is wrong with a permission answer that is
// neither cancelled nor one of the options offered, or "".
func unusablePermission(outcome, optionID string) string {
	switch {
	case outcome == "":
		return "has no outcome"
	case outcome != "selected":
		return fmt.Sprintf("has the unknown outcome %q", outcome)
	case !slices.Contains(acp.PermissionOptionIDs, optionID):
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
	if err != nil || res == nil {
		return err
	}
	return decodeAnswer(method, raw, res)
}

// decodeAnswer decodes the client's result raw, its answer to method,
// into res (a *json.RawMessage takes it as it is).
func decodeAnswer(method string, raw json.RawMessage, res any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("the client's answer to %s has no result", method)
	}
	if rm, ok := res.(*json.RawMessage); ok {
		*rm = raw // valid JSON already: the caller decodes it
		return nil
	}
	if err := json.Unmarshal(raw, res); err != nil {
		return fmt.Errorf("the client's answer to %s: %s", method, acp.DescribeJSONError(err))
	}
	return nil
}

// prepare makes a call ready to announce: a built-in tool, an MCP
// server's tool, or an unknown one (which fails).
func (a *agent) prepare(s *SessionRecord, c model.ToolCall) *tools.Call {
	if t, ok := tools.Lookup(c.Name); ok {
		return t.Prepare(&tools.Env{Workspace: s.ws, Client: toolClient{a, s}, SessionID: s.id, Procs: a.procs, ChildEnv: a.childEnv, Log: a.log}, c.Input)
	}
	p := &tools.Call{Title: c.Name, Kind: acp.KindOther, Perm: tools.PermExecute}
	if strings.HasPrefix(c.Name, "mcp__") {
		a.prepareMCP(s, c, p)
		return p
	}
	var names []string
	for _, t := range a.tools(s) {
		names = append(names, t.Name)
	}
	p.Title = "Unknown tool " + c.Name
	p.Err = fmt.Errorf("unknown tool %q; the tools are %s", c.Name, strings.Join(names, ", "))
	return p
}

// prepareMCP makes p the call of an MCP server's tool: its kind, title
// and permission class come from the server's annotations.
func (a *agent) prepareMCP(s *SessionRecord, c model.ToolCall, p *tools.Call) {
	t, err := s.mcp.Lookup(c.Name)
	if err != nil {
		p.Err = err
		return
	}
	p.Kind, p.Title = t.Kind(), t.Title()
	if t.ReadOnly() {
		p.Perm = tools.PermRead
	}
	p.Run = func(ctx context.Context, _ string) tools.Outcome {
		if err := a.pause(s); err != nil { // the server may take a while
			return tools.Failure("%v", err)
		}
		return t.Call(ctx, c.Input)
	}
}

// builtinSpecs are the built-in tools as the model sees them.
var builtinSpecs = func() []model.Tool {
	specs := make([]model.Tool, len(tools.Builtin))
	for i, t := range tools.Builtin {
		specs[i] = model.Tool(t.Spec)
	}
	return specs
}()

// tools is what the model is offered: the built-in tools, then the MCP
// servers' tools.
func (a *agent) tools(s *SessionRecord) []model.Tool {
	specs := builtinSpecs
	if mt := s.mcp.Tools(); len(mt) > 0 {
		specs = append(slices.Clip(specs), make([]model.Tool, 0, len(mt))...)
		for _, t := range mt {
			specs = append(specs, model.Tool(t.Spec()))
		}
	}
	return specs
}

func (a *agent) clientCaps() acp.ClientCapabilities {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.client
}

// toolClient is the session as the tools see it.
type toolClient struct {
	a *agent
	s *SessionRecord
}

func (c toolClient) Caps() acp.ClientCapabilities { return c.a.clientCaps() }
func (c toolClient) Pause() error                 { return c.a.pause(c.s) }

func (c toolClient) Call(ctx context.Context, method string, params, res any) error {
	return c.a.call(ctx, c.s, method, params, res)
}

func (c toolClient) Update(u *acp.ToolCallUpdate) error { return c.a.toolUpdate(c.s, u) }

// SetPlan sends the plan to the client and persists it.
func (c toolClient) SetPlan(entries []tools.PlanEntry) error {
	raw := acp.MustJSON(entries)
	if err := c.a.out.NotifyJSON(c.s.id, acp.Plan(raw)); err != nil {
		return err
	}
	return c.s.file.Append(store.Record{Type: store.RecPlan, Plan: raw})
}
