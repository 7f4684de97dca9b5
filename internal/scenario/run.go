// run.go runs a scenario against an agent: it sends the client's lines
// when every agent line before them has arrived, matches what the agent
// sends, and reports the first difference with the file's line; with
// Update it rewrites the < lines from what the agent sent instead.

package scenario

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/clip"
	"acpbridge/internal/report"
	"acpbridge/internal/served"
)

// Agent is a running agent under test.
type Agent struct {
	Stdin  io.WriteCloser
	Stdout io.Reader
	Wait   func() int // its exit status, once its output has ended
	Kill   func()     // ends it at once
	// End, when set, ends an agent that has not exited at stdin's end:
	// SIGTERM to its process group, then, after a grace, SIGKILL.
	End    func()
	Stderr func() string       // the last of what it wrote to stderr
	Stats  func() report.Stats // what it used, once it has exited; nil when not measured
	// ReadCPU, when set, reads the CPU time so far of each thread of the
	// agent's tree, by thread id (nil where it cannot): a turn's CPU is
	// what the tree used between two readings (cpuSince).
	ReadCPU func() map[int]time.Duration
	// Settled, when set, is called whenever the agent has answered every
	// request the client sent: its processes are counted then.
	Settled func()
}

// Env is where a run takes place: the run directory and, under it, the
// workspace and the state directory; and the model endpoint that serves
// the scenario's model fixture ("" when it has none).
type Env struct{ Dir, Cwd, State, ModelURL string }

// Options say how to run scenarios.
type Options struct {
	// Start starts the agent with the scenario's flags (expanded) in env.
	Start func(flags []string, env Env) (*Agent, error)
	// Flags, when set, chooses the agent's flags from the scenario
	// (unexpanded); by default its -- flags --, which are acpbridge's.
	Flags func(sc *Scenario) []string
	// Timeout bounds each wait for a line and for the agent's exit.
	Timeout time.Duration
	// Update rewrites the < lines instead of checking them.
	Update bool
	// AcceptErrors lets Update write a response that is an error where the
	// old file had none (a turn that ended in an error, say).
	AcceptErrors bool
	// Check, when set, vets every line sent (fromAgent false) and received
	// (true); a non-empty answer fails the run.
	Check func(fromAgent bool, line []byte) string
	// TempDir is where run directories are made ("" for the system's).
	TempDir string
	// Stop, when closed (a signal), fails the run where it waits: the
	// agent is ended and what ran is reported.
	Stop <-chan struct{}

	shared *shared // a thread of RunThreads: the threads' directory, model and agent
}

// Result is the outcome of one scenario.
type Result struct {
	Path    string
	Updated []byte // with Update: the rewritten file

	Env      Env      // where it ran (gone by the time Run returns)
	Received [][]byte // every line the agent sent
	// BeforeTurns is how many lines the agent sent before the first
	// prompt was written: its handshake.
	BeforeTurns int

	report.Run // what it measured: passed or not, times, memory, model calls
}

// eofGrace is how long an agent with Agent.End is given to exit at its
// stdin's end before the run ends it.
const eofGrace = 2 * time.Second

// Failure is a difference between the scenario and the agent.
type Failure struct {
	Path string
	Line int // in the file; 0 when no line is to blame
	Msg  string
}

