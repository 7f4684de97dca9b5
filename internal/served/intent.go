// intent.go maps a recorded tool call onto the tool the calling agent
// offers for the same intent. A recording speaks acpbridge's tool
// vocabulary (write_file, edit_file, read_file, run_command,
// list_directory, find_files, search_text); each agent names its tools and
// their parameters its own way (claude's Write {file_path, content},
// gemini's write_file {file_path, content}, codex's apply_patch, which takes
// patch text). The mapping is chosen per call from the tools that call
// offers: the tool of the intent's own name whose parameters take the
// recorded input as it is; else a tool of one of the intent's names, its
// arguments filled by parameter role; else, for writes and edits, a patch
// tool; else the agent's shell tool running a command that does the same;
// else an error naming the intent and the tools offered.

package served

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"acpbridge/internal/clip"
	"acpbridge/internal/model"
	"acpbridge/internal/shellword"
)

// offeredTool is a tool a model call offers.
type offeredTool struct {
	Name     string
	Params   []string // its parameters' names
	Freeform bool     // it takes text, not JSON arguments (codex's apply_patch)
}

// agentCall is a recorded tool call as the calling agent is to receive it.
type agentCall struct {
	ID       string
	Name     string
	Args     map[string]any // a function tool's arguments
	Input    string         // a freeform tool's text
	Freeform bool
	Mapping  string // how it was mapped, "write_file → Write {file_path, content}"
}

// argsJSON is the call's arguments as a JSON object.
func (c agentCall) argsJSON() string {
	b, _ := json.Marshal(c.Args)
	return string(b)
}

// intentNames are the names agents give each intent's tool, acpbridge's
// own first.
var intentNames = map[string][]string{
	"write_file":     {"write_file", "Write", "write", "create_file"},
	"edit_file":      {"edit_file", "Edit", "replace", "edit", "str_replace"},
	"read_file":      {"read_file", "Read", "read", "view"},
	"run_command":    {"run_command", "Bash", "exec_command", "run_shell_command", "shell", "bash"},
	"list_directory": {"list_directory", "LS", "ls"},
	"find_files":     {"find_files", "Glob", "glob"},
	"search_text":    {"search_text", "Grep", "grep_search", "grep", "search"},
}

// paramRoles are the names agents give each of acpbridge's parameters.
var paramRoles = map[string][]string{
	"path":        {"path", "file_path", "absolute_path", "dir_path", "directory"},
	"content":     {"content", "contents", "text"},
	"old_text":    {"old_text", "old_string", "old_str"},
	"new_text":    {"new_text", "new_string", "new_str"},
	"command":     {"command", "cmd"},
	"cwd":         {"cwd", "workdir", "dir_path"},
	"pattern":     {"pattern"},
	"line":        {"line", "offset", "start_line"},
	"limit":       {"limit"},
	"ignore_case": {"ignore_case", "-i", "case_insensitive"},
	"glob":        {"glob", "include_pattern", "include"},
}

// mapCall maps a recorded call onto one of the offered tools; cwd makes
// its paths absolute where the agent's tool is not acpbridge's own.
func mapCall(tc model.ToolCall, offered []offeredTool, cwd string) (agentCall, error) {
	var in map[string]any
	if err := json.Unmarshal(tc.Input, &in); err != nil || in == nil {
		in = map[string]any{}
	}
	call := agentCall{ID: tc.ID}
	if len(offered) == 0 {
		// A client that offers no tools (a plain client, a chat-only
		// agent) is given the recording's call as it was made.
		call.Name, call.Args, call.Mapping = tc.Name, in, tc.Name+" (no tools offered: as recorded)"
		return call, nil
	}
	byName := func(name string) *offeredTool {
		for i := range offered {
			if offered[i].Name == name {
				return &offered[i]
			}
		}
		return nil
	}
	if t := byName(tc.Name); t != nil && !t.Freeform && takesAll(t.Params, in) {
		call.Name, call.Args, call.Mapping = t.Name, in, tc.Name
		return call, nil
	}
	absolute(in, cwd)
	for _, name := range intentNames[tc.Name] {
		if t := byName(name); t != nil && !t.Freeform {
			if args, ok := fillArgs(t.Params, in); ok {
				call.Name, call.Args = t.Name, args
				call.Mapping = fmt.Sprintf("%s → %s {%s}", tc.Name, t.Name, strings.Join(sortedKeys(args), ", "))
				return call, nil
			}
		}
	}
	if patch := patchFor(tc.Name, in); patch != "" {
		if t := byName("apply_patch"); t != nil {
			call.Name, call.Mapping = t.Name, tc.Name+" → apply_patch (patch text)"
			if call.Freeform = t.Freeform; t.Freeform {
				call.Input = patch
			} else {
				call.Args = map[string]any{"input": patch}
			}
			return call, nil
		}
	}
	if line := shellFor(tc.Name, in); line != "" {
		for _, name := range intentNames["run_command"] {
			if t := byName(name); t != nil && !t.Freeform {
				if args, ok := fillArgs(t.Params, map[string]any{"command": line}); ok {
					call.Name, call.Args = t.Name, args
					call.Mapping = fmt.Sprintf("%s → %s (shell: %s)", tc.Name, t.Name, clip.Marked(line, 60))
					return call, nil
				}
			}
		}
	}
	names := make([]string, len(offered))
	for i, t := range offered {
		names[i] = t.Name
	}
	return call, fmt.Errorf("the recording's tool call %s (%s) has no tool to map onto among the %d this call offers (%s); record the scenario with a tool the agent has, or give the agent a shell tool",
		tc.ID, tc.Name, len(offered), clip.Marked(strings.Join(names, ", "), 300))
}

