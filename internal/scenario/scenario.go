// Package scenario reads, runs and records ACP snapshot scenarios: a
// conversation between a client and an agent, written as a txtar archive a
// person can read and edit, that any ACP agent can be run against.
//
// A scenario file is a comment (what it tests) and these sections:
//
//	-- flags --       acpbridge's command-line flags, the model included;
//	                  $DIR, $CWD and $STATE stand for the run's directories,
//	                  $MODEL_URL for the endpoint serving the model fixture
//	-- flags/NAME --  the flags of another agent, run as --agent NAME=CMD
//	-- transcript --  the conversation in order, one step a line:
//	                    > JSON   a line the client sends; consecutive > lines
//	                             go out in one write
//	                    >! TEXT  a line sent as it is (malformed input)
//	                    < JSON   a line the agent must send next
//	                    <* JSON  any number of agent lines matching JSON
//	                             (session/update notifications, say), up
//	                             to the line that matches the < line
//	                             after it; its variables bind nothing
//	                    include FILE  the transcript of the scenario file
//	                             FILE (relative to this one), here
//	                    close    the client closes the agent's stdin; the <
//	                             lines after it are what the agent writes as
//	                             it ends
//	                    restart  the agent (its stdin closed) must exit 0;
//	                             a new process starts with the same flags in
//	                             the same directories (a client that starts
//	                             a process per prompt)
//	                    editor   from here on, the agent's requests to the
//	                             client are answered as an editor answers
//	                             them (editor.go) and not matched: a file
//	                             any agent passes, whatever it asks; its
//	                             session/updates after the last line (a
//	                             late title) are taken, as an editor takes
//	                             them
//	                    # ...    a comment
//	-- cwd/NAME --    a file created in the workspace ($CWD) before the run
//	-- state/NAME --  a file created in the state directory ($STATE)
//	-- check/NAME --  a file the workspace must hold after the run
//	-- NAME --        any other file, created in the run directory ($DIR),
//	                  such as the replay fixture named by --model replay:$DIR/NAME
//
// Every run gets a fresh directory $DIR holding the workspace $DIR/cwd and
// the state directory $DIR/state; the agent starts in $DIR.
//
// Values in the JSON lines can be variables. A string "$NAME" (capital
// letters, digits and _) binds, on its first match in a < line, to whatever
// the agent sent there (a string, a number, an object), and must be equal
// where it appears again; in a > line it is replaced by its value. "$ANY"
// matches anything. $NAME inside a longer string stands for a bound
// string's text ("$CWD/a.txt"); $$ is a literal $. In an expected object, a
// member "$REST" lets the agent send members the scenario does not name;
// without it, extra members fail. Objects compare as JSON values: the order
// of members is free, 1 equals 1.0.
package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"acpbridge/internal/clip"
)

// Step kinds.
const (
	Send      = iota // > JSON
	SendRaw          // >! TEXT
	Expect           // < JSON
	Close            // close
	ExpectAny        // <* JSON
	Restart          // restart
	Editor           // editor
)

// Step is one line of the transcript.
type Step struct {
	Kind int
	Line int    // its line in the file
	Text string // what follows the marker
	From string // "FILE:LINE" when it comes from an included file
	want any    // Expect: the parsed template
}

// Section is one file of the archive.
type Section struct {
	Name string
	Data string
	Line int // the line of its header
}

// Scenario is a parsed scenario file.
type Scenario struct {
	Path     string
	Comment  string
	Flags    []string // unexpanded
	Sections []Section
	Steps    []Step
}

// Error is a fault in a scenario file, at a line.
type Error struct {
	Path string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.Path, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
}

// Load reads and parses a scenario file.
func Load(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// ParseArchive splits a txtar archive into its comment and sections.
func ParseArchive(data string) (comment string, sections []Section) {
	cur := &comment
	for i, line := range strings.SplitAfter(data, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "-- "); ok && strings.HasSuffix(name, " --") {
			sections = append(sections, Section{Name: strings.TrimSuffix(name, " --"), Line: i + 1})
			cur = &sections[len(sections)-1].Data
			continue
		}
		*cur += line
	}
	return comment, sections
}

