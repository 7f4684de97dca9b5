// files.go holds the file tools (read_file, write_file, edit_file): through
// the client's fs/* methods when it advertised them, otherwise on disk
// within the roots; and the reading of a window of lines within the caps.

package tools

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"acpbridge/internal/acp"
	"acpbridge/internal/clip"
	"acpbridge/internal/jsonenc"
)

// window is the part of a file read_file returns.
type window struct {
	first, limit int // the first line (1-based) and how many lines at most
}

// readLines reads w's lines from r, whose first line is line number
// startAt, within the caps, and says what it left out. It reads r as a
// stream: memory does not follow the file's size.
func readLines(ctx context.Context, r io.Reader, startAt int, w window) (string, error) {
	size := 64 << 10
	if s, ok := r.(*strings.Reader); ok {
		size = min(size, int(s.Size())+1) // a client's answer is in memory already
	}
	br := bufio.NewReaderSize(ctxReader{ctx, r}, size)
	if past, err := skipLines(ctx, br, startAt, w.first); past != "" || err != nil {
		return past, err
	}
	var sb strings.Builder
	shown, cut, capped := copyLines(&sb, br, w)
	last := w.first + shown - 1
	_, peekErr := br.Peek(1)
	switch {
	case capped:
		fmt.Fprintf(&sb, "\n[read_file: lines %d–%d of the file, stopped at %d bytes; read on with line %d]", w.first, last, readMaxBytes, last+1)
	case peekErr == nil && w.limit > readMaxLines:
		fmt.Fprintf(&sb, "\n[read_file: lines %d–%d of the file, at most %d lines a call; read on with line %d]", w.first, last, readMaxLines, last+1)
	case peekErr == nil:
		fmt.Fprintf(&sb, "\n[read_file: lines %d–%d of the file, which goes on; read on with line %d]", w.first, last, last+1)
	}
	if cut > 0 {
		fmt.Fprintf(&sb, "\n[read_file: %d long lines were cut at %d bytes]", cut, lineMaxBytes)
	}
	return sb.String(), nil
}

// skipLines reads br from line n up to line first; past is the note for a
// file that ends before it.
func skipLines(ctx context.Context, br *bufio.Reader, n, first int) (past string, err error) {
	for ; n < first; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return "", ctx.Err()
		}
		if _, more, err := readLine(br, 0); err != nil {
			if more == 0 {
				n-- // EOF where a line would start
			}
			return fmt.Sprintf("[read_file: the file has %d lines; line %d is past its end]", n, first), nil
		}
	}
	return "", nil
}

// copyLines writes the window's lines from br to sb, long ones cut (a
// note says where), until the window, the line cap or the byte cap ends
// it; capped is true when the byte cap left out the line just read.
func copyLines(sb *strings.Builder, br *bufio.Reader, w window) (shown, cut int, capped bool) {
	for shown < min(w.limit, readMaxLines) {
		line, more, err := readLine(br, lineMaxBytes)
		if len(line) == 0 && err != nil {
			break
		}
		if sb.Len()+len(line) > readMaxBytes {
			return shown, cut, true
		}
		sb.Write(line)
		if more > 0 {
			cut++
			fmt.Fprintf(sb, "… [line %d cut: %d more bytes]\n", w.first+shown, more)
		}
		shown++
		if err != nil {
			break
		}
	}
	return shown, cut, false
}

// readLine reads one line with its newline, keeping at most keep bytes of
// it (cut on a rune boundary); more is how many bytes were dropped.
func readLine(br *bufio.Reader, keep int) (line []byte, more int, err error) {
	for {
		frag, ferr := br.ReadSlice('\n')
		room := keep - len(line)
		switch {
		case room >= len(frag):
			line = append(line, frag...)
		case room > 0:
			k := room
			for k > 0 && !utf8.RuneStart(frag[k]) {
				k--
			}
			line = append(line, frag[:k]...)
			more += len(frag) - k
		default:
			more += len(frag)
		}
		if !errors.Is(ferr, bufio.ErrBufferFull) {
			if more > 0 && (len(line) == 0 || line[len(line)-1] != '\n') {
				more-- // the newline is not counted as dropped text
			}
			return line, more, ferr
		}
	}
}

// capResult cuts what a tool returns to the model at readMaxBytes, saying so.
func capResult(s string) string {
	if len(s) <= readMaxBytes {
		return s
	}
	kept := clip.Cut(s, readMaxBytes)
	return kept + fmt.Sprintf("\n[output cut: %d more bytes not shown]", len(s)-len(kept))
}

