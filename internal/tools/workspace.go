// workspace.go holds the session's directories as the tools see them, and
// what the file tools do to files: paths resolved through
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

package tools

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// MaxResultBytes is the most any tool returns to the model.
const MaxResultBytes = 256 << 10

const (
	readMaxLines   = 2000 // lines read_file returns at most
	readMaxBytes   = MaxResultBytes
	lineMaxBytes   = 2000    // a longer line is cut
	wholeFileBytes = 4 << 20 // the largest file edit_file edits (and write_file diffs)

	maxCommandTimeout = time.Hour // the longest timeout_ms run_command takes
)

// realPath resolves every symlink in the absolute path, dangling ones
// included (their target is where a create would land), one component at
// a time; a component that does not exist ends the walk.
func realPath(path string) string {
	real, _ := followLinks("/", strings.Split(filepath.Clean(path), "/"), 0)
	return real
}

// followLinks resolves parts below the already resolved dir. When the
// whole path exists, fi is what os.Stat says of it (its last component's
// os.Lstat, a link being followed); otherwise nil.
func followLinks(dir string, parts []string, hops int) (real string, fi os.FileInfo) {
	for i, part := range parts {
		if part == "" || part == "." {
			continue
		}
		next := filepath.Join(dir, part)
		var err error
		fi, err = os.Lstat(next)
		if err != nil || hops > 40 { // missing, or a loop of links
			return filepath.Join(append([]string{next}, parts[i+1:]...)...), nil
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(next)
			if err != nil {
				return filepath.Join(append([]string{next}, parts[i+1:]...)...), nil
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(dir, target)
			}
			rest := append(strings.Split(filepath.Clean(target), "/"), parts[i+1:]...)
			return followLinks("/", rest, hops+1)
		}
		dir = next
	}
	return dir, fi
}

// Workspace is a session's directories: the cwd, then the additional
// directories. Paths are resolved against them and confined to them.
type Workspace struct {
	Cwd       string
	Roots     []string   // Cwd first
	realRoots []string   // Roots with their symlinks resolved
	fsRoots   []*os.Root // realRoots opened, for local file work
}

// Open makes the workspace of roots (roots[0] is the cwd) and opens them
// for local file work.
func Open(roots []string) *Workspace {
	ws := &Workspace{Cwd: roots[0], Roots: roots, realRoots: make([]string, len(roots))}
	for i, r := range roots {
		ws.realRoots[i] = realPath(r)
	}
	ws.openRoots()
	return ws
}

// openRoots opens the roots for local file work.
func (ws *Workspace) openRoots() {
	ws.fsRoots = make([]*os.Root, len(ws.realRoots))
	for i, r := range ws.realRoots {
		ws.fsRoots[i], _ = os.OpenRoot(r) // nil: local work under it fails
	}
}

// Close closes the roots opened for local file work.
func (ws *Workspace) Close() {
	if ws == nil {
		return
	}
	for _, r := range ws.fsRoots {
		if r != nil {
			r.Close()
		}
	}
}

// rootOf returns the root that holds path (as it resolves now) and path
// relative to it.
func (ws *Workspace) rootOf(path string) (*os.Root, string, error) {
	real := realPath(path)
	for i, root := range ws.realRoots {
		if within(real, root) && ws.fsRoots[i] != nil {
			rel, err := filepath.Rel(root, real)
			return ws.fsRoots[i], rel, err
		}
	}
	return nil, "", fmt.Errorf("%s is outside the session's directories (%s): acpbridge only touches files under them", path, strings.Join(ws.Roots, ", "))
}

// openLocal opens a regular file under the roots without blocking.
func (ws *Workspace) openLocal(path string, flag int, perm os.FileMode) (*os.File, error) {
	root, rel, err := ws.rootOf(path)
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
	return checkInfo(path, fi)
}

// checkInfo is checkRegular for a path whose os.Stat is fi.
func checkInfo(path string, fi os.FileInfo) (exists bool, err error) {
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

// readLocal reads a regular file of at most wholeFileBytes.
func (ws *Workspace) readLocal(path string) (string, error) {
	f, err := ws.openLocal(path, os.O_RDONLY, 0)
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
func (ws *Workspace) writeLocal(path, content string) error {
	f, err := ws.openLocal(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return fmt.Errorf("cannot write %s: %v", path, unwrapPath(err))
	}
	return f.Close()
}

// resolve makes path absolute (relative to cwd) and checks that it lies
// within the session's roots, symlinks resolved.
func (ws *Workspace) resolve(path string) (string, error) {
	path, _, err := ws.resolveInfo(path)
	return path, err
}

// resolveInfo is resolve, and what os.Stat says of the path when it exists
// (nil when it does not, or is not known).
func (ws *Workspace) resolveInfo(path string) (string, os.FileInfo, error) {
	if path == "" {
		return "", nil, errors.New("a path is required")
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(ws.Cwd, path)
	}
	path = filepath.Clean(path)
	real := ""
	var fi os.FileInfo
	for i, root := range ws.Roots {
		if within(path, root) {
			// Only the part below the root can hold a symlink not yet resolved.
			rel, _ := filepath.Rel(root, path)
			real, fi = followLinks(ws.realRoots[i], strings.Split(rel, "/"), 0)
			break
		}
	}
	if real == "" {
		real, fi = followLinks("/", strings.Split(path, "/"), 0) // perhaps an alias of a root through a symlink
	}
	for _, root := range ws.realRoots {
		if within(real, root) {
			return path, fi, nil
		}
	}
	return "", nil, fmt.Errorf("%s is outside the session's directories (%s): acpbridge only touches files under them", path, strings.Join(ws.Roots, ", "))
}

// display shortens a path under cwd for a title.
func (ws *Workspace) display(path string) string {
	if rel, err := filepath.Rel(ws.Cwd, filepath.Join(ws.Cwd, path)); err == nil && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(path) {
		return rel
	}
	return path
}

func within(path, root string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