// Parse parses a scenario file's contents. Every fault is reported with the
// file and line.
func Parse(path string, data []byte) (*Scenario, error) {
	sc := &Scenario{Path: path}
	sc.Comment, sc.Sections = ParseArchive(string(data))
	seen := map[string]bool{}
	for _, s := range sc.Sections {
		if seen[s.Name] {
			return nil, &Error{path, s.Line, fmt.Sprintf("the section %q appears twice", s.Name)}
		}
		seen[s.Name] = true
		if err := checkSection(path, s); err != nil {
			return nil, err
		}
	}
	if flags := sc.section("flags"); flags != nil {
		sc.Flags = strings.Fields(flags.Data)
	}
	transcript := sc.section("transcript")
	if !seen["flags"] {
		return nil, &Error{path, 0, "no -- flags -- section: it holds the agent's flags (it may be empty)"}
	}
	if transcript == nil {
		return nil, &Error{path, 0, "no -- transcript -- section: it holds the > and < lines"}
	}
	steps, err := parseSteps(path, transcript, 0)
	if err != nil {
		return nil, err
	}
	for i, st := range steps {
		if st.Kind == ExpectAny && (i+1 == len(steps) || steps[i+1].Kind != Expect) {
			return nil, &Error{path, st.Line, "a <* line must be followed by a < line: the line its run of agent lines ends at"}
		}
	}
	sc.Steps = steps
	return sc, nil
}

// recordBindings is the section where scenario record keeps the values of
// the variables it wrote, so that a later part (--append) writes the same
// value as the same variable. Runs ignore it.
const recordBindings = "record/bindings"

// seedBindings binds in v the values a prior recording wrote as variables
// (its record/bindings section: one NAME JSON a line).
func (sc *Scenario) seedBindings(v *vars) {
	s := sc.section(recordBindings)
	if s == nil {
		return
	}
	for _, line := range strings.Split(s.Data, "\n") {
		name, raw, ok := strings.Cut(line, " ")
		if x, err := decode([]byte(raw)); ok && err == nil {
			v.set(name, x)
		}
	}
}

// setSection sets the section called name, adding it before the
// transcript when there is none.
func (sc *Scenario) setSection(name, data string) {
	if s := sc.section(name); s != nil {
		s.Data = data
		return
	}
	i := len(sc.Sections)
	for j, s := range sc.Sections {
		if s.Name == "transcript" {
			i = j
		}
	}
	sc.Sections = slices.Insert(sc.Sections, i, Section{Name: name, Data: data})
}

// AgentFlags is the flags the file gives the agent called name: a
// flags/NAME section's, when it has one.
func (sc *Scenario) AgentFlags(name string) ([]string, bool) {
	s := sc.section("flags/" + name)
	if s == nil {
		return nil, false
	}
	return strings.Fields(s.Data), true
}

// checkSection refuses a section whose name is not a file inside the run.
func checkSection(path string, s Section) error {
	dir, name, nested := strings.Cut(s.Name, "/")
	switch {
	case s.Name == "flags" || s.Name == "transcript":
	case dir == "flags" && nested && name != "":
	case s.Name == recordBindings:
	case s.Name == "" || strings.HasPrefix(s.Name, "/") || strings.Contains("/"+s.Name+"/", "/../"):
		return &Error{path, s.Line, fmt.Sprintf("the section %q does not name a file inside the run", s.Name)}
	case nested && (dir == "cwd" || dir == "state" || dir == "check") && name == "":
		return &Error{path, s.Line, fmt.Sprintf("the section %q names no file", s.Name)}
	}
	return nil
}