// textResult is a tool's outcome whose content and result are one text.
func textResult(s string) Outcome {
	return Outcome{Content: []acp.ToolContent{acp.TextOut(s)}, Result: s}
}

// askClientRead reads a file through the client.
func (e *Env) askClientRead(ctx context.Context, path string, line, limit int) (string, error) {
	var res acp.ReadTextFileResult
	params := acp.ReadTextFileParams{SessionID: e.SessionID, Path: path, Line: line, Limit: limit}
	if err := e.Client.Call(ctx, acp.MethodFSRead, params, &res); err != nil {
		return "", fmt.Errorf("the editor could not read %s: %v", path, err)
	}
	return res.Content, nil
}

// readWhole reads a whole file (for an edit or a diff) through the client
// when it can, else from disk.
func (e *Env) readWhole(ctx context.Context, path string) (string, error) {
	if _, err := checkRegular(path); err != nil {
		return "", err
	}
	if !e.Client.Caps().FS.ReadTextFile {
		return e.readLocal(path)
	}
	text, err := e.askClientRead(ctx, path, 0, 0)
	if err == nil && len(text) > wholeFileBytes {
		err = fmt.Errorf("%s is over %d bytes, too large to edit or diff whole; read it in parts with read_file", path, wholeFileBytes)
	}
	return text, err
}

// writeText writes a file through the client when it can, else to disk.
func (e *Env) writeText(ctx context.Context, path, content string) error {
	if _, err := checkRegular(path); err != nil {
		return err
	}
	if e.Client.Caps().FS.WriteTextFile {
		// Resolved again: a link may have appeared while permission was asked.
		if _, err := e.resolve(path); err != nil {
			return err
		}
		params := acp.WriteTextFileParams{SessionID: e.SessionID, Path: path, Content: content}
		if err := e.Client.Call(ctx, acp.MethodFSWrite, params, nil); err != nil {
			return fmt.Errorf("the editor could not write %s: %v", path, err)
		}
		return nil
	}
	return e.writeLocal(path, content)
}

// readFile serves read_file: a window of lines within the caps. fi is
// what os.Stat says of path, or nil when it does not exist or is not
// known.
func (e *Env) readFile(ctx context.Context, path string, w window, fi os.FileInfo) Outcome {
	var exists bool
	var err error
	if fi != nil {
		exists, err = checkInfo(path, fi)
	} else {
		exists, err = checkRegular(path)
	}
	if err != nil || (!exists && !e.Client.Caps().FS.ReadTextFile) {
		if err == nil {
			err = fmt.Errorf("cannot read %s: it does not exist", path)
		}
		return Failure("%v", err)
	}
	var text string
	if e.Client.Caps().FS.ReadTextFile {
		text, err = e.readThroughClient(ctx, path, w)
	} else {
		e.Client.Pause() // the client sees the tool call while a long read runs
		text, err = e.readWindow(ctx, path, w)
	}
	if err != nil {
		return Failure("%v", err)
	}
	result := text
	if result == "" {
		result = "(empty)"
	}
	return Outcome{Content: []acp.ToolContent{acp.TextOut(text)}, RawOutput: readOutput(len(text), path), Result: result}
}

