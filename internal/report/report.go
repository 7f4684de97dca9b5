// report.go holds a comparison (Comparison) and writes it for others to
// read: every run's figures and the machine they ran on as JSON (--json),
// and a directory with report.md and an SVG chart per figure (--report).

package report

import (
	"acpbridge/internal/served"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Comparison is everything a `scenario run` with several agents or runs
// measured: what --json writes and --report shows.
type Comparison struct {
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

// New is an empty comparison of agents run by command (the binary that
// ran first, then its arguments) with acpbridge version on machine m,
// starting now.
func New(version string, command []string, m Machine) *Comparison {
	return &Comparison{Seed: bootstrapSeed, AgentOrder: agentOrder, Threads: 1, Environment: environment{
		OS: runtime.GOOS, Arch: runtime.GOARCH, Kernel: m.Kernel, CPU: m.CPU, CPUs: runtime.NumCPU(),
		Go: runtime.Version(), MemoryBytes: m.Memory, LoadAverage: m.Load,
		Acpbridge: version, Started: time.Now().UTC(), Command: shellLine(command), WorkingDir: workingDir()}}
}

// AddAgent adds the agent named name, run by command, its executable
// found and hashed.
func (c *Comparison) AddAgent(name string, command []string) {
	c.Agents = append(c.Agents, newAgentRecord(name, command))
}

// Add adds one scenario's runs (runs[i]: agent i's counted runs, warmups[i]
// its warm-up runs) and where each pair of agents differs. The first run
// of an agent tells what it says it is and the program it ran.
func (c *Comparison) Add(path string, runs, warmups [][]Run, diffs []Differences) {
	names := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		names[i] = a.Name
		if len(runs[i]) == 0 {
			continue
		}
		if a.Version == "" {
			c.Agents[i].Version = runs[i][0].AgentInfo
		}
		if a.Program == nil {
			c.Agents[i].Program = a.ranProgram(runs[i][0].Stats.Program)
		}
	}
	sr := newScenarioRecord(path, names, runs, diffs, c.baseline())
	sr.addWarmUps(warmups)
	c.Scenarios = append(c.Scenarios, sr)
}

// baseline is the index of the agent the others' ratios are to.
func (c *Comparison) baseline() int {
	for i, a := range c.Agents {
		if a.Name == c.Baseline {
			return i
		}
	}
	return 0
}

type scenarioRecord struct {
	Path        string         `json:"path"`
	SHA256      string         `json:"sha256"` // of the scenario file as it ran
	Repeat      int            `json:"repeat"` // counted runs per agent (a run of --threads is its sessions together)
	Results     []agentResults `json:"results"`
	Differences []Differences  `json:"differences"`

	runs [][]Run
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

func newRunRecord(r Run) runRecord {
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
	if r.Served && len(r.Turns) > 0 && known && requests == 0 {
		rec.Note = "no request reached the served model: the agent answered with a model of its own, so its figures are not comparable"
	}
	return rec
}

// newScenarioRecord gathers one scenario's runs (runs[i]: agent i's) and
// differences.
func newScenarioRecord(path string, names []string, runs [][]Run, diffs []Differences, baseline int) scenarioRecord {
	sr := scenarioRecord{Path: path, SHA256: fileSHA256(path), Differences: diffs, runs: runs}
	figs := figuresOf(maxTurns(runs))
	for i, rs := range runs {
		_, counted := runsPassed(rs) // runs, not the sessions of --threads
		sr.Repeat = max(sr.Repeat, counted)
		ar := agentResults{Agent: names[i], Summary: map[string]summary{}, Passed: Passed(rs)}
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

// WriteJSON writes the comparison to path, as JSON.
func (c *Comparison) WriteJSON(path string) error {
	c.readNode()
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteReport writes dir/report.md, a chart per figure and scenario, and
// a chart of the ratios to the baseline per scenario.
func (c *Comparison) WriteReport(dir string) error {
	c.readNode()
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

// sampledRange is the least and most of what of gives of each counted
// run (the machine as it began and ended: load, clock).
func (c *Comparison) sampledRange(of func(runRecord) []float64) (lo, hi float64, ok bool) {
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
func (sr *scenarioRecord) addWarmUps(warmups [][]Run) {
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
func (c *Comparison) writeScenario(md *strings.Builder, dir string, n int, sr scenarioRecord) error {
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
	md.WriteString("\n### Differences\n\n```\n" + ShowDifferences(sr.Differences) + "```\n\n### Charts\n\n")
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
func sentTable(names []string, runs [][]Run) string {
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
- **tokens served (the fixture's usage)**: the usage the fixture's entries report (an estimate where an entry has none; side calls, which take no entry, are not counted): the same for every agent by construction, shown to tell the two apart.
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