// takesAll reports whether a tool with params takes every key of in.
func takesAll(params []string, in map[string]any) bool {
	for k := range in {
		if !slices.Contains(params, k) {
			return false
		}
	}
	return true
}

// fillArgs gives each recorded argument the tool's parameter of its role;
// false when one has none (an argument of the intent left out would change
// what the call does).
func fillArgs(params []string, in map[string]any) (map[string]any, bool) {
	out := map[string]any{}
	for k, v := range in {
		i := slices.IndexFunc(paramRoles[k], func(name string) bool { return slices.Contains(params, name) })
		if i < 0 {
			if k == "cwd" || k == "timeout_ms" || k == "ignore_case" {
				continue // a refinement the agent's tool may lack
			}
			return nil, false
		}
		out[paramRoles[k][i]] = v
	}
	return out, true
}

// absolute makes the input's path and cwd absolute against cwd, and gives
// a search (an input with a pattern and no path) cwd as its path: an
// agent's Glob or Grep without one searches its own idea of the workspace.
func absolute(in map[string]any, cwd string) {
	for _, k := range []string{"path", "cwd"} {
		if p, ok := in[k].(string); ok && cwd != "" && !filepath.IsAbs(p) {
			in[k] = filepath.Join(cwd, p)
		}
	}
	if _, ok := in["path"]; !ok && cwd != "" && (in["pattern"] != nil) {
		in["path"] = cwd
	}
}

// patchFor is a write's or an edit's patch text in codex's apply_patch
// format; "" for other intents.
func patchFor(intent string, in map[string]any) string {
	path, _ := in["path"].(string)
	lines := func(prefix, text string) string {
		var sb strings.Builder
		for _, l := range strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n") {
			sb.WriteString(prefix + strings.TrimSuffix(l, "\n") + "\n")
		}
		return sb.String()
	}
	switch intent {
	case "write_file":
		content, _ := in["content"].(string)
		return "*** Begin Patch\n*** Add File: " + path + "\n" + lines("+", content) + "*** End Patch\n"
	case "edit_file":
		old, _ := in["old_text"].(string)
		new, _ := in["new_text"].(string)
		return "*** Begin Patch\n*** Update File: " + path + "\n@@\n" + lines("-", old) + lines("+", new) + "*** End Patch\n"
	}
	return ""
}

// shellFor is a POSIX shell command line that does what the call does, for
// an agent with no tool of the intent; "" when there is none.
func shellFor(intent string, in map[string]any) string {
	str := func(k string) string { s, _ := in[k].(string); return s }
	path := str("path")
	switch intent {
	case "write_file":
		return fmt.Sprintf("mkdir -p %s && printf '%%s' %s > %s", shellword.Quote(filepath.Dir(path)), shellword.Quote(str("content")), shellword.Quote(path))
	case "read_file":
		return "cat -- " + shellword.Quote(path)
	case "list_directory":
		return "ls -Ap -- " + shellword.Quote(path)
	case "find_files":
		return fmt.Sprintf("cd %s && find . -path %s", shellword.Quote(path), shellword.Quote("./"+strings.ReplaceAll(str("pattern"), "**/", "*")))
	case "search_text":
		return fmt.Sprintf("grep -rnE -e %s -- %s", shellword.Quote(str("pattern")), shellword.Quote(path))
	}
	return ""
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
