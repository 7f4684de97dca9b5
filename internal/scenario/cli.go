// cli.go holds the four scenario commands: `scenario run` (check,
// update or compare agents), `scenario serve` (play the agent's side to
// test a client), `scenario record` (write a conversation down) and
// `scenario model` (serve a fixture's model on its own).

package scenario

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"acpbridge/internal/cliflag"
	"acpbridge/internal/proc"
	"acpbridge/internal/report"
	"acpbridge/internal/served"
)

const usage = `Usage:
  acpbridge scenario run [--agent [NAME=]CMD]... [--repeat N] [--threads N] [--baseline NAME]
                         [--json FILE] [--csv FILE] [--benchfmt FILE] [--report DIR] [--diff-limit N] [--verbose]
                         [--update [--accept-errors]] [--timeout D] FILE...  (flags may follow the files)
  acpbridge scenario serve [--report FILE] [--timeout D] FILE
  acpbridge scenario record --out FILE [--append] [--deterministic] [--neutral] -- CMD [ARG...]
  acpbridge scenario model [--cwd DIR] [--listen ADDR] FILE

run starts the agent for each scenario file, plays the client's side and
checks every line the agent sends. The agent is this acpbridge with the
file's flags, or each --agent [NAME=]CMD in turn (CMD split as a shell
would; acpbridge gets the file's flags, another agent its flags/NAME
section's, or the file's where CMD has the word $FLAGS); with several, each
gets its line, their figures side by side and where each pair differs.
--repeat N runs each agent once unmeasured, then N times, interleaved, and
gives each figure's median and spread; --json and --report write every
figure, the machine's description and charts for others to read. The file's
model fixture is served on the wires agents speak (OpenAI Chat Completions
and Responses, Anthropic Messages, Gemini), its tool calls mapped onto each
agent's own tools: every agent gets OPENAI_BASE_URL and MODEL_URL (and
$MODEL_URL in its flags), ANTHROPIC_BASE_URL and GOOGLE_GEMINI_BASE_URL
naming it, and dummy keys. After a transcript's editor line, the agent's
requests are answered as an editor answers them. An agent still running two
seconds after its stdin closed is ended (a figure, not a failure). A signal
stops the run and reports what ran. --update rewrites the < lines from what
the agent sent instead. The agent runs in the scenario's directory with HOME inside it and
without the user's ACPBRIDGE_* settings or OPENAI_BASE_URL, so that a file's
result does not depend on who runs it.

serve is an ACP agent on stdin/stdout that plays the agent's side of FILE,
to test an editor or client: it writes the < lines and checks each line
the client sends against the > line in its place (a literal request id in
the file stands for whatever id the client gives). It exits 0 when the
client did as the file says, else 1 with the differences on stderr and in
the report file (by default FILE's name with .serve-report.txt).

record sits between an editor and the agent command CMD, passes every
message through unchanged and writes the conversation to FILE as a scenario.
--append adds this process's conversation to FILE as its next part (a client
that starts a process per prompt); --deterministic makes the file byte-stable;
--neutral writes what another agent that behaves the same would also pass
(permissions answered by kind, the agent's wording and capabilities free;
its tool calls, requests and stop reasons pinned).

model serves FILE's model fixture (a scenario's, or a .jsonl fixture) as the
endpoint run gives its agents, for an agent driven by another harness: it
prints the base URL (ending in /v1) as its first line, logs each call on
stderr, and serves until stdin ends or a signal (--listen ADDR for a fixed
address). Each conversation follows the fixture from its own start.
`

