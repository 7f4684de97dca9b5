// report.go writes a comparison for others to read: every run's figures
// and the machine they ran on as JSON (--json), and a directory with
// report.md and an SVG chart per figure (--report).

package scenario

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// environment is where a comparison ran.
type environment struct {
	OS        string    `json:"os"`
	Arch      string    `json:"arch"`
	Kernel    string    `json:"kernel,omitempty"`
	CPU       string    `json:"cpu,omitempty"`
	CPUs      int       `json:"cpus"`
	Go        string    `json:"go"`
	Acpbridge string    `json:"acpbridge"`
	Started   time.Time `json:"started"`
	// Command is the command that ran, one string quoted as a POSIX shell
	// splits it back into its words: paste it to run the same again.
	Command string `json:"command"`
}

func newEnvironment(version string, args []string) environment {
	kernel, cpu := machine()
	return environment{OS: runtime.GOOS, Arch: runtime.GOARCH, Kernel: kernel, CPU: cpu, CPUs: runtime.NumCPU(),
		Go: runtime.Version(), Acpbridge: version, Started: time.Now().UTC(), Command: shellLine(args)}
}

// shellLine is words as one command line a POSIX shell splits back into
// them.
func shellLine(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellQuote(w)
		if w == "" {
			quoted[i] = "''"
		}
	}
	return strings.Join(quoted, " ")
}

// comparison is everything a `scenario run` with several agents or runs
// measured: what --json writes and --report shows.
type comparison struct {
	Seed        uint64           `json:"seed"` // of every bootstrap interval
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
}

// newAgentRecord is an agent's record, its executable found and hashed.
func newAgentRecord(name string, command []string) agentRecord {
	a := agentRecord{Name: name, Command: command}
	a.Path = ranFile(command)
	a.SHA256 = fileSHA256(a.Path)
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
	Summary      map[string]summary `json:"summary"` // by figure name and unit
}

// runRecord is one run's figures; times in milliseconds, sizes in bytes,
// -1 where the run gave none.
type runRecord struct {
	Index        int          `json:"index"` // among the agent's counted runs, from 1
	Agent        string       `json:"agent"`
	StartedAt    time.Time    `json:"started_at"`
	Passed       bool         `json:"passed"`
	Error        string       `json:"error,omitempty"`
	AgentLines   int          `json:"agentLines"`
	InitializeMs float64      `json:"initializeMs"`
	NewSessionMs float64      `json:"newSessionMs"`
	Turns        []turnRecord `json:"turns"`
	CPUMs        float64      `json:"cpuMs"`
	PeakRSS      int64        `json:"peakRssBytes"`
	PeakPSS      int64        `json:"peakPssBytes"`
	Processes    int          `json:"processes"`
	// ExitedAfterEOF says the agent exited by itself at its stdin's end
	// (false: the run ended it, SIGTERM then SIGKILL).
	ExitedAfterEOF bool `json:"exitedAfterEof"`
	// Note says what a reader should know of the run: that no request
	// reached the served model (the agent used a model of its own).
	Note string `json:"note,omitempty"`
}

type turnRecord struct {
	FirstUpdateMs float64 `json:"firstUpdateMs"`
	AnswerMs      float64 `json:"answerMs"`
	Messages      int     `json:"messages"`
	Bytes         int64   `json:"bytes"`
	ModelRequests int     `json:"modelRequests"`
	ModelBytes    int64   `json:"modelRequestBytes"`
	Tokens        int64   `json:"tokensServed"`
	SideCalls     int     `json:"sideCalls"` // the agent's side calls (titles, routing), answered without an entry
	// ToolCalls counts the recorded tool calls served, by how each was
	// mapped onto the agent's tools ("write_file → Write {content, file_path}").
	ToolCalls map[string]int `json:"toolCalls,omitempty"`
}

func millis(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return float64(d.Microseconds()) / 1000
}

func newRunRecord(r Result) runRecord {
	rec := runRecord{Passed: r.Err == nil, AgentLines: r.Lines, InitializeMs: millis(r.Initialize), NewSessionMs: millis(r.NewSession),
		CPUMs: millis(r.Stats.CPU), PeakRSS: r.Stats.PeakRSS, PeakPSS: r.Stats.PeakPSS, Processes: r.Stats.Processes, Turns: []turnRecord{},
		ExitedAfterEOF: r.Err == nil && !r.EndedByRun}
	if r.Err != nil {
		rec.Error = r.Err.Error()
	}
	requests := 0
	for _, t := range r.Turns {
		rec.Turns = append(rec.Turns, turnRecord{FirstUpdateMs: millis(t.FirstUpdate), AnswerMs: millis(t.Answer), Messages: t.Messages,
			Bytes: t.Bytes, ModelRequests: t.Model.Requests, ModelBytes: t.Model.Bytes, Tokens: t.Model.Tokens,
			SideCalls: t.Model.SideCalls, ToolCalls: t.Model.Mapped})
		requests += t.Model.Requests
	}
	if r.Env.ModelURL != "" && len(r.Turns) > 0 && requests == 0 {
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
			rec.Index, rec.Agent, rec.StartedAt = n+1, names[i], r.StartedAt
			ar.Runs = append(ar.Runs, rec)
		}
		for _, f := range figs {
			s := summarize(f, rs)
			if i != baseline && baseline < len(runs) {
				s.RatioToBaseline = pairedRatio(valuesOf(f, rs), valuesOf(f, runs[baseline]))
			}
			ar.Summary[f.label()] = s
		}
		sr.Results = append(sr.Results, ar)
	}
	return sr
}

