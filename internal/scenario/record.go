// record.go sits between a client and an agent, passes every byte through
// unchanged, and writes the conversation down as a scenario.

package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"acpbridge/internal/jsonenc"
	"acpbridge/internal/shellword"
)

// Recorder collects both sides of a conversation in the order it sees them.
type Recorder struct {
	Self string // this acpbridge's path: a command that runs it is acpbridge
	// StateDir is the agent's state directory when it is acpbridge: the
	// log of a session the client loads or resumes is read from it and
	// embedded. "" for another agent.
	StateDir string
	// Prior is the scenario this recording continues (--append): its
	// transcript comes first, and this process's follows a restart.
	Prior *Scenario
	// Deterministic leaves the date out of the file's comment.
	Deterministic bool
	// Parts keeps the values of the variables in a record/bindings
	// section, for the next part (--append) to write the same values as
	// the same variables.
	Parts bool
	// Neutral writes an agent-neutral scenario (neutral.go): what another
	// agent that behaves the same passes unchanged.
	Neutral bool

	mu       sync.Mutex
	events   []event
	captured map[string]string // session id → its log as it was before the client opened it
	notes    []string          // what the recording could not capture
}

type event struct {
	fromAgent bool
	close     bool // the client closed the agent's stdin
	line      []byte
}

