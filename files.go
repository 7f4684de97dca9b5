// files.go holds what the file tools do to files: paths resolved through
// every symlink (dangling ones too), local reads and writes confined to the
// session's roots at the moment of the operation (os.Root), no blocking on
// a file that is not a regular one, and the caps on what a tool returns.
//
// The rules:
//   - A path is checked twice: when the call is prepared (resolve, so the
//     permission request shows where it really lands) and when it is used.
//     Locally the second check is os.Root, which refuses any step out of the
//     root, whatever links exist or appear meanwhile; before a client
//     fs/write_text_file the path is resolved again.
//   - Files are opened with O_NONBLOCK and must be regular files: a FIFO, a
//     device or a socket fails the call at once.
//   - read_file returns at most readMaxLines lines and readMaxBytes bytes,
//     lines cut at lineMaxBytes, read as a stream; it says what it left out
//     and which line to read on from. Whatever any tool returns to the model
//     is cut at readMaxBytes the same way.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"acpbridge/internal/acp"
	"acpbridge/internal/clip"
)

const (
	readMaxLines   = 2000      // lines read_file returns at most
	readMaxBytes   = 256 << 10 // bytes read_file, or any tool, returns to the model at most
	lineMaxBytes   = 2000      // a longer line is cut
	wholeFileBytes = 4 << 20   // the largest file edit_file edits (and write_file diffs)

	maxCommandTimeout = time.Hour // the longest timeout_ms run_command takes
)

// realPath resolves every symlink in the absolute path, dangling ones
// included (their target is where a create would land), one component at
// a time; a component that does not exist ends the walk.
func realPath(path string) string {
	return followLinks("/", strings.Split(filepath.Clean(path), "/"), 0)
}

// followLinks resolves parts below the already resolved dir.
func followLinks(dir string, parts []string, hops int) string {
	for i, part := range parts {
		if part == "" || part == "." {
			continue
		}
		next := filepath.Join(dir, part)
		fi, err := os.Lstat(next)
		if err != nil || hops > 40 { // missing, or a loop of links
			return filepath.Join(append([]string{next}, parts[i+1:]...)...)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(next)
			if err != nil {
				return filepath.Join(append([]string{next}, parts[i+1:]...)...)
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(dir, target)
			}
			rest := append(strings.Split(filepath.Clean(target), "/"), parts[i+1:]...)
			return followLinks("/", rest, hops+1)
		}
		dir = next
	}
	return dir
}

// openRoots opens the session's roots for local file work.
func (s *SessionRecord) openRoots() {
	s.fsRoots = make([]*os.Root, len(s.realRoots))
	for i, r := range s.realRoots {
		s.fsRoots[i], _ = os.OpenRoot(r) // nil: local work under it fails
	}
}

func (s *SessionRecord) closeRoots() {
	for _, r := range s.fsRoots {
		if r != nil {
			r.Close()
		}
	}
}

// rootOf returns the root that holds path (as it resolves now) and path
// relative to it.
func (s *SessionRecord) rootOf(path string) (*os.Root, string, error) {
	real := realPath(path)
	for i, root := range s.realRoots {
		if within(real, root) && s.fsRoots[i] != nil {
			rel, err := filepath.Rel(root, real)
			return s.fsRoots[i], rel, err
		}
	}
	return nil, "", fmt.Errorf("%s is outside the session's directories (%s): acpbridge only touches files under them", path, strings.Join(s.roots, ", "))
}

// openLocal opens a regular file under the roots without blocking.
func (s *SessionRecord) openLocal(path string, flag int, perm os.FileMode) (*os.File, error) {
	root, rel, err := s.rootOf(path)
	if err != nil {
		return nil, err
	}
	if flag&os.O_CREATE != 0 && filepath.Dir(rel) != "." {
		if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
			return nil, fmt.Errorf("cannot create the directory of %s: %v", path, unwrapPath(err))
		}
	}
	if fi, err := root.Lstat(rel); err == nil && !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 {
		return nil, notRegular(path, fi.Mode())
	}
	f, err := root.OpenFile(rel, flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %v", path, unwrapPath(err))
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("cannot open %s: %v", path, err)
		}
		return nil, notRegular(path, fi.Mode())
	}
	return f, nil
}

// checkRegular fails for a path that exists and is not a regular file; it
// guards what is asked of the client, which would block on a FIFO.
func checkRegular(path string) (exists bool, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return false, nil
	}
	if !fi.Mode().IsRegular() {
		return true, notRegular(path, fi.Mode())
	}
	return true, nil
}

func notRegular(path string, m os.FileMode) error {
	kind := "not a regular file"
	switch {
	case m&os.ModeNamedPipe != 0:
		kind = "a FIFO"
	case m&os.ModeSocket != 0:
		kind = "a socket"
	case m&os.ModeDevice != 0:
		kind = "a device"
	case m.IsDir():
		kind = "a directory"
	}
	return fmt.Errorf("%s is %s, not a regular file; the file tools read and write regular files only", path, kind)
}

// unwrapPath drops the *PathError's own path (the message names the path).
func unwrapPath(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// readWhole reads a regular file of at most wholeFileBytes.
func (s *SessionRecord) readWhole(path string) (string, error) {
	f, err := s.openLocal(path, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, wholeFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %v", path, unwrapPath(err))
	}
	if len(b) > wholeFileBytes {
		return "", fmt.Errorf("%s is over %d bytes, too large to edit or diff whole; read it in parts with read_file", path, wholeFileBytes)
	}
	return string(b), nil
}

// writeLocal writes content to a regular file under the roots, keeping an
// existing file's permissions.
func (s *SessionRecord) writeLocal(path, content string) error {
	f, err := s.openLocal(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return fmt.Errorf("cannot write %s: %v", path, unwrapPath(err))
	}
	return f.Close()
}

// window is the part of a file read_file returns.
type window struct {
	first, limit int // the first line (1-based) and how many lines at most
}

// readLines reads w's lines from r, whose first line is line number
// startAt, within the caps, and says what it left out. It reads r as a
// stream: memory does not follow the file's size.
func readLines(ctx context.Context, r io.Reader, startAt int, w window) (string, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	n := startAt
	for ; n < w.first; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return "", ctx.Err()
		}
		if _, more, err := readLine(br, 0); err != nil {
			if more == 0 {
				n-- // EOF where a line would start
			}
			return fmt.Sprintf("[read_file: the file has %d lines; line %d is past its end]", n, w.first), nil
		}
	}
	var sb strings.Builder
	cut, shown := 0, 0
	capped := false // the byte cap left out the line just read
	for shown < min(w.limit, readMaxLines) {
		line, more, err := readLine(br, lineMaxBytes)
		if len(line) == 0 && err != nil {
			break
		}
		if sb.Len()+len(line) > readMaxBytes {
			capped = true
			break
		}
		sb.Write(line)
		if more > 0 {
			cut++
			fmt.Fprintf(&sb, "… [line %d cut: %d more bytes]\n", n+shown, more)
		}
		shown++
		if err != nil {
			break
		}
	}
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
func textResult(s string) outcome {
	return outcome{content: []acp.ToolContent{acp.TextOut(s)}, result: s}
}