// label is the figure's name with its unit.
func (f figure) label() string {
	if f.Unit == "" {
		return f.Name
	}
	return f.Name + " (" + f.Unit + ")"
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

// writeReport writes dir/report.md and a chart per figure and scenario.
func (c *comparison) writeReport(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var md strings.Builder
	e := c.Environment
	fmt.Fprintf(&md, "# Scenario comparison\n\nRun %s with `%s`.\n\n", e.Started.Format(time.RFC3339), e.Command)
	fmt.Fprintf(&md, "| | |\n|---|---|\n| acpbridge | %s |\n| OS | %s/%s %s |\n| CPU | %s × %d |\n| Go | %s |\n", e.Acpbridge, e.OS, e.Arch, e.Kernel, cmpOr(e.CPU, "unknown"), e.CPUs, e.Go)
	for _, a := range c.Agents {
		fmt.Fprintf(&md, "| agent %s | `%s` (%s, sha256 %s) |\n", a.Name, shellLine(a.Command), cmp.Or(a.Path, "not found"), cmp.Or(a.SHA256, "–"))
	}
	for n, sr := range c.Scenarios {
		names := make([]string, len(sr.Results))
		for i, ar := range sr.Results {
			names[i] = ar.Agent
		}
		fmt.Fprintf(&md, "\n## %s\n\n", sr.Path)
		md.WriteString(figuresTable("", names, sr.runs))
		md.WriteString("\n### Differences\n\n```\n" + showDifferences(sr.Differences) + "```\n\n### Charts\n\n")
		for k, f := range figuresOf(maxTurns(sr.runs)) {
			name := fmt.Sprintf("s%d-%02d-%s.svg", n+1, k+1, slug(f.Name))
			var sums []summary
			for _, rs := range sr.runs {
				sums = append(sums, summarize(f, rs))
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(barChart(f.label(), names, sums)), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(&md, "![%s](%s)\n", f.label(), name)
		}
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(md.String()), 0o644)
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

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

// barChart is an SVG chart of one figure: a bar per agent at its median,
// a whisker over its spread, the value written above.
func barChart(title string, names []string, sums []summary) string {
	const width, height, top, bottom, left = 480, 260, 40, 40, 50
	top_ := 0.0
	for _, s := range sums {
		top_ = max(top_, s.High, s.Median)
	}
	if top_ <= 0 {
		top_ = 1
	}
	plot := float64(height - top - bottom)
	y := func(v float64) float64 { return float64(height-bottom) - v/top_*plot }
	slot := float64(width-left-10) / float64(max(1, len(names)))
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&sb, `<text x="%d" y="20" font-size="14">%s</text>`+"\n", left, html.EscapeString(title))
	fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, height-bottom, width-10, height-bottom)
	fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, height-bottom)
	fmt.Fprintf(&sb, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-4, top+4, html.EscapeString(trimFloat(top_)))
	fmt.Fprintf(&sb, `<text x="%d" y="%d" text-anchor="end">0</text>`+"\n", left-4, height-bottom)
	for i, s := range sums {
		x := float64(left) + slot*float64(i) + slot*0.2
		w := slot * 0.6
		cx := x + w/2
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", cx, height-bottom+16, html.EscapeString(names[i]))
		if s.N == 0 {
			fmt.Fprintf(&sb, `<text x="%.1f" y="%d" text-anchor="middle">no value</text>`+"\n", cx, height-bottom-4)
			continue
		}
		fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#4a7fb5"/>`+"\n", x, y(s.Median), w, float64(height-bottom)-y(s.Median))
		if s.High > s.Low {
			fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", cx, y(s.Low), cx, y(s.High))
			for _, v := range []float64{s.Low, s.High} {
				fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", cx-6, y(v), cx+6, y(v))
			}
		}
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", cx, min(y(s.Median), y(s.High))-4, html.EscapeString(trimFloat(s.Median)))
	}
	fmt.Fprintf(&sb, `<text x="%d" y="%d" font-size="10">bar: median; whisker: %s</text>`+"\n", left, height-6, spreadName(sums))
	sb.WriteString("</svg>\n")
	return sb.String()
}

func spreadName(sums []summary) string {
	for _, s := range sums {
		if s.Spread == "IQR" {
			return "interquartile range"
		}
	}
	return "min–max"
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}
