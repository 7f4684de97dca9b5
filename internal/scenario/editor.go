// editor.go answers an agent's requests as an editor does, for the part of
// a transcript after an `editor` line: agents ask different things on the
// way to the same result (codex and claude ask permission and write
// themselves; gemini reads a file through the client before it writes
// it), so a file that any agent passes answers them without pinning them.
//
// The answers: a permission request gets the option of kind allow_once
// (else allow_always, else the first), or after `editor rejecting` of kind
// reject_once (else reject_always, else the request dismissed: cancelled); fs/read_text_file the file's text
// (its line and limit honoured), or "" for a file that does not exist, as
// an editor opens a new buffer for it, and an error for one that is not a
// regular file (a FIFO would hold the run); fs/write_text_file writes the
// file. Both keep to the run's directory, links followed. Anything else is refused
// (-32601), as by an editor without that capability.

package scenario

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// editorAnswer is the answer to line when it is a request of the agent's,
// nil otherwise.
func (r *run) editorAnswer(line []byte) []byte {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &req) != nil || req.Method == "" || len(req.ID) == 0 || string(req.ID) == "null" {
		return nil
	}
	result, err := r.answerAsEditor(req.Method, req.Params)
	msg := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	if err != nil {
		msg["error"] = map[string]any{"code": err.code, "message": err.msg}
	} else {
		msg["result"] = result
	}
	b, _ := json.Marshal(msg)
	return b
}

// editorError is an error the editor answers with.
type editorError struct {
	code int
	msg  string
}

func (r *run) answerAsEditor(method string, params json.RawMessage) (any, *editorError) {
	var p struct {
		Options []permissionOption `json:"options"`
		Path    string             `json:"path"`
		Content string             `json:"content"`
		Line    int                `json:"line"`
		Limit   int                `json:"limit"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &editorError{-32602, "invalid params: " + err.Error()}
	}
	switch method {
	case "session/request_permission":
		if r.rejecting {
			if id, ok := offered(p.Options, "reject_once", "reject_always"); ok {
				return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": id}}, nil
			}
			return map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}, nil // no way to say no but to dismiss it
		}
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": pickOption(p.Options, "allow_once", "allow_always")}}, nil
	case "fs/read_text_file", "fs/write_text_file":
		path, err := r.inRun(p.Path)
		if err != nil {
			return nil, err
		}
		if method == "fs/write_text_file" {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return nil, &editorError{-32603, err.Error()}
			}
			if err := os.WriteFile(path, []byte(p.Content), 0o644); err != nil {
				return nil, &editorError{-32603, err.Error()}
			}
			return map[string]any{}, nil
		}
		if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
			// A FIFO or a device would hold the run past its --timeout.
			return nil, &editorError{-32603, path + " is not a regular file; the scenario's editor reads only those"}
		}
		b, err2 := os.ReadFile(path)
		if err2 != nil && !errors.Is(err2, fs.ErrNotExist) {
			return nil, &editorError{-32603, err2.Error()}
		}
		return map[string]any{"content": lineRange(string(b), p.Line, p.Limit)}, nil
	}
	return nil, &editorError{-32601, "method not found: the scenario's editor answers session/request_permission, fs/read_text_file and fs/write_text_file"}
}

// offered is the id of the first option of kinds offered, in kinds' order.
func offered(options []permissionOption, kinds ...string) (string, bool) {
	for _, kind := range kinds {
		for _, o := range options {
			if o.Kind == kind {
				return o.OptionID, true
			}
		}
	}
	return "", false
}

// pickOption is the id of the option an editor's user picks: the first of
// kinds offered, else the first option.
func pickOption(options []permissionOption, kinds ...string) string {
	if id, ok := offered(options, kinds...); ok {
		return id
	}
	if len(options) > 0 {
		return options[0].OptionID
	}
	return ""
}

// inRun is path when it is absolute and inside the run's directory, its
// links followed (a link out of it is refused as a path out of it is).
func (r *run) inRun(path string) (string, *editorError) {
	refused := &editorError{-32602, "the scenario's editor keeps to the run's directory " + r.env.Dir + ", not " + path}
	if !filepath.IsAbs(path) || !within(r.env.Dir, filepath.Clean(path)) {
		return "", refused
	}
	if !r.staysIn(filepath.Clean(path), 8) {
		return "", refused
	}
	return path, nil
}

// staysIn reports whether what path reaches is inside the run's
// directory: the deepest part of it that exists (a link counts, dangling
// or not: Lstat), its links resolved, must be inside, the rest being
// created by a write. A dangling link (a write would create its target)
// is followed to that target, up to hops links.
func (r *run) staysIn(path string, hops int) bool {
	for p := path; p != r.env.Dir && within(r.env.Dir, p); p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return within(r.env.Dir, real)
		}
		target, err := os.Readlink(p)
		if err != nil || hops == 0 {
			return false
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		rest, _ := filepath.Rel(p, path)
		target = filepath.Join(target, rest)
		return within(r.env.Dir, target) && r.staysIn(target, hops-1)
	}
	return within(r.env.Dir, path)
}

// within reports whether path is dir or below it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// lineRange is text from its 1-based line, at most limit lines (0: all).
func lineRange(text string, line, limit int) string {
	if line <= 1 && limit <= 0 {
		return text
	}
	lines := strings.SplitAfter(text, "\n")
	start := min(max(line, 1)-1, len(lines))
	end := len(lines)
	if limit > 0 {
		end = min(start+limit, end)
	}
	return strings.Join(lines[start:end], "")
}
