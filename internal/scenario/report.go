// report.go writes a comparison for others to read: every run's figures
// and the machine they ran on as JSON (--json), and a directory with
// report.md and an SVG chart per figure (--report).

package scenario

import (
	"acpbridge/internal/served"
	"acpbridge/internal/shellword"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// environment is where a comparison ran.
type environment struct {
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	Kernel string `json:"kernel,omitempty"`
	CPU    string `json:"cpu,omitempty"`
	CPUs   int    `json:"cpus"`
	Go     string `json:"go"`
	Node   string `json:"node,omitempty"` // node --version, where node is on the PATH
	// MemoryBytes is the machine's RAM; LoadAverage its load over 1, 5
	// and 15 minutes as the comparison began.
	MemoryBytes int64     `json:"memory_bytes,omitempty"`
	LoadAverage []float64 `json:"load_average,omitempty"`
	Acpbridge   string    `json:"acpbridge"`
	Started     time.Time `json:"started"`
	// Command is the command that ran, the binary that ran first (not a
	// name a PATH may or may not find), one string quoted as a POSIX shell
	// splits it back into its words; WorkingDir is the directory it ran
	// in. From there, paste it to run the same again.
	Command    string `json:"command"`
	WorkingDir string `json:"working_directory"`
}

// workingDir is the directory this process runs in, or "" if unknown.
func workingDir() string {
	wd, _ := os.Getwd()
	return wd
}

func newEnvironment(version string, args []string) environment {
	m := machine()
	return environment{OS: runtime.GOOS, Arch: runtime.GOARCH, Kernel: m.kernel, CPU: m.cpu, CPUs: runtime.NumCPU(),
		Go: runtime.Version(), MemoryBytes: m.memory, LoadAverage: m.load,
		Acpbridge: version, Started: time.Now().UTC(), Command: shellLine(args), WorkingDir: workingDir()}
}

// nodeVersion is what `node --version` says, "" without node.
func nodeVersion() string {
	path, err := exec.LookPath("node")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// shellLine is words as one command line a POSIX shell splits back into
// them.
func shellLine(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellword.Quote(w)
		if w == "" {
			quoted[i] = "''"
		}
	}
	return strings.Join(quoted, " ")
}

// comparison is everything a `scenario run` with several agents or runs
// measured: what --json writes and --report shows.
type comparison struct {
	Seed uint64 `json:"seed"` // of every bootstrap interval
	// Baseline is the agent the others' ratios are to; AgentOrder how the
	// agents took turns.
	Baseline   string `json:"baseline"`
	AgentOrder string `json:"agent_order"`
	// Threads is how many sessions of a scenario ran at once on one agent
	// process (--threads); each session is a run in the figures.
	Threads     int              `json:"threads"`
	Environment environment      `json:"environment"`
	Agents      []agentRecord    `json:"agents"`
	Scenarios   []scenarioRecord `json:"scenarios"`
}

type agentRecord struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
	// Path and SHA256 are the file the agent ran: the command's program,
	// or for an interpreter (node, python3, sh, bash) the script it was
	// given; "" where it could not be read.
	Path   string `json:"path,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Version is the name and version the agent gave in its answer to
	// initialize (agentInfo); SDK the ACP library its file was built
	// with, where that can be read (a Go binary's build information, or
	// the package.json of the SDK beside a Node script).
	Version string `json:"version,omitempty"`
	SDK     string `json:"sdk,omitempty"`
	// Program is what the command ran, read from its process, where that
	// is another file than Path (a wrapper script's program).
	Program *programRecord `json:"program,omitempty"`
}

// programRecord is the program an agent's command ran, where that is not
// the file its command names (a wrapper script started it): as read from
// the process that ran, hashed.
type programRecord struct {
	Command []string `json:"command"`
	Path    string   `json:"path,omitempty"`
	SHA256  string   `json:"sha256,omitempty"`
	SDK     string   `json:"sdk,omitempty"`
}

// ranProgram is what a run's tree ran (Stats.Program), for an agent whose
// command ran a wrapper: nil when it is the command's own file, or unread.
func (a agentRecord) ranProgram(program []string) *programRecord {
	if len(program) == 0 {
		return nil
	}
	path := ranFile(program)
	if path == "" || path == a.Path {
		return nil
	}
	return &programRecord{Command: program, Path: path, SHA256: fileSHA256(path), SDK: sdkOf(path)}
}

// newAgentRecord is an agent's record, its executable found and hashed.
func newAgentRecord(name string, command []string) agentRecord {
	a := agentRecord{Name: name, Command: command}
	a.Path = ranFile(command)
	a.SHA256 = fileSHA256(a.Path)
	a.SDK = sdkOf(a.Path)
	return a
}

// ranFile is the file a command runs: its program found on the PATH, or
// for an interpreter the first of its arguments that is a file.
func ranFile(command []string) string {
	path, err := exec.LookPath(command[0])
	if err != nil {
		return ""
	}
	switch strings.TrimSuffix(filepath.Base(path), ".exe") {
	case "node", "python3", "python", "sh", "bash":
		for _, arg := range command[1:] {
			if st, err := os.Stat(arg); err == nil && st.Mode().IsRegular() {
				abs, _ := filepath.Abs(arg)
				return abs
			}
		}
	}
	abs, _ := filepath.Abs(path)
	return abs
}

// fileSHA256 is the hex SHA-256 of the file at path, "" when it cannot
// be read.
func fileSHA256(path string) string {
	f, err := os.Open(path)
	if err != nil || path == "" {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

type scenarioRecord struct {
	Path        string            `json:"path"`
	SHA256      string            `json:"sha256"` // of the scenario file as it ran
	Repeat      int               `json:"repeat"` // counted runs per agent
	Results     []agentResults    `json:"results"`
	Differences []pairDifferences `json:"differences"`

	runs [][]Result
}

type agentResults struct {
	Agent  string `json:"agent"`
	Passed int    `json:"passed"` // counted runs that passed
	// PassRateCI95 is the pass rate's 95% Wilson interval.
	PassRateCI95 [2]float64         `json:"pass_rate_ci95"`
	Runs         []runRecord        `json:"runs"`
	Summary      map[string]summary `json:"summary"` // by figure: "turn1_answer_ms", "peak_pss_bytes"
	// WarmUp are the agent's warm-up runs (one, or one per session
	// under --threads): not in its figures, but a failure there is a
	// failure of the comparison (its exit status) and is listed.
	WarmUp []runRecord `json:"warm_up,omitempty"`
}

// runRecord is one run's figures; times in milliseconds, sizes in bytes,
// -1 where the run gave none.
type runRecord struct {
	Index int `json:"index"`           // among the agent's counted records (runs, or with --threads sessions), from 1
	Round int `json:"round,omitempty"` // the counted round it ran in, from 1: a run's sessions share it
	// Session is the session's number among the run's --threads (from
	// 1), absent without --threads: each session is a record.
	Session      int          `json:"session,omitempty"`
	Agent        string       `json:"agent"`
	StartedAt    time.Time    `json:"started_at"`
	LoadAverage  []float64    `json:"load_average,omitempty"` // as the run began: the load is sampled through the comparison, not only at its start
	LoadAtEnd    []float64    `json:"load_average_at_end,omitempty"`
	CPUMHz       []float64    `json:"cpu_mhz,omitempty"` // the CPUs' mean clock as the run began and ended, where readable
	Passed       bool         `json:"passed"`
	Error        string       `json:"error,omitempty"`
	AgentLines   int          `json:"agent_lines"`
	InitializeMs float64      `json:"spawn_to_initialize_ms"`
	NewSessionMs float64      `json:"session_new_ms"`
	Turns        []turnRecord `json:"turns"`
	CPUMs        float64      `json:"cpu_ms"`
	RSSPeaksSum  int64        `json:"rss_peaks_sum_bytes"` // an upper bound: each process's own peak, added
	PeakPSS      int64        `json:"peak_pss_bytes"`
	PeakUSS      int64        `json:"peak_uss_bytes"`  // private pages: not moved by other processes' mapping them
	PeakAnon     int64        `json:"peak_anon_bytes"` // anonymous pages: not moved by other processes mapping the same files
	Processes    int          `json:"processes"`
	// ExitedAfterEOF says the agent exited by itself at its stdin's end
	// (false: the run ended it, SIGTERM then SIGKILL).
	ExitedAfterEOF bool `json:"exited_after_eof"`
	// Model is what the served model was asked over the whole run
	// (with --threads, on the run's first session only: every session's).
	Model *served.Count `json:"model_whole_run,omitempty"`
	// Note says what a reader should know of the run: that no request
	// reached the served model (the agent used a model of its own).
	Note string `json:"note,omitempty"`
}

type turnRecord struct {
	FirstOutputMs float64 `json:"first_output_ms"`
	AnswerMs      float64 `json:"answer_ms"`
	AnswerFailed  bool    `json:"answer_failed,omitempty"` // answered with an error: not an answer time in the figures
	CPUMs         float64 `json:"cpu_ms"`                  // the tree's CPU from the prompt to its answer; -1: not read
	Messages      int     `json:"agent_messages"`
	Bytes         int64   `json:"agent_bytes"`
	ModelRequests int     `json:"model_requests"`
	ModelBytes    int64   `json:"model_request_bytes"`
	Tokens        int64   `json:"tokens_served"` // the fixture's usage, the same for every agent
	// PromptTokens and CompletionTokens are estimated from what the agent
	// sent and was answered, the same way for every agent (served.Count).
	PromptTokens     int64 `json:"prompt_tokens_estimated"`
	CompletionTokens int64 `json:"completion_tokens_estimated"`
	SideCalls        int   `json:"side_calls"` // the agent's side calls (titles, routing), answered without an entry
	// ToolCalls counts the recorded tool calls served, by how each was
	// mapped onto the agent's tools ("write_file → Write {content, file_path}").
	ToolCalls map[string]int `json:"tool_calls,omitempty"`
	// Sent counts the agent's messages in the turn by kind: "update
	// tool_call", "request session/request_permission".
	Sent map[string]int `json:"sent,omitempty"`
}

func millis(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return float64(d.Microseconds()) / 1000
}

func newRunRecord(r Result) runRecord {
	rec := runRecord{Passed: r.Err == nil, AgentLines: r.Lines, InitializeMs: millis(r.Initialize), NewSessionMs: millis(r.NewSession),
		CPUMs: millis(r.Stats.CPU), RSSPeaksSum: r.Stats.PeakRSS, PeakPSS: r.Stats.PeakPSS, PeakUSS: r.Stats.PeakUSS, PeakAnon: r.Stats.PeakAnon, Processes: r.Stats.Processes, Turns: []turnRecord{},
		ExitedAfterEOF: r.Err == nil && !r.EndedByRun, Model: r.Model}
	if r.Err != nil {
		rec.Error = r.Err.Error()
	}
	requests, known := 0, r.Model != nil // a thread's session but the first knows no model figures
	for _, t := range r.Turns {
		tr := turnRecord{FirstOutputMs: millis(t.FirstOutput), AnswerMs: millis(t.Answer), AnswerFailed: t.Failed, CPUMs: millis(t.CPU), Messages: t.Messages, Bytes: t.Bytes, Sent: t.Sent,
			ModelRequests: -1, ModelBytes: -1, Tokens: -1, PromptTokens: -1, CompletionTokens: -1, SideCalls: -1}
		if m := t.Model; m != nil {
			tr.ModelRequests, tr.ModelBytes, tr.Tokens = m.Requests, m.Bytes, m.Tokens
			tr.PromptTokens, tr.CompletionTokens, tr.SideCalls, tr.ToolCalls = m.PromptTokens, m.CompletionTokens, m.SideCalls, m.Mapped
			requests += m.Requests
			known = true
		}
		rec.Turns = append(rec.Turns, tr)
	}
	if r.Model != nil {
		requests = r.Model.Requests
	}
	if r.Env.ModelURL != "" && len(r.Turns) > 0 && known && requests == 0 {
		rec.Note = "no request reached the served model: the agent answered with a model of its own, so its figures are not comparable"
	}
	return rec
}

// newScenarioRecord gathers one scenario's runs (runs[i]: agent i's) and
// differences.
func newScenarioRecord(path string, names []string, runs [][]Result, diffs []pairDifferences, baseline int) scenarioRecord {
	sr := scenarioRecord{Path: path, SHA256: fileSHA256(path), Differences: diffs, runs: runs}
	figs := figuresOf(maxTurns(runs))
	for i, rs := range runs {
		sr.Repeat = max(sr.Repeat, len(rs))
		ar := agentResults{Agent: names[i], Summary: map[string]summary{}, Passed: passed(rs)}
		ar.PassRateCI95 = wilson95(ar.Passed, len(rs))
		for n, r := range rs {
			rec := newRunRecord(r)
			rec.Index, rec.Round, rec.Agent, rec.StartedAt, rec.Session, rec.LoadAverage, rec.LoadAtEnd = n+1, r.Round, names[i], r.StartedAt, r.Session, r.Load, r.LoadEnd
			if r.MHz[0] > 0 {
				rec.CPUMHz = r.MHz[:]
			}
			ar.Runs = append(ar.Runs, rec)
		}
		for _, f := range figs {
			s := summarize(f, rs)
			if i != baseline && baseline < len(runs) {
				s.RatioToBaseline = pairedRatio(byRound(f, rs), byRound(f, runs[baseline]))
			}
			ar.Summary[f.id()] = s
		}
		sr.Results = append(sr.Results, ar)
	}
	return sr
}

// writeJSON writes the comparison to path.
func (c *comparison) writeJSON(path string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return writeAtomically(path, append(b, '\n'))
}

// writeReport writes dir/report.md, a chart per figure and scenario, and
// a chart of the ratios to the baseline per scenario.
func (c *comparison) writeReport(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var md strings.Builder
	c.writeSetting(&md)
	for n, sr := range c.Scenarios {
		if err := c.writeScenario(&md, dir, n, sr); err != nil {
			return err
		}
	}
	c.writeLimits(&md)
	md.WriteString(figureDefinitions)
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(md.String()), 0o644)
}

// writeSetting writes what a reader needs to run the comparison again:
// the command, the machine and every agent's file and version.
func (c *comparison) writeSetting(md *strings.Builder) {
	e := c.Environment
	fmt.Fprintf(md, "# Scenario comparison\n\nRun %s; to run it again:\n\n```sh\ncd %s && %s\n```\n\n", e.Started.Format(time.RFC3339), shellword.Quote(e.WorkingDir), e.Command)
	fmt.Fprintf(md, "| | |\n|---|---|\n| acpbridge | %s |\n| OS | %s/%s %s |\n| CPU | %s × %d |\n", e.Acpbridge, e.OS, e.Arch, e.Kernel, cmp.Or(e.CPU, "unknown"), e.CPUs)
	if e.MemoryBytes > 0 {
		fmt.Fprintf(md, "| RAM | %.1f GiB |\n", float64(e.MemoryBytes)/(1<<30))
	}
	if len(e.LoadAverage) == 3 {
		fmt.Fprintf(md, "| load average at the start | %.2f, %.2f, %.2f (1, 5, 15 min) |\n", e.LoadAverage[0], e.LoadAverage[1], e.LoadAverage[2])
		if lo, hi, ok := c.sampledRange(func(rec runRecord) []float64 { return firsts(rec.LoadAverage, rec.LoadAtEnd) }); ok {
			fmt.Fprintf(md, "| load average (1 min) as each run began and ended | %.2f to %.2f |\n", lo, hi)
		}
	}
	if lo, hi, ok := c.sampledRange(func(rec runRecord) []float64 { return rec.CPUMHz }); ok {
		fmt.Fprintf(md, "| CPU clock (the CPUs' mean) as each run began and ended | %.0f to %.0f MHz |\n", lo, hi)
	} else {
		md.WriteString("| CPU clock | not readable here |\n")
	}
	fmt.Fprintf(md, "| Go | %s |\n| Node | %s |\n| bootstrap seed | %d |\n\n", e.Go, cmp.Or(e.Node, "not on the PATH"), c.Seed)
	md.WriteString("| agent | says it is | command | file run | sha256 | ACP library |\n|---|---|---|---|---|---|\n")
	for _, a := range c.Agents {
		fmt.Fprintf(md, "| %s | %s | `%s` | %s | %s | %s |\n", a.Name, cmp.Or(a.Version, "–"), shellLine(a.Command), cmp.Or(a.Path, "not found"), cmp.Or(a.SHA256, "–"), cmp.Or(a.SDK, "–"))
		if p := a.Program; p != nil {
			fmt.Fprintf(md, "| %s, the program it started | | `%s` | %s | %s | %s |\n", a.Name, shellLine(p.Command), p.Path, cmp.Or(p.SHA256, "–"), cmp.Or(p.SDK, "–"))
		}
	}
}

// sampledRange is the least and most of what of gives of each counted
// run (the machine as it began and ended: load, clock).
func (c *comparison) sampledRange(of func(runRecord) []float64) (lo, hi float64, ok bool) {
	for _, sr := range c.Scenarios {
		for _, ar := range sr.Results {
			for _, rec := range ar.Runs {
				for _, v := range of(rec) {
					if !ok || v < lo {
						lo = v
					}
					if !ok || v > hi {
						hi = v
					}
					ok = true
				}
			}
		}
	}
	return lo, hi, ok
}

// firsts is the first value of each of lists that has one (the 1-minute
// load of each sample).
func firsts(lists ...[]float64) []float64 {
	var out []float64
	for _, l := range lists {
		if len(l) > 0 {
			out = append(out, l[0])
		}
	}
	return out
}

// addWarmUps records each agent's warm-up runs.
func (sr *scenarioRecord) addWarmUps(warmups [][]Result) {
	for i, rs := range warmups {
		if i >= len(sr.Results) {
			break
		}
		for _, r := range rs {
			rec := newRunRecord(r)
			rec.Agent, rec.StartedAt, rec.Session = sr.Results[i].Agent, r.StartedAt, r.Session
			sr.Results[i].WarmUp = append(sr.Results[i].WarmUp, rec)
		}
	}
}

// failures lists every failed run of the scenario, warm-ups included,
// with its reason, for report.md.
func (sr scenarioRecord) failures() string {
	var sb strings.Builder
	for _, ar := range sr.Results {
		list := func(what func(runRecord) string, recs []runRecord) {
			for _, rec := range recs {
				if !rec.Passed {
					fmt.Fprintf(&sb, "- %s, %s: %s\n", ar.Agent, what(rec), strings.ReplaceAll(rec.Error, "\n", " "))
				}
			}
		}
		list(func(runRecord) string { return "warm-up run" }, ar.WarmUp)
		list(func(rec runRecord) string {
			if rec.Session > 0 {
				return fmt.Sprintf("run %d, session %d", rec.Round, rec.Session)
			}
			return fmt.Sprintf("run %d", rec.Index)
		}, ar.Runs)
	}
	if sb.Len() == 0 {
		return "None: every run passed, warm-ups included.\n"
	}
	return sb.String()
}

// writeScenario writes one scenario's section of the report and its
// charts.
func (c *comparison) writeScenario(md *strings.Builder, dir string, n int, sr scenarioRecord) error {
	names := make([]string, len(sr.Results))
	for i, ar := range sr.Results {
		names[i] = ar.Agent
	}
	baseline := max(0, slices.Index(names, c.Baseline))
	fmt.Fprintf(md, "\n## %s\n\nsha256 %s; %d counted runs per agent after a warm-up run each, the agents interleaved, each round in the order of a Williams design (each agent runs in each place and follows each other agent equally often).", sr.Path, sr.SHA256, sr.Repeat)
	if c.Threads > 1 {
		fmt.Fprintf(md, " Each run is %d sessions of the scenario at once on one agent process and connection (`--threads %d`): a session's figures are over every session of every run, the agent's (CPU, memory, processes, the whole run's model figures) once per run; a session owns no model figures (the model's calls meanwhile are every session's); intervals and ratios resample runs, not sessions, since a run's sessions share its process and its minute of the machine.", c.Threads, c.Threads)
	}
	md.WriteString("\n\n")
	md.WriteString(figuresTable("", names, sr.runs, baseline, c.Threads, figuresOf(maxTurns(sr.runs))))
	md.WriteString("\n### Failures\n\n" + sr.failures())
	md.WriteString("\n### What each agent sent, per turn\n\n" + sentTable(names, sr.runs))
	md.WriteString("\n### Differences\n\n```\n" + showDifferences(sr.Differences) + "```\n\n### Charts\n\n")
	var rows []ratioRow
	for k, f := range figuresOf(maxTurns(sr.runs)) {
		var agents []series
		for i, rs := range sr.runs {
			s := summarize(f, rs)
			s.Median, s.CI95 = f.shown(s.Median), [2]float64{f.shown(s.CI95[0]), f.shown(s.CI95[1])}
			runs := valuesOf(f, rs)
			for j := range runs {
				runs[j] = f.shown(runs[j])
			}
			agents = append(agents, series{name: names[i], sum: s, runs: runs})
			if r := pairedRatio(byRound(f, rs), byRound(f, sr.runs[baseline])); i != baseline && r != nil && f.ratioCharted() {
				rows = append(rows, ratioRow{figure: f.label(), agent: names[i], r: r})
			}
		}
		name := fmt.Sprintf("s%d-%02d-%s.svg", n+1, k+1, slug(f.id()))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(dotChart(f.label(), sr.Path, agents)), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(md, "![%s](%s)\n", f.label(), name)
	}
	if len(rows) > 0 {
		name := fmt.Sprintf("s%d-ratios.svg", n+1)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(ratioChart(sr.Path, names[baseline], rows)), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(md, "![ratios to %s](%s)\n", names[baseline], name)
	}
	return nil
}

// ratioCharted says whether the chart of ratios shows the figure: times,
// CPU and memory, the figures a design changes.
func (f figure) ratioCharted() bool {
	return f.Unit == "ms" || f.Key == "peak_pss_bytes"
}

// sentTable is, per turn, how many messages of each kind (sentKind) each
// agent sent: the median over its runs that reached the turn.
func sentTable(names []string, runs [][]Result) string {
	var sb strings.Builder
	sb.WriteString("| turn | message |")
	for _, name := range names {
		sb.WriteString(" " + name + " |")
	}
	sb.WriteString("\n|---|---|" + strings.Repeat("---|", len(names)) + "\n")
	for t := range maxTurns(runs) {
		kinds := map[string]bool{}
		for _, rs := range runs {
			for _, r := range rs {
				if t < len(r.Turns) {
					for k := range r.Turns[t].Sent {
						kinds[k] = true
					}
				}
			}
		}
		for _, kind := range slices.Sorted(maps.Keys(kinds)) {
			fmt.Fprintf(&sb, "| %d | %s |", t+1, kind)
			for _, rs := range runs {
				var counts []float64
				for _, r := range rs {
					if t < len(r.Turns) && r.Turns[t].Answer >= 0 {
						counts = append(counts, float64(r.Turns[t].Sent[kind]))
					}
				}
				cell := "–"
				if len(counts) > 0 {
					slices.Sort(counts)
					cell = trimFloat(quantile(counts, 0.5))
				}
				sb.WriteString(" " + cell + " |")
			}
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

// figureDefinitions says what every figure of the report measures.
const figureDefinitions = `
## Figures

- **spawn → initialize answered**: wall clock from the agent process's start to the client's reading of its answer to ` + "`initialize`" + `.
- **session/new answered**: from the client's write of the first ` + "`session/new`" + ` to its reading of the answer.
- **turn N: first output**: from the client's write of the turn's ` + "`session/prompt`" + ` to its reading of the first ` + "`session/update`" + ` after it that carries the model's output (text, a thought, a tool call or a plan): an agent's command list or usage sent at the prompt is not counted, so the figure means the same for every agent; **answer**: to its reading of the prompt's answer; **CPU of the tree**: the time on a CPU of the agent process and every process below it from the prompt's write to its answer (Linux: each thread's schedstat, in nanoseconds, read as the prompt is written and as its answer is read; a thread or process started meanwhile counts from 0, one ended meanwhile is not counted), so a process started ahead for later sessions counts only for what it used during the turn (not given for a session under ` + "`--threads`" + `, whose tree is every session's, nor outside Linux).
- **agent messages** and their **size**: the lines the agent wrote meanwhile (the answer included) and their bytes, newlines counted.
- **model requests**: the HTTP requests that reached the served model meanwhile (not given for a session under ` + "`--threads`" + `: what the model was asked meanwhile is every session's), side calls (a title, a summary: no tools offered, or a JSON schema asked for) included; **model requests' size**: their bodies' bytes.
- **prompt tokens, estimated**: for each model request, the bytes of every string value of its JSON body (messages, system prompt, tool descriptions and schemas, tool inputs and results; not keys or syntax) divided by 4, added up; **completion tokens, estimated**: the bytes of the answers' text, thoughts and tool inputs divided by 4. The same estimator for every agent and wire.
- **tokens served (the fixture's usage)**: the usage the fixture's entries report (an estimate where an entry has none): the same for every agent by construction, shown to tell the two apart.
- **model requests, the whole run** and **prompt tokens, estimated, the whole run**: the same over the whole run, the handshake and every session included: with ` + "`--threads N`" + `, the cost of N sessions at once.
- **CPU, user + system, the whole run**: of the tree, from the agent's start to its exit: the agent's own and its waited-for children's at its end, or where more, the sum of every process's own time as last sampled (so the children of an agent ended at the run's end count too).
- **peak PSS of the tree**: the largest sum, over the agent process and every process below it, of the proportional set size (each page's size divided among the processes that share it), sampled every 5 ms (or, for a tree whose sample takes longer than a twentieth of that, twenty times the sample's time apart: measuring takes at most a twentieth of a core), whenever the agent has answered every request, and as its stdin closes.
- **peak USS of the tree (private pages)**: the largest sum, sampled as PSS is, of each process's private pages (clean and dirty: the unique set size). PSS divides a shared page among the processes that map it, so it moves when another process on the machine maps the same files (a second codex-acp running meanwhile); USS moves too, the other way: a file page that only the tree maps is private, and turns shared when an unrelated process maps the same binary.
- **peak anonymous memory of the tree**: the largest sum, sampled as PSS is, of each process's anonymous memory (` + "`Anonymous`" + ` in smaps_rollup: heaps, stacks, what the program allocated; no file's pages). It does not move with what other processes map, so it is the figure to compare across machines and runs; it leaves out the program's own code and files, which PSS and USS count.
- **sum of per-process peak RSS (an upper bound)**: each process's own peak RSS (VmHWM) added, over the processes alive whenever every request was answered: pages shared are counted once per process and peaks at different moments added, so it is never below the tree's true peak.
- **processes**: the most processes in the tree at once whenever every request was answered.
- Cells: the median over the counted runs (with ` + "`--threads`" + `, over every session of every run) and, in brackets, its 95% interval: a percentile bootstrap of the median, 2,000 resamples, seeded, that draws runs (a run's sessions together: they share its process and its minute of the machine, so they are not independent); a ratio is the ratio of the median to the baseline agent's median, over the rounds both gave the figure, with its 95% interval from a paired bootstrap over those rounds (both agents' runs of a round drawn together). n on a chart: the runs, and the sessions where they differ. Runs outside three interquartile ranges are flagged in the JSON (` + "`outliers`" + `).
`

// slug is a figure's name as a file name's part.
func slug(s string) string {
	var sb strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			sb.WriteRune(r)
			dash = false
		} else if !dash && sb.Len() > 0 {
			sb.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(sb.String(), "-")
}
