// cli.go holds the `scenario run` and `scenario record` commands and the
// starter that runs an agent as a process.

package scenario

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"acpbridge/internal/proc"
)

const usage = `Usage:
  acpbridge scenario run [--agent CMD] [--update [--accept-errors]] [--timeout D] FILE...  (flags may follow the files)
  acpbridge scenario record --out FILE -- CMD [ARG...]

run starts the agent for each scenario file (by default this acpbridge with
the file's flags; --agent CMD runs CMD with the file's flags after its own
words), plays the client's side and checks every line the agent sends.
--update rewrites the < lines from what the agent sent instead. The agent
runs in the scenario's directory with HOME inside it and without the
user's ACPBRIDGE_* settings or OPENAI_BASE_URL, so that a file's result does
not depend on who runs it.

record sits between an editor and the agent command CMD, passes every
message through unchanged and writes the conversation to FILE as a scenario.
`

// Main runs `acpbridge scenario ARGS`. self is this acpbridge's path, the
// agent run when --agent is not given.
func Main(ctx context.Context, args []string, self string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runCommand(args[1:], self, stdout, stderr)
	case "record":
		return recordCommand(ctx, args[1:], self, stdin, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "acpbridge scenario: unknown command %q\n%s", args[0], usage)
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
// names, and returns the file names.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return files, nil
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func runCommand(args []string, self string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scenario run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stdout, usage+"\nscenario run's flags:\n")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
	}
	agent := fs.String("agent", "", "the agent `CMD` to run (its words, then the file's flags); default: this acpbridge")
	upd := fs.Bool("update", false, "rewrite the < lines from what the agent sends")
	acceptErrors := fs.Bool("accept-errors", false, "with --update: write a response that is an error where the file had none")
	timeout := 10 * time.Second
	fs.Var(durationFlag{&timeout}, "timeout", "how long to wait for each line, with a unit (default 10s)")
	files, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if len(files) == 0 {
		fmt.Fprint(stderr, "acpbridge scenario run: name at least one scenario file\n"+usage)
		return 2
	}
	command := []string{self}
	if *agent != "" {
		command = strings.Fields(*agent)
	}
	opt := Options{Start: Exec(command), Timeout: timeout, Update: *upd, AcceptErrors: *acceptErrors}
	failed := 0
	for _, path := range files {
		if !runFile(path, opt, stdout) {
			failed++
		}
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", len(files)-failed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// runFile runs (or updates) the scenario at path, writes its line of the
// summary and reports whether it passed.
func runFile(path string, opt Options, stdout io.Writer) bool {
	sc, err := Load(path)
	if err != nil {
		fmt.Fprintf(stdout, "FAIL %s\n  %v\n", path, err)
		return false
	}
	start := time.Now()
	res := Run(sc, opt)
	switch {
	case res.Err != nil:
		fmt.Fprintf(stdout, "FAIL %s\n  %v\n", path, res.Err)
		return false
	case opt.Update:
		if err := os.WriteFile(path, res.Updated, 0o644); err != nil {
			fmt.Fprintf(stdout, "FAIL %s\n  writing it: %v\n", path, err)
			return false
		}
		fmt.Fprintf(stdout, "updated %s (%d agent lines)\n", path, res.Lines)
	default:
		fmt.Fprintf(stdout, "ok   %s (%d agent lines, %.2fs)\n", path, res.Lines, time.Since(start).Seconds())
	}
	return true
}

func recordCommand(ctx context.Context, args []string, self string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scenario record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stdout, usage+"\nscenario record's flags:\n")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
	}
	out := fs.String("out", "", "the scenario `FILE` to write")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	command := fs.Args()
	if *out == "" || len(command) == 0 {
		fmt.Fprint(stderr, "acpbridge scenario record: give --out FILE and the agent command after --\n"+usage)
		return 2
	}
	cmd, toAgent, fromAgent, err := startAgent(command, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "acpbridge scenario record: starting %s: %v\n", command[0], err)
		return 1
	}
	rec := &Recorder{Self: self}
	code := rec.between(ctx, cmd, stdin, toAgent, fromAgent, stdout)
	if err := os.WriteFile(*out, rec.Scenario(command), 0o644); err != nil {
		fmt.Fprintf(stderr, "acpbridge scenario record: writing %s: %v\n", *out, err)
		return 1
	}
	fmt.Fprintf(stderr, "acpbridge scenario record: wrote %s; run it with: acpbridge scenario run %s\n", *out, *out)
	return code
}

// startAgent starts the agent command with pipes to its stdin and from its
// stdout, its stderr going to stderr.
func startAgent(command []string, stderr io.Writer) (*exec.Cmd, io.WriteCloser, io.Reader, error) {
	cmd := exec.Command(command[0], command[1:]...)
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
		// The editor ended the recorder: end the agent the same way, and
		// keep what it writes as it ends.
		proc.Interrupt(cmd.Process)
		<-done
	}
	return exitCode(cmd.Wait())
}

// Exec returns a starter that runs command as a process with the
// scenario's flags after its words, in the run directory, in an
// environment of its own (isolatedEnv).
func Exec(command []string) func(flags []string, env Env) (*Agent, error) {
	return func(flags []string, env Env) (*Agent, error) {
		cmd := exec.Command(command[0], append(command[1:], flags...)...)
		cmd.Dir = env.Dir
		cmd.Env = isolatedEnv(os.Environ(), env)
		errTail := &tail{max: 8 << 10}
		cmd.Stderr = errTail
		stdin, err1 := cmd.StdinPipe()
		stdout, err2 := cmd.StdoutPipe()
		if err := errors.Join(err1, err2, cmd.Start()); err != nil {
			return nil, fmt.Errorf("%s: %w", command[0], err)
		}
		var once sync.Once
		var code int
		wait := func() int {
			once.Do(func() { code = exitCode(cmd.Wait()) })
			return code
		}
		kill := func() {
			cmd.Process.Kill()
			wait()
		}
		return &Agent{Stdin: stdin, Stdout: stdout, Wait: wait, Kill: kill, Stderr: errTail.String}, nil
	}
}

// isolatedEnv is the agent's environment: the user's, less what would
// change a scenario's result (acpbridge's own ACPBRIDGE_* settings, the
// model endpoint), with HOME and the XDG state directory inside the run's
// directory, and the run's directories named: SCENARIO_DIR, SCENARIO_CWD,
// SCENARIO_STATE. A file's result does not depend on who runs it.
func isolatedEnv(user []string, env Env) []string {
	var out []string
	for _, kv := range user {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "ACPBRIDGE_"), name == "OPENAI_BASE_URL", name == "HOME", name == "XDG_STATE_HOME":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "HOME="+filepath.Join(env.Dir, "home"), "XDG_STATE_HOME="+filepath.Join(env.Dir, "home", ".local", "state"),
		"SCENARIO_DIR="+env.Dir, "SCENARIO_CWD="+env.Cwd, "SCENARIO_STATE="+env.State)
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