func (f *Failure) Error() string {
	if f.Line == 0 {
		return fmt.Sprintf("%s: %s", f.Path, f.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", f.Path, f.Line, f.Msg)
}

// run is the state of one run.
type run struct {
	sc      *Scenario
	opt     Options
	env     Env
	v       *vars
	agent   *Agent
	model   *served.Model                 // the fixture served to the agent, or nil
	flags   []string                      // the agent's, expanded
	lines   chan []byte                   // the agent's stdout, a line at a time; closed at its end
	n       int                           // agent lines read
	closed  bool                          // stdin closed
	pending map[string]sentRequest        // the client's requests not yet answered, by id
	options map[string][]permissionOption // the options of the agent's permission requests, by request id
	got     [][]byte                      // every line the agent sent
	turns   []report.Turn
	prompts map[string]*promptClock // prompts sent and not yet answered, by id
	editor  bool                    // the agent's requests are answered as an editor answers them
	// rejecting makes that editor's user reject every permission asked
	// (`editor rejecting`).
	rejecting bool

	endedByRun bool // see Result.EndedByRun

	started     time.Time     // when the first agent process started
	initialize  time.Duration // see Result
	newSession  time.Duration
	beforeTurns int // -1 until the first prompt is written
}

// sentRequest is a request of the client's: its method and when it was
// written.
type sentRequest struct {
	method string
	at     time.Time
}

// promptClock times one prompt.
type promptClock struct {
	sent  time.Time
	turn  int // its index in run.turns
	first bool
	model served.Count          // the served model's count when it was written
	cpu   map[int]time.Duration // the agent's tree's CPU when it was written (nil: not read)
}

// permissionOption is one option of a permission request.
type permissionOption struct {
	OptionID string `json:"optionId"`
	Kind     string `json:"kind"`
}

// Run runs one scenario.
func Run(sc *Scenario, opt Options) Result {
	if opt.Timeout == 0 {
		opt.Timeout = 10 * time.Second
	}
	r := &run{sc: sc, opt: opt, v: newVars(), pending: map[string]sentRequest{}, options: map[string][]permissionOption{},
		prompts: map[string]*promptClock{}, initialize: -1, newSession: -1, beforeTurns: -1}
	res := Result{Path: sc.Path, Run: report.Run{StartedAt: time.Now().UTC(), Load: loadAverage(), MHz: [2]float64{cpuMHz()}}}
	dir, err := r.prepare()
	if dir != "" {
		defer os.RemoveAll(dir)
	}
	if r.model != nil && opt.shared == nil {
		defer r.model.Close()
	}
	if err == nil {
		if opt.Update {
			res.Updated, err = r.update()
		} else {
			err = r.check()
		}
	}
	if r.agent != nil && err != nil {
		r.agent.Kill()
	}
	res.Err, res.Lines, res.Received, res.Turns, res.Env = err, r.n, r.got, r.turns, r.env
	res.Initialize, res.NewSession, res.BeforeTurns, res.EndedByRun = r.initialize, r.newSession, r.beforeTurns, r.endedByRun
	if res.BeforeTurns < 0 {
		res.BeforeTurns = r.n
	}
	if r.agent != nil && r.agent.Stats != nil {
		r.agent.Wait()
		res.Stats = r.agent.Stats()
	}
	if r.model != nil {
		c := r.model.Served()
		res.Model = &c
	}
	res.Served, res.AgentInfo = r.env.ModelURL != "", agentInfo(res.Received)
	res.LoadEnd, res.MHz[1] = loadAverage(), cpuMHz()
	return res
}

// prepare makes the run's directories and files and starts the agent;
// a thread of RunThreads takes the threads' instead.
func (r *run) prepare() (string, error) {
	if r.opt.shared != nil {
		r.useShared(r.opt.shared)
		return "", r.start()
	}
	dir, err := os.MkdirTemp(r.opt.TempDir, "scenario-")
	if err != nil {
		return "", err
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return dir, err
	}
	if err := r.makeEnv(dir); err != nil {
		return dir, err
	}
	if err := r.serveFixture(dir); err != nil {
		return dir, err
	}
	r.expandFlags()
	return dir, r.start()
}

// serveFixture serves the model fixture acpbridge's flags in the scenario
// name, if any.
func (r *run) serveFixture(dir string) error {
	var own []string // acpbridge's flags, which name the fixture to serve
	for _, f := range r.sc.Flags {
		own = append(own, r.expandPaths(f, true))
	}
	if path := fixtureOf(own, dir); path != "" {
		var err error
		if r.model, err = served.Start(path, r.sc.Path, "", []string{r.env.Cwd}); err != nil {
			return &Error{r.sc.Path, 0, err.Error()}
		}
		r.env.ModelURL = r.model.URL
		r.v.set("MODEL_URL", r.model.URL)
	}
	return nil
}

// expandFlags sets the agent's flags: the scenario's (or Options.Flags'),
// paths expanded.
func (r *run) expandFlags() {
	flags := r.sc.Flags
	if r.opt.Flags != nil {
		flags = r.opt.Flags(r.sc)
	}
	for _, f := range flags {
		r.flags = append(r.flags, r.expandPaths(f, true))
	}
}

// start starts the agent with the run's flags.
func (r *run) start() error {
	if r.started.IsZero() {
		r.started = time.Now()
	}
	agent, err := r.opt.Start(r.flags, r.env)
	if err != nil {
		return &Failure{r.sc.Path, 0, fmt.Sprintf("starting the agent: %v", err)}
	}
	r.agent, r.closed = agent, false
	r.lines = make(chan []byte, 256)
	go r.readLines()
	return nil
}

// restart ends the agent as a run's end does (stdin closed, nothing more
// from it, exit status 0) and starts the next process with the same flags
// in the same directories.
func (r *run) restart(st Step) error {
	if r.opt.shared != nil {
		return &Error{r.sc.Path, st.Line, "restart ends the agent, which --threads shares among the threads: run this scenario without --threads"}
	}
	if err := r.end(nil); err != nil {
		return err
	}
	if err := r.start(); err != nil {
		return &Failure{r.sc.Path, st.Line, err.Error()}
	}
	return nil
}

// makeEnv makes the run's directories below dir ($DIR: $CWD and $STATE),
// binds their variables and writes the scenario's files into them.
func (r *run) makeEnv(dir string) error {
	r.env = Env{Dir: dir, Cwd: filepath.Join(dir, "cwd"), State: filepath.Join(dir, "state")}
	for _, d := range []string{r.env.Cwd, r.env.State} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	r.v.set("CWD", r.env.Cwd)
	r.v.set("STATE", r.env.State)
	r.v.set("DIR", r.env.Dir)
	return r.writeFiles()
}

// writeFiles writes the scenario's files into the run's directory: cwd/
// sections into $CWD, state/ into $STATE, any other but flags, transcript
// and check/ into $DIR.
func (r *run) writeFiles() error {
	for _, s := range r.sc.Sections {
		top, name, nested := strings.Cut(s.Name, "/")
		var path string
		switch {
		case s.Name == "flags" || s.Name == "transcript" || s.Name == recordBindings || (top == "check" || top == "flags") && nested:
			continue
		case top == "cwd" && nested:
			path = filepath.Join(r.env.Cwd, name)
		case top == "state" && nested:
			path = filepath.Join(r.env.State, name)
		default:
			path = filepath.Join(r.env.Dir, s.Name)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(r.expandPaths(s.Data, nested)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readLines hands the agent's non-blank stdout lines to r.lines, closing it
// at the end.
func (r *run) readLines() {
	br := bufio.NewReaderSize(r.agent.Stdout, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			r.lines <- bytes.TrimSuffix(line, []byte("\n"))
		}
		if err != nil {
			close(r.lines)
			return
		}
	}
}

// expandPaths replaces $CWD, $STATE, $DIR (and $MODEL_URL once the model is
// served) in flags and in the files put in the workspace and the state
// directory.
func (r *run) expandPaths(s string, expand bool) string {
	if !expand {
		return s
	}
	pairs := []string{"$CWD", r.env.Cwd, "$STATE", r.env.State, "$DIR", r.env.Dir}
	if r.env.ModelURL != "" {
		pairs = append(pairs, "$MODEL_URL", r.env.ModelURL)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// check runs the transcript and compares. After an editor line, the
// session/update notifications the agent sends after the transcript's
// last line (a title or usage that comes late, as codex's does when its
// machine is busy) are shown as an editor shows them, not failures; any
// other line still fails.
func (r *run) check() error {
	if err := r.runSteps(r.sc.Steps); err != nil {
		return err
	}
	var late func([]byte) error
	if r.editor {
		late = func(line []byte) error {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &m) == nil && m.Method == acp.MethodSessionUpdate && len(m.ID) == 0 {
				return nil
			}
			return r.afterLast(line)
		}
	}
	return r.finish(late)
}

// runSteps sends, closes and expects as steps say, consecutive sends in
// one write.
func (r *run) runSteps(steps []Step) error {
	for i := 0; i < len(steps); i++ {
		st := steps[i]
		switch st.Kind {
		case Send, SendRaw:
			j := i
			for j+1 < len(steps) && (steps[j+1].Kind == Send || steps[j+1].Kind == SendRaw) {
				j++
			}
			if err := r.send(steps[i : j+1]); err != nil {
				return err
			}
			i = j
		case Close:
			r.close()
		case Restart:
			if err := r.restart(st); err != nil {
				return err
			}
		case Editor:
			r.editor, r.rejecting = true, st.Text == "rejecting"
		case Expect:
			line, err := r.next(st)
			if err != nil {
				return err
			}
			if err := r.compare(st, line); err != nil {
				return err
			}
		case ExpectAny:
			if err := r.skipUntil(st, steps[i+1]); err != nil {
				return err
			}
			i++ // skipUntil matched the < line after it
		}
	}
	return nil
}

// skipUntil takes agent lines that match the <* step any until one
// matches the < step until (Parse makes sure one follows).
func (r *run) skipUntil(any, until Step) error {
	for {
		line, err := r.next(until)
		if err != nil {
			return err
		}
		got, _ := decode(line)
		if r.v.match("", until.want, got) == nil {
			r.v.commit()
			return nil
		}
		r.v.drop()
		if r.v.match("", any.want, got) != nil {
			r.v.drop()
			return r.compare(until, line) // neither: say how it differs from the < line
		}
		r.v.drop() // a <* line binds nothing
	}
}

// send writes a group of client lines in one write.
func (r *run) send(group []Step) error {
	var buf []byte
	for _, st := range group {
		text, err := r.sendText(st)
		if err != nil {
			return err
		}
		buf = append(append(buf, text...), '\n')
	}
	if r.closed {
		return &Error{r.sc.Path, group[0].Line, "a > line after close: the agent's stdin is closed"}
	}
	return r.write(buf, group[0].Line, "this line")
}

// write writes buf to the agent's stdin, failing at the file's line at
// when the agent ends or reads none of it within the timeout.
func (r *run) write(buf []byte, at int, what string) error {
	written := make(chan error, 1)
	go func() {
		_, err := r.agent.Stdin.Write(buf)
		written <- err
	}()
	select {
	case err := <-written:
		if err != nil {
			code, _ := r.exitStatus()
			return r.fail(at, fmt.Sprintf("the agent ended (exit status %d) before it read %s (%v)", code, what, err))
		}
		return nil
	case <-time.After(r.opt.Timeout):
		return r.fail(at, fmt.Sprintf("the agent read none of %s for %v", what, r.opt.Timeout))
	case <-r.opt.Stop:
		return r.fail(at, "stopped by a signal while the agent read "+what)
	}
}

// sendText is the line a send step writes: a > line with its variables
// substituted (and noted as pending when it is a request), a >! line with
// its paths expanded.
func (r *run) sendText(st Step) (string, error) {
	if st.Kind != Send {
		return r.expandPaths(st.Text, true), nil
	}
	text, err := r.v.substitute(st.Text)
	if err != nil {
		return "", &Error{r.sc.Path, st.Line, err.Error()}
	}
	if text, err = r.byKind(text); err != nil {
		return "", r.fail(st.Line, err.Error())
	}
	if msg := r.vet(false, []byte(text)); msg != "" {
		return "", &Error{r.sc.Path, st.Line, "the client line is not a valid ACP message: " + msg}
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal([]byte(text), &m) == nil && m.Method != "" && len(m.ID) > 0 {
		id := string(m.ID)
		r.pending[id] = sentRequest{m.Method, time.Now()}
		if m.Method == "session/prompt" {
			if r.beforeTurns < 0 {
				r.beforeTurns = r.n
			}
			cpu := r.readCPU() // before the clock starts: the reading is the client's time, not the agent's
			r.prompts[id] = &promptClock{sent: time.Now(), turn: len(r.turns), model: r.model.Served(), cpu: cpu}
			r.turns = append(r.turns, report.Turn{FirstOutput: -1, Answer: -1, CPU: -1})
		}
	}
	return text, nil
}

// readCPU reads the CPU time of the agent's tree so far, for a turn's
// figure; nil where it is not read: a session of RunThreads shares its
// tree with the others, so no turn of it owns what the tree used.
func (r *run) readCPU() map[int]time.Duration {
	if r.agent == nil || r.agent.ReadCPU == nil || r.opt.shared != nil {
		return nil
	}
	return r.agent.ReadCPU()
}

func (r *run) vet(fromAgent bool, line []byte) string {
	if r.opt.Check == nil {
		return ""
	}
	return r.opt.Check(fromAgent, line)
}

func (r *run) close() {
	if !r.closed {
		r.closed = true
		r.agent.Stdin.Close()
	}
}

// next reads the agent's next line for the expect step st.
func (r *run) next(st Step) ([]byte, error) {
	waiting := "< " + clip.Marked(st.Text, 300) + st.where()
	line, ok, err := r.read(st.Line, waiting)
	if err == nil && !ok {
		err = r.fail(st.Line, fmt.Sprintf("the agent ended its output (exit status %d) while the scenario waited for %s", r.agent.Wait(), waiting))
	}
	return line, err
}

// where says, for a step from an included file, where it stands there.
func (st Step) where() string {
	if st.From == "" {
		return ""
	}
	return " (included: " + st.From + ")"
}

// read reads the agent's next line; ok is false at the end of its output.
func (r *run) read(at int, waiting string) (line []byte, ok bool, err error) {
	select {
	case line, ok := <-r.lines:
		if !ok {
			return nil, false, nil
		}
		r.n++
		r.got = append(r.got, line)
		for _, p := range r.prompts { // the line counts to every turn running
			r.turns[p.turn].Messages++
			r.turns[p.turn].Bytes += int64(len(line)) + 1
		}
		if _, err := decode(line); err != nil {
			return nil, false, r.fail(at, fmt.Sprintf("the agent's line %d is not JSON (%v): %s", r.n, err, clip.Marked(string(line), 300)))
		}
		if msg := r.vet(true, line); msg != "" {
			return nil, false, r.fail(at, fmt.Sprintf("the agent's line %d is not a valid ACP message: %s\n  %s", r.n, msg, clip.Marked(string(line), 300)))
		}
		r.answered(line)
		if r.editor && !r.closed {
			if answer := r.editorAnswer(line); answer != nil {
				if err := r.write(append(answer, '\n'), at, "the editor's answer"); err != nil {
					return nil, false, err
				}
				return r.read(at, waiting)
			}
		}
		return line, true, nil
	case <-time.After(r.opt.Timeout):
		return nil, false, r.fail(at, fmt.Sprintf("timed out after %v waiting for %s", r.opt.Timeout, waiting))
	case <-r.opt.Stop:
		return nil, false, r.fail(at, "stopped by a signal while the scenario waited for "+waiting)
	}
}

// answered notes a response to one of the client's requests, the options
// of a permission request, and the times of the prompts.
func (r *run) answered(line []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Error  json.RawMessage `json:"error"`
		Params struct {
			Options []permissionOption `json:"options"`
			Update  struct {
				SessionUpdate string `json:"sessionUpdate"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return
	}
	now := time.Now()
	if kind := sentKind(m.Method, len(m.ID) > 0, m.Params.Update.SessionUpdate); kind != "" {
		for _, p := range r.prompts {
			t := &r.turns[p.turn]
			if t.Sent == nil {
				t.Sent = map[string]int{}
			}
			t.Sent[kind]++
		}
	}
	switch {
	case m.Method != nil && *m.Method == "session/update" && modelOutput(m.Params.Update.SessionUpdate):
		for _, p := range r.prompts {
			if !p.first {
				p.first = true
				r.turns[p.turn].FirstOutput = now.Sub(p.sent)
			}
		}
	case len(m.ID) == 0:
	case m.Method == nil:
		id := string(m.ID)
		sent := r.pending[id]
		delete(r.pending, id)
		switch sent.method {
		case "initialize":
			if r.initialize < 0 {
				r.initialize = now.Sub(r.started)
			}
		case "session/new":
			if r.newSession < 0 {
				r.newSession = now.Sub(sent.at)
			}
		}
		if p := r.prompts[id]; p != nil {
			t := &r.turns[p.turn]
			t.Answer = now.Sub(p.sent)
			t.CPU = cpuSince(r.readCPU(), p.cpu)
			t.Failed = len(m.Error) > 0 && string(m.Error) != "null"
			if r.opt.shared == nil { // a thread's turn shares the model with the others'
				c := r.model.Served().Since(p.model)
				t.Model = &c
			}
			delete(r.prompts, id)
		}
		if len(r.pending) == 0 && r.agent.Settled != nil {
			r.agent.Settled()
		}
	case *m.Method == "session/request_permission":
		r.options[string(m.ID)] = m.Params.Options
	}
}

// modelOutput reports whether a session/update of this kind carries the
// model's output (text, a thought, a tool call, a plan), which a turn's
// first output is timed to: an agent's command list or usage sent at the
// prompt is not an answer beginning.
func modelOutput(kind string) bool {
	switch kind {
	case "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan":
		return true
	}
	return false
}

// sentKind is what an agent's message is, as a turn counts them: "update
// KIND" for a session/update, "request METHOD" for a request to the
// client, "notification METHOD" for another notification; "" for a
// response.
func sentKind(method *string, hasID bool, update string) string {
	switch {
	case method == nil:
		return ""
	case *method == "session/update":
		return "update " + update
	case hasID:
		return "request " + *method
	}
	return "notification " + *method
}

// byKind answers a permission request by the kind of option: a > line
// whose outcome names "optionKind" (allow_once, allow_always, reject_once,
// reject_always) instead of "optionId" is sent with the id of the option of
// that kind the agent offered in the request it answers, so that one file
// answers any agent.
func (r *run) byKind(text string) (string, error) {
	if !strings.Contains(text, `"optionKind"`) {
		return text, nil
	}
	var m map[string]any
	if json.Unmarshal([]byte(text), &m) != nil {
		return text, nil
	}
	res, _ := m["result"].(map[string]any)
	outcome, _ := res["outcome"].(map[string]any)
	kind, ok := outcome["optionKind"].(string)
	if !ok {
		return text, nil
	}
	id, _ := json.Marshal(m["id"])
	opts, asked := r.options[string(id)]
	if !asked {
		return "", fmt.Errorf("this line answers by optionKind %q, but the agent sent no permission request with id %s", kind, id)
	}
	for _, o := range opts {
		if o.Kind == kind {
			delete(outcome, "optionKind")
			outcome["optionId"] = o.OptionID
			b, err := json.Marshal(m)
			return string(b), err
		}
	}
	var offered []string
	for _, o := range opts {
		offered = append(offered, fmt.Sprintf("%s (kind %s)", o.OptionID, o.Kind))
	}
	return "", fmt.Errorf("the agent's permission request %s offers no option of kind %q; it offers %s", id, kind, strings.Join(offered, ", "))
}

// compare matches an agent line against an expect step.
func (r *run) compare(st Step, line []byte) error {
	got, _ := decode(line)
	m := r.v.match("", st.want, got)
	if m == nil {
		r.v.commit()
		return nil
	}
	r.v.drop()
	if m.err != nil {
		return &Error{r.sc.Path, st.Line, m.err.Error()}
	}
	at := m.path
	if at == "" {
		at = "the top"
	}
	return r.fail(st.Line, fmt.Sprintf("the agent's line %d differs at %s%s\n  want: %s\n  got:  %s\n  expected: < %s\n  the agent sent: %s",
		r.n, at, st.where(), clip.Marked(m.want, 400), clip.Marked(m.got, 400), clip.Marked(st.Text, 1000), clip.Marked(string(line), 1000)))
}

// afterLast fails the run for line, which the agent sent after the
// transcript's last line.
func (r *run) afterLast(line []byte) error {
	return r.fail(0, fmt.Sprintf("the agent sent line %d after the transcript's last line: %s", r.n, clip.Marked(string(line), 400)))
}

// finish closes stdin, checks that nothing more comes, that the agent
// exits with status 0 and that the workspace holds the files it should.
// extra, when set, takes the lines that come after the transcript instead.
func (r *run) finish(extra func([]byte) error) error {
	if err := r.end(extra); err != nil {
		return err
	}
	return r.checkFiles()
}

// end closes stdin, checks that nothing more comes (extra, when set, takes
// what does) and that the agent exits with status 0.
func (r *run) end(extra func([]byte) error) error {
	r.close()
	var ended atomic.Bool
	if r.agent.End != nil {
		t := time.AfterFunc(min(eofGrace, r.opt.Timeout), func() {
			ended.Store(true)
			r.agent.End()
		})
		defer t.Stop()
	}
	for {
		line, ok, err := r.read(0, "the agent to end its output after stdin closed")
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if extra != nil {
			if err := extra(line); err != nil {
				return err
			}
			continue
		}
		return r.afterLast(line)
	}
	switch code, exited := r.exitStatus(); {
	case ended.Load():
		r.endedByRun = true // a figure, not a failure: agents people run ignore stdin's end
	case !exited:
		return r.fail(0, fmt.Sprintf("the agent closed its output but did not exit within %v", r.opt.Timeout))
	case code != 0:
		return r.fail(0, fmt.Sprintf("the agent exited with status %d", code))
	}
	return nil
}

// checkFiles compares the workspace's files with the check/ sections.
func (r *run) checkFiles() error {
	for _, s := range r.sc.Sections {
		name, ok := strings.CutPrefix(s.Name, "check/")
		if !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(r.env.Cwd, name))
		if err != nil {
			return &Failure{r.sc.Path, s.Line, fmt.Sprintf("the workspace has no %s after the run: %v", name, err)}
		}
		if string(b) != s.Data {
			return &Failure{r.sc.Path, s.Line, fmt.Sprintf("%s after the run differs\n  want: %q\n  got:  %q", name, clip.Marked(s.Data, 400), clip.Marked(string(b), 400))}
		}
	}
	return nil
}

// exitStatus waits, up to the timeout, for the agent to exit and returns
// its status; ok is false when it did not exit.
func (r *run) exitStatus() (code int, ok bool) {
	exited := make(chan int, 1)
	go func() { exited <- r.agent.Wait() }()
	select {
	case code := <-exited:
		return code, true
	case <-time.After(r.opt.Timeout):
		return 0, false
	}
}

// fail makes a Failure carrying the bindings and the end of stderr.
func (r *run) fail(line int, msg string) error {
	msg += "\n  bindings:" + r.v.String()
	if tail := strings.TrimSpace(r.agent.Stderr()); tail != "" {
		msg += "\n  the agent's stderr ends:\n    " + strings.ReplaceAll(tail, "\n", "\n    ")
	}
	return &Failure{r.sc.Path, line, msg}
}

// IsFailure reports whether err is a difference with the agent rather than
// a fault of the scenario file or of the machine.
func IsFailure(err error) bool {
	var f *Failure
	return errors.As(err, &f)
}

// fixtureOf is the model fixture a run serves: the one the scenario's
// flags (expanded) give acpbridge with --model replay:PATH, else the run
// directory's model.jsonl when the scenario has one; "" when neither.
func fixtureOf(flags []string, dir string) string {
	if _, realModel, fixture := splitModelFlags(flags); realModel == "" && fileExists(fixture) {
		return fixture
	}
	if path := filepath.Join(dir, "model.jsonl"); fileExists(path) {
		return path
	}
	return ""
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