// Main runs `acpbridge scenario ARGS`. self is this acpbridge's path, the
// agent run when --agent is not given.
// version is acpbridge's version line, for a comparison's record of where
// it ran.
func Main(ctx context.Context, args []string, self, version string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		cliflag.Fail(stderr, "acpbridge scenario", "name a command: run, serve, record or model")
		return 2
	}
	switch args[0] {
	case "run":
		return runCommand(ctx, args[1:], self, version, stdout, stderr)
	case "record":
		return recordCommand(ctx, args[1:], self, stdin, stdout, stderr)
	case "serve":
		return serveCommand(ctx, args[1:], stdin, stdout, stderr)
	case "model":
		return modelCommand(ctx, args[1:], stdin, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	cliflag.Fail(stderr, "acpbridge scenario", "unknown command %q (run, serve, record or model)", args[0])
	return 2
}

// durationFlag is a flag.Duration whose error says that it wants a unit.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration: give it with a unit, such as 3s or 500ms", s)
	}
	*f.d = d
	return nil
}

// parseInterspersed parses fs's flags wherever they stand among the file
// names, and returns the file names; ok is false after --help (status 0)
// or a usage error (status 2), each said as cliflag says them.
func parseInterspersed(fs *flag.FlagSet, args []string, cmd string, stdout, stderr io.Writer) (files []string, ok bool, status int) {
	for {
		if ok, status := cliflag.Parse(fs, args, cmd, usage+"\n"+fs.Name()+"'s flags:\n", stdout, stderr); !ok {
			return nil, false, status
		}
		if fs.NArg() == 0 {
			return files, true, 0
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func runCommand(ctx context.Context, args []string, self, version string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scenario run", flag.ContinueOnError)
	var agents []agentSpec
	fs.Func("agent", "an agent to run, `[NAME=]CMD` quoted as a shell would (repeat it to compare agents); default: this acpbridge", func(v string) error {
		a, err := parseAgent(v, self)
		if err == nil {
			agents = append(agents, a)
		}
		return err
	})
	upd := fs.Bool("update", false, "rewrite the < lines from what the agent sends")
	acceptErrors := fs.Bool("accept-errors", false, "with --update: write a response that is an error where the file had none")
	timeout := 10 * time.Second
	fs.Var(durationFlag{&timeout}, "timeout", "how long to wait for each line, with a unit")
	repeat := fs.Int("repeat", 0, "run each agent `N` times after a warm-up run, interleaved, and give each figure's median and spread")
	jsonOut := fs.String("json", "", "write every run's figures and the machine's description to `FILE`")
	reportDir := fs.String("report", "", "write report.md and an SVG chart per figure to `DIR`")
	baseline := fs.String("baseline", "", "the agent `NAME` the others' figures are given as a ratio to, in --json (default: the first)")
	csvOut := fs.String("csv", "", "write every run's figures to `FILE`, a row per run and figure (run,round,session,agent,scenario,passed,turn,figure,unit,value)")
	benchOut := fs.String("benchfmt", "", "write every run's figures to `FILE` in Go's benchmark format, for `benchstat -col /agent FILE`")
	threads := fs.Int("threads", 1, "run `N` sessions of each scenario at once on one agent process and connection (for an agent that serves several)")
	diffLimit := fs.Int("diff-limit", 20, "list at most `N` differences per pair of agents (0: all)")
	verbose := fs.Bool("verbose", false, "show every turn's figures in the table printed (by default the first turn's, and turns 2–N folded; --json, --csv and --report have every turn's)")
	files, ok, status := parseInterspersed(fs, args, "acpbridge scenario run", stdout, stderr)
	if !ok {
		return status
	}
	switch {
	case len(files) == 0:
		cliflag.Fail(stderr, "acpbridge scenario run", "name at least one scenario file")
		return 2
	case *repeat < 0 || *diffLimit < 0:
		cliflag.Fail(stderr, "acpbridge scenario run", "--repeat and --diff-limit take a number of 0 or more")
		return 2
	case *threads < 1 || *threads > 1 && *upd:
		cliflag.Fail(stderr, "acpbridge scenario run", "--threads takes a number of 1 or more, and --update runs one thread")
		return 2
	}
	named := len(agents) > 0 // each result line then says which agent ran
	if !named {
		agents = []agentSpec{{name: "acpbridge", command: []string{self}, acpbridge: true}}
	}
	if *upd && (len(agents) > 1 || *repeat > 0) {
		fmt.Fprint(stderr, "acpbridge scenario run: --update rewrites a file from one run of one agent: name one --agent, without --repeat\n")
		return 2
	}
	names := uniqueNames(agents)
	cmp := report.New(version, append([]string{self, "scenario", "run"}, args...), machine())
	for i, a := range agents {
		cmp.AddAgent(names[i], a.command)
	}
	rr := rounds{agents: agents, names: names, named: named, repeat: *repeat, threads: *threads, verbose: *verbose,
		opt: Options{Timeout: timeout, Update: *upd, AcceptErrors: *acceptErrors, Stop: ctx.Done()}}
	if rr.baseline = slices.Index(names, *baseline); *baseline == "" {
		rr.baseline = 0
	} else if rr.baseline < 0 {
		cliflag.Fail(stderr, "acpbridge scenario run", "--baseline %q names no agent (the agents: %s)", *baseline, strings.Join(names, ", "))
		return 2
	}
	cmp.Threads, cmp.Baseline = *threads, names[rr.baseline]
	total, failed := rr.runAll(files, cmp, *diffLimit, stdout)
	fmt.Fprintf(stdout, "%d passed, %d failed\n", total-failed, failed)
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "acpbridge scenario run: stopped by a signal after %d runs; what ran is reported\n", total)
		failed++
	}
	if !writeFiles(cmp, outputs{*jsonOut, *csvOut, *benchOut, *reportDir}, stdout, stderr) {
		return 1
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// outputs are the files `scenario run` was asked to write ("": not).
type outputs struct{ json, csv, benchfmt, report string }

// writeFiles writes --json, --csv, --benchfmt and --report where asked,
// and says where the report is; false when one could not be written.
func writeFiles(c *report.Comparison, o outputs, stdout, stderr io.Writer) bool {
	for _, out := range []struct {
		flag, path string
		write      func(string) error
	}{{"--json", o.json, c.WriteJSON}, {"--csv", o.csv, c.WriteCSV}, {"--benchfmt", o.benchfmt, c.WriteBenchfmt}, {"--report", o.report, c.WriteReport}} {
		if out.path == "" {
			continue
		}
		if err := out.write(out.path); err != nil {
			fmt.Fprintf(stderr, "acpbridge scenario run: writing %s %s: %v\n", out.flag, out.path, err)
			return false
		}
	}
	if o.report != "" {
		fmt.Fprintf(stdout, "the report is in %s\n", filepath.Join(o.report, "report.md"))
	}
	return true
}

// rounds is how `scenario run` runs each file: every agent, as many times
// as asked.
type rounds struct {
	agents []agentSpec
	names  []string
	named  bool // each result line says which agent ran
	repeat int  // 0: one run, no warm-up
	// threads is how many sessions of the scenario run at once on one
	// agent process; each counts as a run of its own.
	threads int
	opt     Options
	// baseline is the agent the others' figures are a ratio to.
	baseline int
	// verbose shows every turn's figures in the terminal's table, not the
	// first turn's and the rest folded.
	verbose bool
}

// runAll runs every file, adds each to cmp and prints each one's table and
// differences when comparing or repeating; a signal (rr.opt.Stop) ends it
// after the file it stopped in. It returns how many runs ran and failed.
func (rr rounds) runAll(files []string, cmp *report.Comparison, diffLimit int, stdout io.Writer) (total, failed int) {
	for _, path := range files {
		runs, warmups, f := rr.run(path, stdout)
		failed += f
		measured, warm := measuredRuns(runs), measuredRuns(warmups)
		var first []Result
		for i := range runs {
			total += len(runs[i]) + len(warm[i]) - report.Passed(warm[i]) // a failed warm-up is a run that failed
			if len(runs[i]) > 0 {
				first = append(first, runs[i][0])
			}
		}
		var diffs []report.Differences
		if len(first) == len(rr.agents) { // else stopped before every agent ran
			diffs = compareAll(rr.names, first, diffLimit, rr.opt.Timeout)
		}
		if len(rr.agents) > 1 || rr.repeat > 0 {
			fmt.Fprintf(stdout, "  %s, side by side:\n%s%s", path, report.Table("  ", rr.names, measured, rr.baseline, rr.threads, !rr.verbose), report.ShowDifferences(diffs))
		}
		cmp.Add(path, measured, warm, diffs)
		if isClosed(rr.opt.Stop) {
			break
		}
	}
	return total, failed
}

// measuredRuns is what each of runs measured (runs[i]: agent i's).
func measuredRuns(runs [][]Result) [][]report.Run {
	out := make([][]report.Run, len(runs))
	for i, rs := range runs {
		for _, r := range rs {
			out[i] = append(out[i], r.Run)
		}
	}
	return out
}

// run runs the scenario at path on every agent: one warm-up run each
// (files cached, binaries paged in) when repeating, then the counted runs,
// the agents interleaved so that a slower minute of the machine falls on
// all of them, in the order of a Williams design (report.RoundOrder), so
// that none always runs after the same one.
// It returns each agent's counted runs, its warm-up runs, and how many
// runs failed, warm-ups included (a failed warm-up is a failure too).
func (rr rounds) run(path string, stdout io.Writer) (runs, warmups [][]Result, failed int) {
	runs, warmups = make([][]Result, len(rr.agents)), make([][]Result, len(rr.agents))
	warm := rr.repeat > 0
	seq := 0
	for round := range max(1, rr.repeat) + btoi(warm) {
		counted := round - btoi(warm)
		for _, i := range report.RoundOrder(max(0, counted), len(rr.agents)) {
			a := rr.agents[i]
			opt := rr.opt
			opt.Start, opt.Flags = Exec(a.command), a.flags
			if len(rr.agents) > 1 {
				opt.Flags = func(sc *Scenario) []string { return overServedModel(a.flags(sc)) }
			}
			label := ""
			if rr.named {
				label = " [" + rr.names[i] + "]"
			}
			switch {
			case counted < 0:
				label += " (warm-up run)"
			case rr.repeat > 1:
				label += fmt.Sprintf(" (run %d of %d)", counted+1, rr.repeat)
			}
			if isClosed(rr.opt.Stop) {
				return runs, warmups, failed
			}
			res, f := rr.runOnce(path, opt, label, stdout)
			failed += f
			if counted < 0 {
				warmups[i] = append(warmups[i], res...) // not counted, but kept
				continue
			}
			seq++
			for k := range res {
				res[k].Round, res[k].Seq = counted+1, seq
			}
			runs[i] = append(runs[i], res...)
		}
	}
	return runs, warmups, failed
}

// runOnce runs the scenario at path once on one agent: its one session,
// or its threads' sessions at once. It returns each session's Result and
// how many failed.
func (rr rounds) runOnce(path string, opt Options, label string, stdout io.Writer) (res []Result, failed int) {
	if rr.threads <= 1 {
		r, ok := runFile(path, opt, label, stdout)
		return []Result{r}, btoi(!ok)
	}
	sc, err := Load(path)
	if err != nil {
		fmt.Fprintf(stdout, "FAIL %s%s\n  %v\n", path, label, err)
		return []Result{{Path: path, Run: report.Run{Err: err, Initialize: -1, NewSession: -1}}}, 1
	}
	start := time.Now()
	res = RunThreads(sc, opt, rr.threads)
	for k, r := range res {
		if r.Err != nil {
			fmt.Fprintf(stdout, "FAIL %s%s (session %d of %d)\n  %v\n", path, label, k+1, len(res), r.Err)
			failed++
		}
	}
	if failed == 0 {
		fmt.Fprintf(stdout, "ok   %s%s (%d sessions at once, %.2fs)\n", path, label, len(res), time.Since(start).Seconds())
	}
	return res, failed
}

// isClosed reports whether c is closed (nil: never).
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func modelCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scenario model", flag.ContinueOnError)
	cwd := fs.String("cwd", "", "the agent's workspace, put in place of {cwd} in an entry's expect and made the base of relative paths in tool calls mapped onto an agent's tools (default: the current directory)")
	listen := fs.String("listen", "", "serve on `ADDR` (host:port) instead of a free port of 127.0.0.1")
	files, ok, status := parseInterspersed(fs, args, "acpbridge scenario model", stdout, stderr)
	if !ok {
		return status
	}
	if len(files) != 1 {
		cliflag.Fail(stderr, "acpbridge scenario model", "name one scenario or model fixture file")
		return 2
	}
	if *cwd == "" {
		*cwd, _ = os.Getwd()
	}
	path, cleanup, err := modelFixture(files[0])
	defer cleanup()
	if err != nil {
		fmt.Fprintf(stderr, "acpbridge scenario model: %v\n", err)
		return 2
	}
	m, err := served.Start(path, files[0], *listen, []string{*cwd})
	if err != nil {
		fmt.Fprintf(stderr, "acpbridge scenario model: %v\n", err)
		return 1
	}
	defer m.Close()
	m.Log = func(format string, args ...any) {
		fmt.Fprintf(stderr, "acpbridge scenario model: "+format+"\n", args...)
	}
	fmt.Fprintln(stdout, m.URL)
	fmt.Fprintf(stderr, "acpbridge scenario model: serving %s at %s (OpenAI chat/completions and responses, Anthropic messages, Gemini v1beta; any API key, any model name) until stdin ends\n", files[0], m.URL)
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return 0
}

// modelFixture is the model fixture file names: itself, or, for a
// scenario, the fixture its run would serve, written into a temporary
// directory that cleanup removes.
func modelFixture(file string) (path string, cleanup func(), err error) {
	cleanup = func() {}
	if !strings.HasSuffix(file, ".txtar") {
		return file, cleanup, nil
	}
	sc, err := Load(file)
	if err != nil {
		return "", cleanup, err
	}
	dir, err := os.MkdirTemp("", "scenario-model-")
	if err != nil {
		return "", cleanup, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	r := &run{sc: sc, v: newVars()}
	if err := r.makeEnv(dir); err != nil {
		return "", cleanup, err
	}
	var own []string
	for _, f := range sc.Flags {
		own = append(own, r.expandPaths(f, true))
	}
	if path = fixtureOf(own, dir); path == "" {
		return "", cleanup, fmt.Errorf("%s has no model fixture (a -- model.jsonl -- section, or one its flags replay with --model replay:$DIR/NAME)", file)
	}
	return path, cleanup, nil
}

func serveCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scenario serve", flag.ContinueOnError)
	reportPath := fs.String("report", "", "where to write the differences (default: FILE's name with .serve-report.txt)")
	timeout := 30 * time.Second
	fs.Var(durationFlag{&timeout}, "timeout", "how long to wait for each client line, with a unit")
	files, ok, status := parseInterspersed(fs, args, "acpbridge scenario serve", stdout, stderr)
	if !ok {
		return status
	}
	if len(files) != 1 {
		cliflag.Fail(stderr, "acpbridge scenario serve", "name one scenario file")
		return 2
	}
	sc, err := Load(files[0])
	if err != nil {
		fmt.Fprintf(stderr, "acpbridge scenario serve: %v\n", err)
		return 2
	}
	diffs := Serve(ctx, sc, stdin, stdout, timeout)
	if len(diffs) == 0 {
		return 0
	}
	if *reportPath == "" {
		*reportPath = strings.TrimSuffix(files[0], filepath.Ext(files[0])) + ".serve-report.txt"
	}
	text := strings.Join(diffs, "\n") + "\n"
	fmt.Fprint(stderr, "acpbridge scenario serve: the client differs from "+files[0]+":\n"+text)
	if err := os.WriteFile(*reportPath, []byte(text), 0o644); err != nil {
		fmt.Fprintf(stderr, "acpbridge scenario serve: writing the report: %v\n", err)
	} else {
		fmt.Fprintf(stderr, "acpbridge scenario serve: the report is in %s\n", *reportPath)
	}
	return 1
}

// runFile runs (or updates) the scenario at path, writes its line of the
// summary and reports whether it passed.
func runFile(path string, opt Options, label string, stdout io.Writer) (Result, bool) {
	sc, err := Load(path)
	if err != nil {
		fmt.Fprintf(stdout, "FAIL %s%s\n  %v\n", path, label, err)
		return Result{Path: path, Run: report.Run{Err: err, Initialize: -1, NewSession: -1}}, false
	}
	start := time.Now()
	res := Run(sc, opt)
	switch {
	case res.Err != nil:
		fmt.Fprintf(stdout, "FAIL %s%s\n  %v\n", path, label, res.Err)
		return res, false
	case opt.Update:
		if err := os.WriteFile(path, res.Updated, 0o644); err != nil {
			fmt.Fprintf(stdout, "FAIL %s\n  writing it: %v\n", path, err)
			return res, false
		}
		fmt.Fprintf(stdout, "updated %s (%d agent lines)\n", path, res.Lines)
	default:
		fmt.Fprintf(stdout, "ok   %s%s (%d agent lines, %.2fs)\n", path, label, res.Lines, time.Since(start).Seconds())
	}
	return res, true
}

func recordCommand(ctx context.Context, args []string, self string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scenario record", flag.ContinueOnError)
	out := fs.String("out", "", "the scenario `FILE` to write")
	appendPart := fs.Bool("append", false, "add this process's conversation to FILE, after a restart, when FILE exists (a client that starts a process per prompt, such as acpx)")
	neutral := fs.Bool("neutral", false, "write an agent-neutral scenario: permissions answered by kind, the agent's wording free, its requests, tool calls and stop reasons pinned")
	det := fs.Bool("deterministic", false, "stable ids and clock in acpbridge (it sets ACPBRIDGE_DETERMINISTIC) and no date in FILE: the same conversation records byte for byte the same")
	if ok, status := cliflag.Parse(fs, args, "acpbridge scenario record", usage+"\nscenario record's flags:\n", stdout, stderr); !ok {
		return status
	}
	command := fs.Args()
	if *out == "" || len(command) == 0 {
		cliflag.Fail(stderr, "acpbridge scenario record", "give --out FILE and the agent command after --")
		return 2
	}
	rec := &Recorder{Self: self, Deterministic: *det, Parts: *appendPart, Neutral: *neutral}
	if isAcpbridge(command[0], self) {
		rec.StateDir = stateDirOf(command[1:])
	}
	part := 1
	before, _ := os.ReadFile(*out) // what FILE held: another recorder must not have changed it by the end
	if *appendPart {
		prior, err := Load(*out)
		switch {
		case err == nil:
			rec.Prior = prior
			part = 2 + countSteps(prior, Restart)
		case !errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(stderr, "acpbridge scenario record: --append to %s: %v\n", *out, err)
			return 1
		}
	}
	var env []string
	if *det {
		env = append(os.Environ(), fmt.Sprintf("ACPBRIDGE_DETERMINISTIC=%d", part))
	}
	cmd, toAgent, fromAgent, err := startAgent(command, env, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "acpbridge scenario record: starting %s: %v\n", command[0], err)
		return 1
	}
	code := rec.between(ctx, cmd, stdin, toAgent, fromAgent, stdout)
	if now, _ := os.ReadFile(*out); *appendPart && !bytes.Equal(now, before) {
		// Two recorders overlapped: the other one added its part since this
		// one read FILE. Writing would drop that part; this one is kept
		// beside FILE instead.
		aside := *out + fmt.Sprintf(".part-%d", os.Getpid())
		os.WriteFile(aside, rec.Scenario(command), 0o644)
		fmt.Fprintf(stderr, "acpbridge scenario record: %s changed while this recording ran (another recorder added to it), so this part was not added; it is in %s: record the two conversations one after the other\n", *out, aside)
		return 1
	}
	if err := writeAtomically(*out, rec.Scenario(command)); err != nil {
		fmt.Fprintf(stderr, "acpbridge scenario record: writing %s: %v\n", *out, err)
		return 1
	}
	for _, n := range rec.Notes() {
		fmt.Fprintf(stderr, "acpbridge scenario record: not captured: %s\n", n)
	}
	what := "wrote"
	if rec.Prior != nil {
		what = fmt.Sprintf("added part %d to", part)
	}
	fmt.Fprintf(stderr, "acpbridge scenario record: %s %s; run it with: %s\n", what, *out, RunHint(command, self, *out))
	return code
}

// writeAtomically writes b to path through a temporary file renamed into
// place: a reader (or a recorder checking it) sees the old file or the new.
func writeAtomically(path string, b []byte) error {
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// countSteps is how many steps of sc are of kind.
func countSteps(sc *Scenario, kind int) int {
	n := 0
	for _, st := range sc.Steps {
		if st.Kind == kind {
			n++
		}
	}
	return n
}

// stateDirOf is the state directory of acpbridge run with args: its
// --state-dir, else ACPBRIDGE_STATE_DIR, else $XDG_STATE_HOME/acpbridge or
// ~/.local/state/acpbridge (as acpbridge chooses it).
func stateDirOf(args []string) string {
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "state-dir" && strings.HasPrefix(a, "-") {
			if !hasVal && i+1 < len(args) {
				val = args[i+1]
			}
			return val
		}
	}
	if d := os.Getenv("ACPBRIDGE_STATE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "acpbridge")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "acpbridge")
	}
	return ""
}

// startAgent starts the agent command with pipes to its stdin and from its
// stdout, its stderr going to stderr.
func startAgent(command, env []string, stderr io.Writer) (*exec.Cmd, io.WriteCloser, io.Reader, error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = env // nil: this process's
	cmd.Stderr = stderr
	toAgent, err1 := cmd.StdinPipe()
	fromAgent, err2 := cmd.StdoutPipe()
	if err := errors.Join(err1, err2, cmd.Start()); err != nil {
		return nil, nil, nil, err
	}
	return cmd, toAgent, fromAgent, nil
}

// between passes the editor's lines (stdin) to the started agent cmd and
// its lines back (stdout), noting both, until the agent's stdout ends; a
// signal to the recorder (ctx) is passed on to the agent. It returns the
// agent's exit status.
func (rec *Recorder) between(ctx context.Context, cmd *exec.Cmd, stdin io.Reader, toAgent io.WriteCloser, fromAgent io.Reader, stdout io.Writer) int {
	go func() {
		rec.Pipe(toAgent, stdin, false)
		rec.Closed()
		toAgent.Close()
	}()
	done := make(chan struct{})
	go func() {
		rec.Pipe(stdout, fromAgent, true)
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		// The editor ended the recorder: end the agent the same way (its
		// stdin closed, as at the editor's end, then the signal; Windows
		// has no signal to send but a kill, so the stdin's end comes
		// first), and keep what it writes as it ends.
		toAgent.Close()
		select {
		case <-done:
		case <-time.After(time.Second):
			proc.Interrupt(cmd.Process)
			<-done
		}
	}
	return exitCode(cmd.Wait())
}

// exitCode is a process's exit status; -1 when it was killed by a signal.
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}
