// Package tools holds acpbridge's built-in tools: the table the model is
// offered (read_file, write_file, edit_file, run_command, list_directory,
// find_files, search_text, update_plan), each tool's preparation (its input
// decoded and checked, its paths resolved within the session's roots, its
// title, kind and permission class), and the work itself, locally or
// through the client's fs/* and terminal/* methods.
//
// What a tool needs of the session and its editor comes through Client,
// which the root provides; the tools know no session, no store and no
// wire. Announcing a call, asking permission and persisting the result are
// the root's (turn.go).
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"acpbridge/internal/acp"
	"acpbridge/internal/proc"
)

// Spec is a tool as the model sees it.
type Spec struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema of the input
}

// Perm is a permission class: which modes ask before a tool runs.
type Perm string

const (
	PermRead    Perm = "read"    // never asks
	PermEdit    Perm = "edit"    // asks in ask; refused in read_only
	PermExecute Perm = "execute" // asks in ask and accept_edits; refused in read_only
)

// Client is what the tools need of the session and its editor.
type Client interface {
	// Caps are the capabilities the client advertised.
	Caps() acp.ClientCapabilities
	// Call makes a request to the client and decodes its result into res
	// (nil: no result is read). Its error is worded for a person.
	Call(ctx context.Context, method string, params, res any) error
	// Pause writes out what is buffered: a tool is about to wait.
	Pause() error
	// Update writes a tool_call_update of the running call.
	Update(u *acp.ToolCallUpdate) error
	// SetPlan shows the plan to the user and keeps it with the session.
	SetPlan(entries []PlanEntry) error
}

// Env is where a tool call runs: the session's directories and client.
type Env struct {
	*Workspace
	Client    Client
	SessionID string
	Procs     *proc.Guard // starts and ends local commands (nil: no keeper)
	ChildEnv  []string    // the environment of local commands (proc.ChildEnv)
	Log       *slog.Logger
}

// Call is a tool call prepared to run.
type Call struct {
	Title     string
	Kind      acp.ToolKind
	Perm      Perm
	Locations []acp.Location
	// Err, when set, is why the call cannot run; it is announced and
	// failed with it.
	Err error
	// Run does the work; id is the call's ACP toolCallId.
	Run func(ctx context.Context, id string) Outcome
}

// Outcome is what running a tool produced.
type Outcome struct {
	Failed    bool
	Content   []acp.ToolContent
	RawOutput any
	Result    string // what the model is told
	After     func() // runs after the final update (releases a terminal)
}

// Failure is a failed outcome whose message both the user and the model see.
func Failure(format string, args ...any) Outcome {
	msg := fmt.Sprintf(format, args...)
	return Outcome{Failed: true, Content: []acp.ToolContent{acp.TextOut(msg)}, RawOutput: map[string]string{"error": msg}, Result: "Error: " + msg}
}

// Redact replaces secret wherever it stands in what a tool returns (the
// model's result, text, diffs and raw output) with placeholder, before
// the outcome goes to the client, the log, the store or the model: a
// command can read the key from a file or a process and print it.
func Redact(out *Outcome, secret, placeholder string) {
	if secret == "" {
		return
	}
	hide := func(s string) string { return strings.ReplaceAll(s, secret, placeholder) }
	out.Result = hide(out.Result)
	for i, c := range out.Content {
		if !strings.Contains(string(c.Content), secret) && !containsPtr(c.OldText, secret) && !containsPtr(c.NewText, secret) && !strings.Contains(c.Text, secret) {
			continue
		}
		c.Text = hide(c.Text)
		c.Content = json.RawMessage(hide(string(c.Content)))
		for _, p := range []*string{c.OldText, c.NewText} {
			if p != nil {
				*p = hide(*p)
			}
		}
		out.Content[i] = c
	}
	if out.RawOutput != nil {
		raw, ok := out.RawOutput.(json.RawMessage)
		if !ok {
			raw = acp.MustJSON(out.RawOutput)
		}
		if strings.Contains(string(raw), secret) {
			out.RawOutput = json.RawMessage(hide(string(raw)))
		}
	}
}

func containsPtr(p *string, s string) bool { return p != nil && strings.Contains(*p, s) }

// Cap cuts what a tool returns, to the model and in text content, at
// readMaxBytes, saying so.
func Cap(out *Outcome) {
	out.Result = capResult(out.Result)
	for i, c := range out.Content {
		if len(c.Text) > readMaxBytes {
			out.Content[i] = acp.TextOut(capResult(c.Text))
		}
	}
}

// Tool is one entry of the table.
type Tool struct {
	Spec Spec
	Kind acp.ToolKind
	Perm Perm
	// prepare decodes the input into c and fills in what the call touches
	// and how it runs; an error fails the call.
	prepare func(env *Env, input json.RawMessage, c *Call) error
}