// readWindow reads the window w of path from the disk.
func (e *Env) readWindow(ctx context.Context, path string, w window) (string, error) {
	f, err := e.openLocal(path, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return readLines(ctx, f, 1, w)
}

// readThroughClient reads the window w of path with fs/read_text_file,
// asking for one line more than it shows: does the file go on?
func (e *Env) readThroughClient(ctx context.Context, path string, w window) (string, error) {
	line := 0 // the client's default, the first line
	if w.first > 1 {
		line = w.first
	}
	got, err := e.askClientRead(ctx, path, line, min(w.limit, readMaxLines)+1)
	switch {
	case err != nil:
		return "", err
	case whole(got, min(w.limit, readMaxLines)):
		return got, nil // what readLines would return, without reading it again
	}
	return readLines(ctx, strings.NewReader(got), w.first, w)
}

// readOutput is read_file's rawOutput, {"bytes":N,"path":P}, written by
// hand: it is made for every read.
func readOutput(n int, path string) json.RawMessage {
	b := strconv.AppendInt([]byte(`{"bytes":`), int64(n), 10)
	return append(jsonenc.AppendString(append(b, `,"path":`...), path), '}')
}

// whole reports whether readLines would return text as it is: at most
// maxLines lines, none over lineMaxBytes, within readMaxBytes in all.
func whole(text string, maxLines int) bool {
	if len(text) > readMaxBytes {
		return false
	}
	for lines := 0; len(text) > 0; lines++ {
		n := strings.IndexByte(text, '\n') + 1
		if n == 0 {
			n = len(text)
		}
		if n > lineMaxBytes || lines == maxLines {
			return false
		}
		text = text[n:]
	}
	return true
}

func (e *Env) writeFile(ctx context.Context, path, content string) Outcome {
	// A new file's diff has no old text, and the client is not asked for a
	// file that is not on disk (it would answer an error the user sees).
	var old *string
	exists, err := checkRegular(path)
	if err != nil {
		return Failure("%v", err)
	}
	if exists {
		prev, err := e.readWhole(ctx, path)
		if err != nil {
			return Failure("%v", err)
		}
		old = &prev
	}
	if ctx.Err() != nil {
		return Failure("cancelled before writing %s", path)
	}
	if err := e.writeText(ctx, path, content); err != nil {
		return Failure("%v", err)
	}
	return Outcome{
		Content:   []acp.ToolContent{{Type: "diff", Path: path, OldText: old, NewText: &content}},
		RawOutput: map[string]any{"path": path, "bytes": len(content)},
		Result:    fmt.Sprintf("Wrote %d bytes to %s.", len(content), path),
	}
}

func (e *Env) editFile(ctx context.Context, path, oldText, newText string) Outcome {
	prev, err := e.readWhole(ctx, path)
	if err != nil {
		return Failure("%v", err)
	}
	switch n := strings.Count(prev, oldText); n {
	case 1:
	case 0:
		return Failure("old_text does not occur in %s; read the file and copy the text exactly", path)
	default:
		return Failure("old_text occurs %d times in %s; include more surrounding lines so that it occurs once", n, path)
	}
	next := strings.Replace(prev, oldText, newText, 1)
	if ctx.Err() != nil {
		return Failure("cancelled before editing %s", path)
	}
	if err := e.writeText(ctx, path, next); err != nil {
		return Failure("%v", err)
	}
	return Outcome{
		Content:   []acp.ToolContent{{Type: "diff", Path: path, OldText: &prev, NewText: &next}},
		RawOutput: map[string]any{"path": path},
		Result:    fmt.Sprintf("Edited %s: replaced 1 occurrence.", path),
	}
}

type readInput struct {
	Path  string `json:"path"`
	Line  *int   `json:"line"`
	Limit *int   `json:"limit"`
}

func prepareRead(env *Env, in readInput, c *Call) error {
	path, fi, err := env.targetInfo(c, "Read", in.Path)
	if err != nil {
		return err
	}
	w := window{first: 1, limit: readMaxLines}
	if in.Line != nil {
		if *in.Line < 1 {
			return fmt.Errorf("read_file: line must be 1 or more (the first line is 1), not %d", *in.Line)
		}
		w.first, c.Locations[0].Line = *in.Line, *in.Line
	}
	if in.Limit != nil {
		if *in.Limit < 1 {
			return fmt.Errorf("read_file: limit must be 1 or more, not %d", *in.Limit)
		}
		w.limit = *in.Limit
	}
	// A read asks no permission: it runs now, and what resolving the path
	// found out about it still holds.
	c.Run = func(ctx context.Context, _ string) Outcome { return env.readFile(ctx, path, w, fi) }
	return nil
}

type writeInput struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func prepareWrite(env *Env, in writeInput, c *Call) error {
	path, err := env.target(c, "Write", in.Path)
	if err != nil {
		return err
	}
	c.Run = func(ctx context.Context, _ string) Outcome { return env.writeFile(ctx, path, in.Content) }
	return nil
}

type editInput struct {
	Path    string `json:"path"`
	OldText string `json:"old_text"`
	NewText string `json:"new_text"`
}

func prepareEdit(env *Env, in editInput, c *Call) error {
	path, err := env.target(c, "Edit", in.Path)
	if err != nil {
		return err
	}
	if in.OldText == "" {
		return errors.New("edit_file needs a non-empty old_text")
	}
	c.Run = func(ctx context.Context, _ string) Outcome { return env.editFile(ctx, path, in.OldText, in.NewText) }
	return nil
}
