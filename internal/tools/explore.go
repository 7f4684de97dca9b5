// explore.go holds the tools a model uses to look around without asking:
// list_directory, find_files and search_text (read-only, within the roots),
// and update_plan (the ACP plan the model keeps current).
//
// The rules:
//   - The walk stays within the roots: it starts at a resolved path, never
//     follows a symlink (a link is listed, not entered or read), and opens
//     files through the root's os.Root.
//   - It skips .git and whatever the tree's .gitignore files ignore, nested
//     ones included, with git's own matching (go-git's gitignore package);
//     search_text skips binary files (a NUL in the first 8 KiB).
//   - Every result is capped, and says so; the walk checks for
//     cancellation at every directory and every file.

package tools

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"acpbridge/internal/clip"
)

const (
	listMaxEntries   = 1000 // list_directory
	findMaxResults   = 1000 // find_files
	searchMaxMatches = 500  // search_text
	searchLineBytes  = 300  // a matching line is cut here
	binarySniffBytes = 8 << 10
)

// exploreInput is the input of list_directory, find_files and search_text.
type exploreInput struct {
	Path       string          `json:"path"`
	Pattern    string          `json:"pattern"`
	Glob       string          `json:"glob"`
	IgnoreCase bool            `json:"ignore_case"`
	Entries    json.RawMessage `json:"entries"` // update_plan
}

// exploreBase resolves the path a exploring tool starts at (default the
// cwd) and sets the call's title and location.
func exploreBase(env *Env, path, title string, c *Call) (string, error) {
	base, err := env.target(c, "", cmp.Or(path, "."))
	c.Title = title
	return base, err
}

func prepareList(env *Env, in exploreInput, c *Call) error {
	base, err := exploreBase(env, in.Path, "List "+env.display(in.Path), c)
	if err != nil {
		return err
	}
	c.Run = func(context.Context, string) Outcome { return env.listDirectory(base) }
	return nil
}

func prepareFind(env *Env, in exploreInput, c *Call) error {
	base, err := exploreBase(env, in.Path, "Find "+in.Pattern, c)
	if err != nil {
		return err
	}
	if in.Pattern == "" || !doublestar.ValidatePattern(in.Pattern) {
		return fmt.Errorf("find_files: %q is not a valid glob (use * for a name part, ** for any number of directories)", in.Pattern)
	}
	c.Run = func(ctx context.Context, _ string) Outcome {
		env.Client.Pause() // the client sees the tool call while the walk runs
		return env.findFiles(ctx, base, in.Pattern)
	}
	return nil
}

func prepareSearch(env *Env, in exploreInput, c *Call) error {
	base, err := exploreBase(env, in.Path, "Search "+clip.Marked(in.Pattern, 60), c)
	if err != nil {
		return err
	}
	expr := in.Pattern
	if in.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err == nil && in.Pattern == "" {
		err = errors.New("the pattern is empty")
	}
	if err != nil {
		return fmt.Errorf("search_text: invalid pattern: %v", err)
	}
	if in.Glob != "" && !doublestar.ValidatePattern(in.Glob) {
		return fmt.Errorf("search_text: %q is not a valid glob", in.Glob)
	}
	c.Run = func(ctx context.Context, _ string) Outcome {
		env.Client.Pause() // the client sees the tool call while the search runs
		return env.searchText(ctx, base, re, in.Glob)
	}
	return nil
}

func preparePlan(env *Env, in exploreInput, c *Call) error {
	c.Title = "Update the plan"
	entries, err := planEntries(in.Entries)
	if err != nil {
		return fmt.Errorf("update_plan: %v", err)
	}
	c.Run = func(context.Context, string) Outcome { return env.updatePlan(entries) }
	return nil
}

// PlanEntry is an ACP PlanEntry.
type PlanEntry struct {
	Content  string `json:"content"`
	Priority string `json:"priority"`
	Status   string `json:"status"`
}