// Builtin lists the built-in tools, in the order the model is offered them.
var Builtin = []Tool{
	{Spec{"read_file", "Read a text file, at most 2,000 lines a call (line and limit read a part). Relative paths are resolved against the session's working directory.",
		json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"file path"},"line":{"type":"integer","description":"first line to read, 1-based"},"limit":{"type":"integer","description":"most lines to read"}},"required":["path"]}`)},
		acp.KindRead, PermRead, typed(prepareRead)},
	{Spec{"write_file", "Create or overwrite a text file with the given content.",
		json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`)},
		acp.KindEdit, PermEdit, typed(prepareWrite)},
	{Spec{"edit_file", "Replace old_text with new_text in a file; old_text must occur exactly once.",
		json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"old_text":{"type":"string"},"new_text":{"type":"string"}},"required":["path","old_text","new_text"]}`)},
		acp.KindEdit, PermEdit, typed(prepareEdit)},
	{Spec{"run_command", "Run a shell command line (sh -c) and return its exit status and output.",
		json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"cwd":{"type":"string","description":"working directory, default the session's"},"timeout_ms":{"type":"integer","description":"default 120000"}},"required":["command"]}`)},
		acp.KindExecute, PermExecute, typed(prepareCommand)},
	{Spec{"list_directory", "List a directory's entries, sorted; directories end in /. Never asks permission.",
		json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"directory, default the working directory"}}}`)},
		acp.KindRead, PermRead, typed(prepareList)},
	{Spec{"find_files", "Find files whose path matches a glob (** matches any number of directories), relative to path. Skips .git and what .gitignore ignores. Never asks permission.",
		json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string","description":"glob, e.g. **/*.go"},"path":{"type":"string","description":"directory to search, default the working directory"}},"required":["pattern"]}`)},
		acp.KindSearch, PermRead, typed(prepareFind)},
	{Spec{"search_text", "Search file contents for an RE2 regular expression; results are path:line:text. Skips .git, what .gitignore ignores, and binary files. Never asks permission.",
		json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string","description":"RE2 regular expression"},"path":{"type":"string","description":"directory or file, default the working directory"},"glob":{"type":"string","description":"only files matching this glob, e.g. *.go"},"ignore_case":{"type":"boolean"}},"required":["pattern"]}`)},
		acp.KindSearch, PermRead, typed(prepareSearch)},
	{Spec{"update_plan", "Record your plan for the task as a list of entries and keep it current (mark entries in_progress and completed as you go). The user sees it. Never asks permission.",
		json.RawMessage(`{"type":"object","properties":{"entries":{"type":"array","items":{"type":"object","properties":{"content":{"type":"string"},"status":{"type":"string","enum":["pending","in_progress","completed"]},"priority":{"type":"string","enum":["high","medium","low"]}},"required":["content","status"]}}},"required":["entries"]}`)},
		acp.KindThink, PermRead, typed(preparePlan)},
}

// Lookup returns the built-in tool named name.
func Lookup(name string) (Tool, bool) {
	for _, t := range Builtin {
		if t.Spec.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Prepare makes a call of t with the model's input. The call's title,
// kind and permission class are set whether or not it can run.
func (t Tool) Prepare(env *Env, input json.RawMessage) *Call {
	c := &Call{Title: t.Spec.Name, Kind: t.Kind, Perm: t.Perm}
	c.Err = t.prepare(env, input, c)
	return c
}

// typed makes a tool's prepare from one that takes its input decoded.
func typed[T any](prepare func(env *Env, in T, c *Call) error) func(*Env, json.RawMessage, *Call) error {
	return func(env *Env, input json.RawMessage, c *Call) error {
		var in T
		if err := json.Unmarshal(input, &in); err != nil {
			return fmt.Errorf("invalid input for %s: %s", c.Title, acp.DescribeJSONError(err))
		}
		return prepare(env, in, c)
	}
}

// target resolves the path a call works on, within the roots, and names
// it in the call's title ("Read src/a.go") and location.
func (env *Env) target(c *Call, verb, path string) (string, error) {
	resolved, _, err := env.targetInfo(c, verb, path)
	return resolved, err
}

// targetInfo is target, and what os.Stat says of the path when it exists
// (nil when it does not, or is not known).
func (env *Env) targetInfo(c *Call, verb, path string) (string, os.FileInfo, error) {
	resolved, fi, err := env.resolveInfo(path)
	c.Title = verb + " " + env.display(path)
	if err != nil {
		return "", nil, err
	}
	c.Locations = []acp.Location{{Path: resolved}}
	return resolved, fi, nil
}