func parseSteps(path string, s *Section, depth int) ([]Step, error) {
	var steps []Step
	for i, line := range strings.Split(s.Data, "\n") {
		n := s.Line + 1 + i
		t := strings.TrimSpace(line)
		switch {
		case t == "" || strings.HasPrefix(t, "#"):
			continue
		case t == "close":
			steps = append(steps, Step{Kind: Close, Line: n})
		case t == "restart":
			steps = append(steps, Step{Kind: Restart, Line: n})
		case t == "editor", t == "editor rejecting":
			steps = append(steps, Step{Kind: Editor, Line: n, Text: strings.TrimSpace(strings.TrimPrefix(t, "editor"))})
		case strings.HasPrefix(t, "include "):
			inc, err := includeSteps(path, n, strings.TrimSpace(strings.TrimPrefix(t, "include ")), depth)
			if err != nil {
				return nil, err
			}
			steps = append(steps, inc...)
		default:
			st, err := lineStep(path, n, t)
			if err != nil {
				return nil, err
			}
			steps = append(steps, st)
		}
	}
	return steps, nil
}

// includeSteps is the steps of the file name that line n of path includes,
// each at line n and saying where it comes from.
func includeSteps(path string, n int, name string, depth int) ([]Step, error) {
	inc, err := include(path, name, depth)
	if err != nil {
		return nil, &Error{path, n, err.Error()}
	}
	for i := range inc {
		if inc[i].From == "" {
			inc[i].From = fmt.Sprintf("%s:%d", filepath.Join(filepath.Dir(path), name), inc[i].Line)
		}
		inc[i].Line = n
	}
	return inc, nil
}

// lineStep is the step of a >!, > or < line t (line n of path).
func lineStep(path string, n int, t string) (Step, error) {
	switch {
	case strings.HasPrefix(t, ">!"):
		return Step{Kind: SendRaw, Line: n, Text: strings.TrimPrefix(strings.TrimPrefix(t, ">!"), " ")}, nil
	case strings.HasPrefix(t, "<*"):
		st, err := messageStep(path, n, "<"+t[2:])
		st.Kind = ExpectAny
		return st, err
	case strings.HasPrefix(t, ">"), strings.HasPrefix(t, "<"):
		return messageStep(path, n, t)
	}
	return Step{}, &Error{path, n, fmt.Sprintf("a transcript line starts with > (send), < (expect), <* (expect any number), >! (send as it is), close or #, not %q", clip.Marked(t, 40))}
}

// messageStep is the step of a > or < line t (line n of path): its JSON
// must be one value whose variables are well formed.
func messageStep(path string, n int, t string) (Step, error) {
	text := strings.TrimSpace(t[1:])
	v, err := decode([]byte(text))
	if err != nil {
		return Step{}, &Error{path, n, fmt.Sprintf("the %c line is not one JSON value: %v", t[0], err)}
	}
	if err := checkVariables(v); err != nil {
		return Step{}, &Error{path, n, err.Error()}
	}
	if t[0] == '<' {
		return Step{Kind: Expect, Line: n, Text: text, want: v}, nil
	}
	return Step{Kind: Send, Line: n, Text: text}, nil
}

// section returns the section called name, or nil.
func (sc *Scenario) section(name string) *Section {
	for i := range sc.Sections {
		if sc.Sections[i].Name == name {
			return &sc.Sections[i]
		}
	}
	return nil
}

// include reads the transcript of the scenario file name, relative to the
// file that includes it.
func include(from, name string, depth int) ([]Step, error) {
	if depth >= 4 {
		return nil, fmt.Errorf("include %s: includes nest more than 4 deep", name)
	}
	path := filepath.Join(filepath.Dir(from), name)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("include: %v", err)
	}
	_, sections := ParseArchive(string(b))
	for i := range sections {
		if sections[i].Name == "transcript" {
			return parseSteps(path, &sections[i], depth+1)
		}
	}
	return nil, fmt.Errorf("include %s: it has no -- transcript -- section", name)
}

// decode parses one JSON value, numbers kept as json.Number, and nothing after it.
func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one value on the line")
	}
	return v, nil
}
