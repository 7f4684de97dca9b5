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
	"slices"
	"strings"
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

func (w *walker) ignored(rel string, isDir bool) bool {
	return gitignore.NewMatcher(w.patterns).Match(strings.Split(filepath.ToSlash(rel), "/"), isDir)
}

// openRegular opens rel for reading when it is a regular file, and never
// waits in the open: a FIFO (or a device) in the tree is skipped, not
// opened for good.
func openRegular(root *os.Root, rel string) (*os.File, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", rel)
	}
	return f, nil
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
func (w *walker) walk(ctx context.Context, dir string, fn func(rel string, e fs.DirEntry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries := w.entries(dir)
	added := 0
	if dir != "." {
		added = w.loadIgnore(dir)
	}
	defer func() { w.patterns = w.patterns[:len(w.patterns)-added] }()
	for _, e := range entries {
		rel := filepath.Join(dir, e.Name())
		if e.Name() == ".git" || e.Type()&fs.ModeSymlink != 0 || w.ignored(rel, e.IsDir()) {
			continue
		}
		if err := fn(rel, e); err != nil {
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

// entries is the directory's entries by name; none when it is unreadable.
func (w *walker) entries(dir string) []fs.DirEntry {
	f, err := w.root.Open(dir)
	if err != nil {
		return nil
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries
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
	err = w.walk(ctx, baseRel, func(rel string, e fs.DirEntry) error {
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
func (ws *Workspace) searchText(ctx context.Context, base string, re *regexp.Regexp, glob string) Outcome {
	w, baseRel, err := ws.newWalker(base)
	if err != nil {
		return Failure("%v", err)
	}
	t := &textSearch{root: w.root, re: re, glob: glob, br: bufio.NewReaderSize(nil, 64<<10)}
	if fi, serr := w.root.Stat(baseRel); serr == nil && !fi.IsDir() {
		err = t.file(ctx, baseRel, shown(baseRel, baseRel))
	} else {
		err = w.walk(ctx, baseRel, func(rel string, e fs.DirEntry) error {
			if e.IsDir() {
				return nil
			}
			return t.file(ctx, rel, shown(rel, baseRel))
		})
	}
	if err != nil && err != errStop {
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

// textSearch is one search_text call: what it looks for, and what it has
// found so far.
type textSearch struct {
	root *os.Root
	re   *regexp.Regexp
	glob string
	br   *bufio.Reader // one buffer for every file

	out     strings.Builder
	matches int
	files   int
	full    bool // stopped at the limit
}

// file searches the file rel, shown to the model as p, when the glob takes
// it and it is a regular text file; it returns errStop at the limit.
func (t *textSearch) file(ctx context.Context, rel, p string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.glob != "" {
		okPath, _ := doublestar.Match(t.glob, p)
		okName, _ := doublestar.Match(t.glob, filepath.Base(p))
		if !okPath && !(okName && !strings.Contains(t.glob, "/")) {
			return nil
		}
	}
	f, err := openRegular(t.root, rel)
	if err != nil {
		return nil
	}
	defer f.Close()
	t.br.Reset(ctxReader{ctx, f})
	if head, _ := t.br.Peek(binarySniffBytes); bytes.IndexByte(head, 0) >= 0 {
		return nil // binary
	}
	t.files++
	return t.lines(p)
}

// lines writes the matching lines of the file in t.br as p:N:TEXT.
func (t *textSearch) lines(p string) error {
	for n := 1; ; n++ {
		line, more, err := readLine(t.br, searchLineBytes*4)
		if len(line) == 0 && err != nil {
			return nil
		}
		text := strings.TrimRight(string(line), "\r\n")
		if t.re.MatchString(text) {
			if t.matches == searchMaxMatches || t.out.Len() > readMaxBytes {
				t.full = true
				return errStop
			}
			t.matches++
			if len(text) > searchLineBytes || more > 0 {
				text = clip.Cut(text, searchLineBytes) + " …"
			}
			fmt.Fprintf(&t.out, "%s:%d:%s\n", p, n, text)
		}
		if err != nil {
			return nil
		}
	}
}