func planEntries(raw json.RawMessage) ([]PlanEntry, error) {
	var entries []PlanEntry
	if err := json.Unmarshal(raw, &entries); err != nil || raw == nil {
		return nil, errors.New("entries must be an array of {content, status, priority?}")
	}
	for i := range entries {
		e := &entries[i]
		if e.Priority == "" {
			e.Priority = "medium"
		}
		if !slices.Contains([]string{"pending", "in_progress", "completed"}, e.Status) {
			return nil, fmt.Errorf("entries[%d].status %q: use pending, in_progress or completed", i, e.Status)
		}
		if !slices.Contains([]string{"high", "medium", "low"}, e.Priority) {
			return nil, fmt.Errorf("entries[%d].priority %q: use high, medium or low", i, e.Priority)
		}
	}
	return entries, nil
}

// updatePlan shows the plan and keeps it with the session.
func (e *Env) updatePlan(entries []PlanEntry) Outcome {
	if err := e.Client.SetPlan(entries); err != nil {
		return Failure("%v", err)
	}
	n := map[string]int{}
	for _, e := range entries {
		n[e.Status]++
	}
	return textResult(fmt.Sprintf("Plan recorded: %d entries (%d completed, %d in progress, %d pending).",
		len(entries), n["completed"], n["in_progress"], n["pending"]))
}

// listDirectory lists one directory's entries.
func (ws *Workspace) listDirectory(dir string) Outcome {
	root, rel, err := ws.rootOf(dir)
	if err != nil {
		return Failure("%v", err)
	}
	f, err := root.Open(rel)
	if err != nil {
		return Failure("cannot list %s: %v", dir, unwrapPath(err))
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return Failure("cannot list %s: %v", dir, unwrapPath(err))
	}
	names := entryNames(entries)
	var sb strings.Builder
	writeLines(&sb, names[:min(len(names), listMaxEntries)])
	if len(names) > listMaxEntries {
		fmt.Fprintf(&sb, "[list_directory: %d more entries not shown; use find_files to narrow]\n", len(names)-listMaxEntries)
	}
	if len(names) == 0 {
		sb.WriteString("(empty directory)\n")
	}
	return textResult(sb.String())
}

// entryNames is the sorted names of a directory's entries, a directory's
// with a "/" after it and a link's with "@".
func entryNames(entries []fs.DirEntry) []string {
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
		switch {
		case e.IsDir():
			names[i] += "/"
		case e.Type()&fs.ModeSymlink != 0:
			names[i] += "@"
		}
	}
	slices.Sort(names)
	return names
}

// writeLines writes each of lines to sb, a newline after each.
func writeLines(sb *strings.Builder, lines []string) {
	for _, l := range lines {
		sb.WriteString(l)
		sb.WriteByte('\n')
	}
}

// walker walks a tree below one root, skipping .git, ignored files and
// links.
type walker struct {
	root     *os.Root
	patterns []gitignore.Pattern
}

// newWalker prepares a walk of dir: the .gitignore files of the
// directories from its root down to dir apply.
func (ws *Workspace) newWalker(dir string) (*walker, string, error) {
	root, rel, err := ws.rootOf(dir)
	if err != nil {
		return nil, "", err
	}
	w := &walker{root: root}
	w.loadIgnore(".")
	if rel != "." {
		parts := strings.Split(filepath.ToSlash(rel), "/")
		for i := range parts[:len(parts)-1] {
			w.loadIgnore(strings.Join(parts[:i+1], "/"))
		}
	}
	return w, rel, nil
}

// loadIgnore adds dir's .gitignore (dir relative to the root).
func (w *walker) loadIgnore(dir string) int {
	f, err := openRegular(w.root, filepath.Join(dir, ".gitignore"))
	if err != nil {
		return 0
	}
	defer f.Close()
	var domain []string
	if dir != "." {
		domain = strings.Split(filepath.ToSlash(dir), "/")
	}
	n := 0
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		w.patterns = append(w.patterns, gitignore.ParsePattern(line, domain))
		n++
	}
	return n
}

// openRegular opens rel for reading when it is a regular file, and never
// waits in the open: a FIFO (or a device) in the tree is skipped, not
// opened for good.
func openRegular(root *os.Root, rel string) (*os.File, error) {
	f, _, err := openRegularSize(root, rel)
	return f, err
}