// Pipe copies src to dst as it comes (one write for what one read brought,
// so that the client's grouping of lines reaches the agent), noting every
// line. It returns when src ends.
func (rec *Recorder) Pipe(dst io.Writer, src io.Reader, fromAgent bool) error {
	buf := make([]byte, 64<<10)
	var partial []byte
	for {
		n, err := src.Read(buf)
		if n > 0 {
			// Noted before it passes on: what the other side sends in
			// answer is then always noted after it.
			partial = rec.noteLines(append(partial, buf[:n]...), fromAgent)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			if len(bytes.TrimSpace(partial)) > 0 {
				rec.note(event{fromAgent: fromAgent, line: partial})
			}
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// noteLines notes each whole line of b and returns what follows the last.
func (rec *Recorder) noteLines(b []byte, fromAgent bool) []byte {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return b
		}
		rec.note(event{fromAgent: fromAgent, line: bytes.Clone(b[:i])})
		b = b[i+1:]
	}
}

// Closed notes that the client closed the agent's stdin.
func (rec *Recorder) Closed() { rec.note(event{close: true}) }

func (rec *Recorder) note(e event) {
	if !e.close && len(bytes.TrimSpace(e.line)) == 0 {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !e.fromAgent && !e.close {
		rec.captureOpened(e.line)
	}
	rec.events = append(rec.events, e)
}

// captureOpened keeps, for a session/load or session/resume of a session
// the recording has not seen, the session's log as it is before the agent
// reads the request: the scenario needs it as a state/ file to replay.
func (rec *Recorder) captureOpened(line []byte) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			SessionID string `json:"sessionId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || (m.Method != "session/load" && m.Method != "session/resume") || m.Params.SessionID == "" {
		return
	}
	id := m.Params.SessionID
	if _, done := rec.captured[id]; done || rec.seenLocked(id) {
		return
	}
	if rec.StateDir == "" {
		rec.notes = append(rec.notes, fmt.Sprintf("the client opened session %s, which this recording did not create, and the agent is not acpbridge: add its state as state/ sections by hand", id))
		return
	}
	b, err := readSessionLog(rec.StateDir, id)
	if err != nil {
		rec.notes = append(rec.notes, fmt.Sprintf("the client opened session %s, which this recording did not create, and its log could not be read (%v): the scenario lacks it", id, err))
		return
	}
	if rec.captured == nil {
		rec.captured = map[string]string{}
	}
	rec.captured[id] = string(b)
}

// readSessionLog reads session id's log in the state directory as acpbridge
// would let it be read: an id that is not a plain file name, or a log that
// is a symbolic link, is refused (the client names the id, and the file
// goes into a scenario a user may share).
func readSessionLog(stateDir, id string) ([]byte, error) {
	if !filepath.IsLocal(id) || strings.ContainsAny(id, `/\`) {
		return nil, fmt.Errorf("%q is not a session id acpbridge would store", id)
	}
	path := filepath.Join(stateDir, "sessions", id+".jsonl")
	if fi, err := os.Lstat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return os.ReadFile(path)
}

// seenLocked reports whether an id was already in the recording (this
// process's lines or a prior part's bindings).
func (rec *Recorder) seenLocked(id string) bool {
	for _, e := range rec.events {
		if bytes.Contains(e.line, []byte(`"`+id+`"`)) {
			return true
		}
	}
	if rec.Prior != nil {
		if b := rec.Prior.section(recordBindings); b != nil && strings.Contains(b.Data, `"`+id+`"`) {
			return true
		}
		if rec.Prior.section("state/sessions/"+id+".jsonl") != nil {
			return true
		}
	}
	return false
}

// Notes is what the recording could not capture, for the recorder to say
// at its end.
func (rec *Recorder) Notes() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.notes)
}

// Scenario writes what was recorded from the agent command cmd. When cmd
// is acpbridge, its model fixture (--model replay:F or --record F) is
// embedded under its file name and its state directory becomes the run's;
// the logs of sessions the client opened without creating them here are
// embedded as state/ files. With a Prior, the file is that scenario with
// this process's conversation appended after a restart.
func (rec *Recorder) Scenario(cmd []string) []byte {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	flags, files, realModel := scenarioFlags(cmd, rec.Self)
	if realModel {
		// Recorded against a real model, replayed from its fixture: the
		// model option names another model then, and is left free.
		for i, e := range rec.events {
			if e.fromAgent {
				rec.events[i].line = freeModelOption(e.line)
			}
		}
	}
	if !isAcpbridge(cmd[0], rec.Self) {
		rec.notes = append(rec.notes, "the agent is not acpbridge: its model and its state are not in the scenario; the run serves a model fixture only when the file has a model.jsonl section")
	} else if _, model, fixture := splitModelFlags(cmd[1:]); model != "" && fixture == "" {
		rec.notes = append(rec.notes, fmt.Sprintf("the model's answers (--model %s): give acpbridge --record FILE.jsonl as well, so that the scenario replays offline", model))
	}
	rec.noteWorkspaceFiles()
	sc := rec.Prior
	if sc == nil {
		date := " on " + time.Now().UTC().Format("2006-01-02")
		if rec.Deterministic {
			date = ""
		}
		sc = &Scenario{Comment: fmt.Sprintf("Recorded by acpbridge scenario record%s from:\n  %s\nRun it with: %s\n",
			date, strings.Join(cmd, " "), RunHint(cmd, rec.Self, "FILE"))}
		if isAcpbridge(cmd[0], rec.Self) {
			sc.Sections = append(sc.Sections, Section{Name: "flags", Data: strings.Join(flags, " ") + "\n"})
		} else {
			// Another agent's arguments are its own, not acpbridge's: in
			// its flags/NAME section, for --agent NAME=CMD.
			sc.Sections = append(sc.Sections, Section{Name: "flags", Data: "\n"},
				Section{Name: "flags/" + agentName(cmd[0]), Data: strings.Join(flags, " ") + "\n"})
		}
		if rec.Neutral {
			for i := range files {
				files[i].Data = neutralFixture(files[i].Data)
			}
		}
		sc.Sections = append(sc.Sections, files...)
		sc.Sections = append(sc.Sections, Section{Name: "transcript"})
	}
	v := newVars()
	sc.seedBindings(v)
	tr := rec.transcriptWith(v)
	if rec.Neutral {
		tr = neutralTranscript(tr)
	}
	if realModel {
		tr = strings.ReplaceAll(tr, `"`+freeOption+`"`, `"$ANY"`)
	}
	if t := sc.section("transcript"); t.Data != "" {
		t.Data += "restart\n" + tr
	} else {
		t.Data = tr
	}
	_, _, fixture := splitModelFlags(cmd[1:])
	for _, id := range slices.Sorted(maps.Keys(rec.captured)) {
		sc.setSection("state/sessions/"+id+".jsonl", asStateFile(rec.captured[id], v, rec.StateDir, fixture))
	}
	if rec.Parts {
		sc.setSection(recordBindings, v.bindingsText())
	}
	return sc.Format()
}

// agentName is the name --agent gives a command by default: its
// program's base name.
func agentName(program string) string {
	return strings.TrimSuffix(filepath.Base(program), ".exe")
}

// RunHint is the command that runs a scenario recorded from cmd: plain for
// acpbridge, with --agent naming the agent for another.
func RunHint(cmd []string, self, file string) string {
	if len(cmd) == 0 || isAcpbridge(cmd[0], self) {
		return "acpbridge scenario run " + file
	}
	return fmt.Sprintf("acpbridge scenario run --agent %s %s", shellword.Quote(agentName(cmd[0])+"="+strings.Join(cmd[:1], " ")), file)
}

// noteWorkspaceFiles notes the workspace files the agent's tool calls
// named: the scenario does not hold them (the user adds the ones the turns
// need as cwd/ sections).
func (rec *Recorder) noteWorkspaceFiles() {
	seen := map[string]bool{}
	var paths []string
	for _, e := range rec.events {
		if !e.fromAgent || !bytes.Contains(e.line, []byte(`"locations"`)) {
			continue
		}
		var m struct {
			Params struct {
				Update struct {
					Locations []struct {
						Path string `json:"path"`
					} `json:"locations"`
				} `json:"update"`
			} `json:"params"`
		}
		if json.Unmarshal(e.line, &m) != nil {
			continue
		}
		for _, l := range m.Params.Update.Locations {
			if !seen[l.Path] {
				seen[l.Path] = true
				paths = append(paths, l.Path)
			}
		}
	}
	if len(paths) > 0 {
		rec.notes = append(rec.notes, fmt.Sprintf("the workspace files the tool calls named (%s): add those the turns read as cwd/NAME sections", strings.Join(paths, ", ")))
	}
}

// asStateFile is a captured session log as a state/ file: the paths of the
// recording (the workspace, the state directory, the model fixture, which
// the scenario embeds in $DIR) written as the run's $CWD, $STATE and $DIR.
func asStateFile(log string, v *vars, stateDir, fixture string) string {
	var pairs []string
	if fixture != "" {
		if abs, err := filepath.Abs(fixture); err == nil {
			pairs = append(pairs, abs, "$DIR/"+filepath.Base(fixture))
		}
	}
	if cwd, ok := v.get("CWD"); ok {
		if s, isStr := cwd.(string); isStr && s != "" {
			pairs = append(pairs, s, "$CWD")
		}
	}
	if stateDir != "" {
		pairs = append(pairs, stateDir, "$STATE")
	}
	return strings.NewReplacer(pairs...).Replace(log)
}

// Note adds a line to the recording, as if it had passed.
func (rec *Recorder) Note(fromAgent bool, line []byte) {
	rec.note(event{fromAgent: fromAgent, line: line})
}

// Transcript writes the recorded lines as a transcript section; bind
// names paths to write as variables (pairs of name and value, such as
// "STATE" and the state directory). Without a CWD among them, the
// workspace is the cwd of the first session the client opened.
func (rec *Recorder) Transcript(bind ...string) string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.transcript(bind)
}

func (rec *Recorder) transcript(bind []string) string {
	v := newVars()
	for i := 0; i+1 < len(bind); i += 2 {
		v.set(bind[i], bind[i+1])
	}
	return rec.transcriptWith(v)
}

// transcriptWith writes the recorded lines with v's variables.
func (rec *Recorder) transcriptWith(v *vars) string {
	if _, ok := v.vals["CWD"]; !ok {
		for _, e := range rec.events {
			if cwd := sessionCwd(e); cwd != "" {
				v.set("CWD", cwd)
				break
			}
		}
	}
	var tr strings.Builder
	for _, e := range rec.events {
		tr.WriteString(e.step(v))
		tr.WriteByte('\n')
	}
	return tr.String()
}

// step is the transcript line of e, its values turned into v's variables.
func (e event) step(v *vars) string {
	switch {
	case e.close:
		return "close"
	case e.fromAgent:
		text, err := v.generalize(e.line, nil, true)
		if err != nil {
			return fmt.Sprintf("# the agent sent a line that is not JSON: %q", e.line)
		}
		return "< " + text
	}
	text, err := v.generalize(e.line, nil, false)
	if err != nil {
		return ">! " + string(e.line)
	}
	return "> " + text
}

// sessionCwd returns the cwd a session/new, load or resume asks for.
func sessionCwd(e event) string {
	if e.fromAgent || e.close {
		return ""
	}
	d, err := decode(e.line)
	m, _ := d.(map[string]any)
	if err != nil || m == nil {
		return ""
	}
	switch m["method"] {
	case "session/new", "session/load", "session/resume":
		p, _ := m["params"].(map[string]any)
		cwd, _ := p["cwd"].(string)
		return cwd
	}
	return ""
}

// scenarioFlags turns an acpbridge command line into scenario flags: the
// model fixture it replays or records is embedded, --state-dir is the
// run's. Another agent's arguments are kept as they are.
func scenarioFlags(cmd []string, self string) (flags []string, files []Section, realModel bool) {
	if len(cmd) == 0 {
		return nil, nil, false
	}
	args := cmd[1:]
	if !isAcpbridge(cmd[0], self) {
		return args, nil, false
	}
	flags, model, fixture := splitModelFlags(args)
	if model != "" && fixture != "" {
		// A real model recorded (--record): the scenario replays the
		// fixture, and the provider's flags go.
		model, realModel = "", true
		flags = withoutFlags(flags, "--base-url", "--models")
	}
	if fixture != "" {
		if b, err := os.ReadFile(fixture); err == nil {
			// Its name stays: the agent shows the model as replay:NAME.
			name := filepath.Base(fixture)
			files = append(files, Section{Name: name, Data: string(b)})
			model = "replay:$DIR/" + name
		} else {
			model = "replay:" + fixture
		}
	}
	if model != "" {
		flags = append(flags, "--model", model)
	}
	return append(flags, "--state-dir", "$STATE"), files, realModel
}

// withoutFlags is args less the named flags and their values.
func withoutFlags(args []string, names ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		name, _, hasVal := strings.Cut(args[i], "=")
		if strings.HasPrefix(name, "-") && !strings.HasPrefix(name, "--") {
			name = "-" + name
		}
		if slices.Contains(names, name) {
			if !hasVal {
				i++
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// freeOption stands for a model option until the transcript is written,
// where it becomes "$ANY" (a "$ANY" in a line would be written as text).
const freeOption = "acpbridge-scenario-free-model-option"

// freeModelOption is an agent's line with every config option of the
// model category written "$ANY": a recording made with a real model
// replays with the fixture's model name.
func freeModelOption(line []byte) []byte {
	if !bytes.Contains(line, []byte(`"configOptions"`)) {
		return line
	}
	var v any
	if json.Unmarshal(line, &v) != nil {
		return line
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			if opts, ok := x["configOptions"].([]any); ok {
				for i, o := range opts {
					if m, ok := o.(map[string]any); ok && m["category"] == "model" {
						opts[i] = freeOption
					}
				}
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(v)
	b, err := jsonenc.Marshal(v)
	if err != nil {
		return line
	}
	return b
}

// splitModelFlags takes --record, --model and --state-dir out of
// acpbridge's args: flags are the others, model the --model that is not a
// replay, fixture the replay fixture (--record's or --model's).
func splitModelFlags(args []string) (flags []string, model, fixture string) {
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(args[i], "=")
		if strings.HasPrefix(name, "-") && !strings.HasPrefix(name, "--") {
			name = "-" + name // Go's flags take -x as --x
		}
		switch name {
		case "--record", "--model", "--state-dir":
			if !hasVal && i+1 < len(args) {
				i++
				val = args[i]
			}
		default:
			flags = append(flags, args[i])
			continue
		}
		switch f, replay := strings.CutPrefix(val, "replay:"); {
		case name == "--record", name == "--model" && replay:
			fixture = f
			if !replay {
				fixture = val
			}
		case name == "--model":
			model = val
		}
	}
	return flags, model, fixture
}

// isAcpbridge reports whether the program path names acpbridge.
func isAcpbridge(path, self string) bool {
	if strings.HasPrefix(filepath.Base(path), "acpbridge") {
		return true
	}
	p, err := exec.LookPath(path)
	if err != nil || self == "" {
		return false
	}
	a, err1 := os.Stat(p)
	b, err2 := os.Stat(self)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// tail keeps the last bytes written to it (an agent's stderr).
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = bytes.Clone(t.buf[len(t.buf)-t.max:])
	}
	return len(p), nil
}

// String returns about the last 20 lines.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