// openRegularSize is openRegular that also returns the file's size.
func openRegularSize(root *os.Root, rel string) (*os.File, int64, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s is not a regular file", rel)
	}
	return f, fi.Size(), nil
}

// ctxReader is r that fails with ctx's error once ctx has ended: a read of
// a huge file, or of one long line in it, stops at its next buffer after a
// cancel.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// errStop ends a walk early (a cap was reached).
var errStop = errors.New("stop")

// walk calls fn for every file and directory below dir (relative to the
// root), depth first, sorted, with its .gitignore applied.
func (w *walker) walk(ctx context.Context, dir string, fn func(rel string, e fs.DirEntry, in *openDir) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	in, entries := w.open(dir)
	if in == nil {
		return nil // unreadable: nothing below it
	}
	defer in.release()
	added := 0
	if dir != "." {
		added = w.loadIgnore(dir)
	}
	defer func() { w.patterns = w.patterns[:len(w.patterns)-added] }()
	ignore := gitignore.NewMatcher(w.patterns) // this directory's rules, matched for each entry
	for _, e := range entries {
		rel := filepath.Join(dir, e.Name())
		if e.Name() == ".git" || e.Type()&fs.ModeSymlink != 0 || ignore.Match(strings.Split(filepath.ToSlash(rel), "/"), e.IsDir()) {
			continue
		}
		if err := fn(rel, e, in); err != nil {
			return err
		}
		if e.IsDir() {
			if err := w.walk(ctx, rel, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// openDir is a directory of the walk, open as a root of its own and, on
// Unix, as a descriptor its files are opened from by name (one openat
// each). Whoever holds it (the walk while it lists the directory, a file
// queued in it) releases it once; the last release closes it.
type openDir struct {
	root *os.Root
	h    dirHandle // invalid for the walker's own root, whose files are opened by path
	refs atomic.Int32
}

func (d *openDir) hold() { d.refs.Add(1) }

func (d *openDir) release() {
	if d.refs.Add(-1) == 0 {
		d.h.close()
		d.root.Close()
	}
}

// openFile opens rel, a file in the directory, for reading when it is a
// regular file, and returns its size.
func (d *openDir) openFile(rel string) (io.ReadCloser, int64, error) {
	if d.h.valid() {
		return d.h.open(rel)
	}
	return openRegularSize(d.root, rel)
}

// open opens dir and reads its entries, by name; nil when it cannot be.
func (w *walker) open(dir string) (*openDir, []fs.DirEntry) {
	root, err := w.root.OpenRoot(dir)
	if err != nil {
		return nil, nil
	}
	h, entries, err := openDirHandle(root)
	if err != nil {
		root.Close()
		return nil, nil
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	d := &openDir{root: root, h: h}
	d.refs.Store(1)
	return d, entries
}

// shown is how a found path is written for the model: relative to base.
func shown(rel, baseRel string) string {
	if baseRel == "." {
		return filepath.ToSlash(rel)
	}
	r, err := filepath.Rel(baseRel, rel)
	if err != nil {
		return filepath.ToSlash(rel)
	}
	return filepath.ToSlash(r)
}

// findFiles lists the files below base whose path (relative to base)
// matches pattern.
func (ws *Workspace) findFiles(ctx context.Context, base, pattern string) Outcome {
	w, baseRel, err := ws.newWalker(base)
	if err != nil {
		return Failure("%v", err)
	}
	found, more, err := w.find(ctx, baseRel, pattern)
	if err != nil {
		return Failure("find_files stopped: %v", err)
	}
	var sb strings.Builder
	writeLines(&sb, found)
	switch {
	case more:
		fmt.Fprintf(&sb, "[find_files: stopped at %d files; narrow the pattern or the path]\n", findMaxResults)
	case len(found) == 0:
		fmt.Fprintf(&sb, "No file below %s matches %s (.git and ignored files are skipped).\n", base, pattern)
	}
	return textResult(sb.String())
}

// find returns the files below baseRel whose path relative to it matches
// pattern, up to findMaxResults (more is true when there were more).
func (w *walker) find(ctx context.Context, baseRel, pattern string) (found []string, more bool, err error) {
	err = w.walk(ctx, baseRel, func(rel string, e fs.DirEntry, _ *openDir) error {
		if e.IsDir() {
			return nil
		}
		p := shown(rel, baseRel)
		if ok, _ := doublestar.Match(pattern, p); !ok {
			return nil
		}
		if len(found) == findMaxResults {
			more = true
			return errStop
		}
		found = append(found, p)
		return nil
	})
	if err == errStop {
		err = nil
	}
	return found, more, err
}

// searchText finds the lines matching re in the files below base (or in
// base, a file) whose path matches glob.
//
// The walk (directory reads and .gitignore rules) runs on this goroutine,
// in order; the files it finds are searched on every P the process has, each read at
// once into a worker's buffer and skipped with one bytes.Index when the
// pattern's literal prefix is not in it; the results are written in the
// walk's order, within the caps.
func (ws *Workspace) searchText(ctx context.Context, base string, re *regexp.Regexp, glob string) Outcome {
	w, baseRel, err := ws.newWalker(base)
	if err != nil {
		return Failure("%v", err)
	}
	parent := ctx
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	t := newTextSearch(ctx, w.root, re)
	if fi, serr := w.root.Stat(baseRel); serr == nil && !fi.IsDir() {
		d := &openDir{root: w.root}
		d.refs.Store(2) // never closed: the walker's root
		t.queue(d, baseRel, shown(baseRel, baseRel))
	} else {
		err = w.walk(ctx, baseRel, func(rel string, e fs.DirEntry, in *openDir) error {
			p := shown(rel, baseRel)
			if !e.Type().IsRegular() || !globTakes(glob, p) {
				return nil
			}
			return t.queue(in, e.Name(), p)
		})
	}
	if t.full {
		stop() // the workers skip what is still queued
	}
	t.finish()
	switch {
	case t.full:
		err = nil
	case err == nil:
		err = parent.Err()
	}
	if err != nil {
		return Failure("search_text stopped: %v", err)
	}
	switch {
	case t.full:
		fmt.Fprintf(&t.out, "[search_text: stopped at %d matches; narrow the pattern, the path or the glob]\n", t.matches)
	case t.matches == 0:
		fmt.Fprintf(&t.out, "No match in %d files (.git, ignored and binary files are skipped).\n", t.files)
	}
	return textResult(t.out.String())
}

// globTakes reports whether glob (none: every file) takes the file shown
// as p: by its path, or by its name when the glob has no '/'.
func globTakes(glob, p string) bool {
	if glob == "" {
		return true
	}
	okPath, _ := doublestar.Match(glob, p)
	okName, _ := doublestar.Match(glob, filepath.Base(p))
	return okPath || (okName && !strings.Contains(glob, "/"))
}

// textSearch is one search_text call: the files queued in walk order, the
// workers that search them, and what has been written so far.
type textSearch struct {
	ctx    context.Context
	root   *os.Root
	re     *regexp.Regexp
	prefix []byte // a literal every match contains, or nil
	jobs   chan *fileSearch
	done   sync.WaitGroup
	order  []*fileSearch // queued, not yet written

	out     strings.Builder
	matches int
	files   int
	full    bool // stopped at the limit
}

// fileSearch is one file's search: its lines that match, ready once done
// is closed.
type fileSearch struct {
	in         *openDir // the directory it is opened in, by name
	rel, shown string
	done       chan struct{}
	text       bool // a text file was read
	lines      []string
}

func newTextSearch(ctx context.Context, root *os.Root, re *regexp.Regexp) *textSearch {
	t := &textSearch{ctx: ctx, root: root, re: re, jobs: make(chan *fileSearch, 256)}
	if prefix, _ := re.LiteralPrefix(); prefix != "" {
		t.prefix = []byte(prefix)
	}
	workers := max(runtime.GOMAXPROCS(0), runtime.NumCPU())
	for range workers {
		t.done.Add(1)
		go t.work()
	}
	return t
}

// queue hands a file to the workers and writes out the results that are
// ready in order; it returns errStop at the limit.
func (t *textSearch) queue(in *openDir, rel, shown string) error {
	f := &fileSearch{in: in, rel: rel, shown: shown, done: make(chan struct{})}
	in.hold()
	select {
	case t.jobs <- f:
		t.order = append(t.order, f)
	case <-t.ctx.Done():
		in.release()
		return t.ctx.Err()
	}
	return t.writeReady(false)
}

// finish waits for the queued files and writes their results.
func (t *textSearch) finish() {
	close(t.jobs)
	t.writeReady(true)
	t.done.Wait()
}

// writeReady writes the results of the files at the head of the order that
// are done (all of them, waiting, when wait is set).
func (t *textSearch) writeReady(wait bool) error {
	for len(t.order) > 0 && !t.full {
		f := t.order[0]
		if wait {
			<-f.done
		} else {
			select {
			case <-f.done:
			default:
				return nil
			}
		}
		t.order = t.order[1:]
		if f.text {
			t.files++
		}
		for _, l := range f.lines {
			if t.matches == searchMaxMatches || t.out.Len() > readMaxBytes {
				t.full = true
				return errStop
			}
			t.matches++
			t.out.WriteString(l)
		}
	}
	if t.full {
		return errStop
	}
	return nil
}

// work searches queued files until there are none (or the search ends).
func (t *textSearch) work() {
	defer t.done.Done()
	buf := make([]byte, 0, 64<<10)
	for f := range t.jobs {
		if t.ctx.Err() == nil {
			buf = t.file(f, buf)
		}
		f.in.release()
		close(f.done)
	}
}

// searchWholeBytes bounds the files read at once; a larger one is read a
// line at a time.
const searchWholeBytes = 4 << 20

// file searches one file into f, reading it whole into buf when it fits;
// it returns the buffer, maybe grown, for the next file.
func (t *textSearch) file(f *fileSearch, buf []byte) []byte {
	file, size, err := f.in.openFile(f.rel)
	if err != nil {
		return buf
	}
	defer file.Close()
	r := ctxReader{t.ctx, file}
	buf = buf[:0]
	for len(buf) < searchWholeBytes {
		if int64(len(buf)) == size && size > 0 { // read whole: no read for the EOF
			t.inMemory(f, buf)
			return buf
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, len(buf))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return buf
			}
			t.inMemory(f, buf)
			return buf
		}
	}
	// Larger than searchWholeBytes: what was read, then the rest, a line at
	// a time.
	if bytes.IndexByte(buf[:min(len(buf), binarySniffBytes)], 0) >= 0 {
		return buf
	}
	f.text = true
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(buf), r), 64<<10)
	for n := 1; ; n++ {
		line, more, err := readLine(br, searchLineBytes*4)
		if len(line) == 0 && err != nil {
			return buf
		}
		t.match(f, n, bytes.TrimRight(line, "\r\n"), more)
		if err != nil || len(f.lines) > searchMaxMatches {
			return buf
		}
	}
}

// inMemory searches a file read whole: binary files are skipped, and a
// file without the pattern's literal prefix costs one bytes.Index.
func (t *textSearch) inMemory(f *fileSearch, data []byte) {
	if bytes.IndexByte(data[:min(len(data), binarySniffBytes)], 0) >= 0 {
		return
	}
	f.text = true
	if t.prefix != nil && !bytes.Contains(data, t.prefix) {
		return
	}
	for n := 1; len(data) > 0 && len(f.lines) <= searchMaxMatches; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		more := 0
		if len(line) > searchLineBytes*4 {
			more = len(line) - searchLineBytes*4
			line = line[:searchLineBytes*4]
		}
		t.match(f, n, bytes.TrimRight(line, "\r"), more)
	}
}

// match adds line n to f's results when it matches, as p:N:TEXT (a long
// line cut, saying so).
func (t *textSearch) match(f *fileSearch, n int, line []byte, more int) {
	if t.prefix != nil && !bytes.Contains(line, t.prefix) {
		return
	}
	if !t.re.Match(line) {
		return
	}
	text := string(line)
	if len(text) > searchLineBytes || more > 0 {
		text = clip.Cut(text, searchLineBytes) + " …"
	}
	f.lines = append(f.lines, fmt.Sprintf("%s:%d:%s\n", f.shown, n, text))
}
