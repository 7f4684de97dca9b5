// Command acpbridge is an ACP agent (Agent Client Protocol v1: JSON-RPC 2.0,
// one JSON object per line on stdin/stdout) that serves at most one live
// session per process.
//
// Build and run:
//
//	go build -o acpbridge . && ./acpbridge --model replay:fixtures/hello.jsonl
//
// main.go holds the flags, the wiring of one jrpc2 server to stdin/stdout,
// and shutdown: the process ends with status 0 when stdin reaches EOF or
// stdout breaks, after cancelling the turn and closing the session.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/creachadair/jrpc2"

	"acpbridge/internal/channel"
	"acpbridge/internal/cliflag"
	"acpbridge/internal/events"
	"acpbridge/internal/fanout"
	"acpbridge/internal/model"
	"acpbridge/internal/proc"
	"acpbridge/internal/scenario"
	"acpbridge/internal/signin"
	"acpbridge/internal/store"
)

// defaultMaxLineBytes is --max-line-bytes's default: room for a prompt
// with the most image data acpbridge takes in one (promptImageMaxBytes,
// base64: 67 MiB) and its text, so that such a prompt meets the prompt's
// own limit, with its -32602 naming the block, before the line's.
const defaultMaxLineBytes = 80 << 20

// version is the release; scripts/release.sh sets it from git describe
// (-ldflags "-X main.version=..."). versionLine adds the commit.
var version = "0.1.0"

// versionLine is what --version prints: the release, and the commit and
// its date when the binary was built from a git checkout.
func versionLine() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "acpbridge " + version
	}
	var rev, at, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", with uncommitted changes"
			}
		}
	}
	if rev == "" {
		// Go records no commit outside a git checkout, nor with
		// -buildvcs=false, and says nothing of which.
		return "acpbridge " + version + " (no commit stamped: built outside a git checkout, or with -buildvcs=false)"
	}
	return fmt.Sprintf("acpbridge %s (commit %s, %s%s)", version, rev[:min(12, len(rev))], at, modified)
}

const usageText = `%s: an ACP agent that serves one session per process.

Usage: acpbridge [flags]
       acpbridge --fanout [flags]          (many sessions, one child process each)
       acpbridge scenario run [--agent CMD]... [--repeat N] [--report DIR] [--update] FILE...
       acpbridge scenario serve [--report FILE] FILE
       acpbridge scenario record --out FILE [--neutral] -- CMD [ARG...]
       acpbridge scenario model FILE
       acpbridge setup [--base-url URL] [--model NAME] [--from-env] [--sign-out]
                                           (sign in: endpoint, key, model)
       acpbridge help | --help | --version

It speaks ACP v1 on stdin/stdout (one JSON-RPC message per line) and logs to
stderr. Editors launch it; it exits when stdin closes.

Flags (environment variables in brackets):
`

func main() {
	// A smaller heap goal than the default keeps a tab's memory flat while a
	// long answer streams (README: 200,000 chunks peak as 20,000 do).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	if len(os.Args) == 2 && os.Args[1] == proc.KeeperArg {
		proc.RunKeeper(os.Stdin) // internal/proc: this process is another's keeper
		return
	}
	// The key in this process's starting environment is out of its
	// commands' reach (Linux; docs/platforms.md says what each OS gets).
	hideErr := proc.HideMemory()
	// A client that stops reading, or a full file system, must be an error
	// acpbridge handles (persist, end with status 0), not a killing signal.
	proc.IgnoreBrokenOutput()
	ctx, caught := catchSignals()
	// Nothing acpbridge starts may outlive it (internal/proc).
	exe, _ := os.Executable()
	guard := proc.NewGuard(exe)
	if hideErr != nil {
		fmt.Fprintf(os.Stderr, "acpbridge: cannot make this process's memory unreadable to its commands: %v\n", hideErr)
	}
	code := run(ctx, caught, guard, os.Args[1:], pollable(os.Stdin), pollable(os.Stdout), os.Stderr)
	guard.End()
	os.Exit(code)
}

// routerOnOneProcessor gives a router one P, unless the environment sets
// GOMAXPROCS, before it serves. A router runs no search and no tool, only
// a loop and a reader and a writer for each child, each waiting on a pipe;
// with a second P the runtime wakes another thread for nearly every line
// handed between them, which cost a turn through the router more CPU and
// time than the relay itself (docs/performance.md); with one the hand-offs
// stay on one thread and the other cores are the agents'. The children get
// the environment as it is, and with it Go's setting.
func routerOnOneProcessor() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// catchSignals makes SIGTERM, SIGINT and SIGHUP end the process as stdin's
// EOF does (the turn is cancelled and persisted, children are ended,
// status 0): the context ends when one arrives. The returned channel is
// closed once they are caught.
//
// It works beside start-up rather than before it. Catching the first signal
// makes the runtime start a thread for signals and hand each one to it:
// 0.3–1 ms on the project's machine, a third of acpbridge's start-up, which the answer to initialize
// does not need. What a signal must end waits for the channel: sessions
// (and so turns and children) open only after it is closed.
func catchSignals() (context.Context, <-chan struct{}) {
	ctx, cancel := context.WithCancelCause(context.Background())
	caught := make(chan struct{})
	go func() {
		c := make(chan os.Signal, 1)
		signal.Notify(c, proc.EndSignals()...)
		close(caught)
		cancel(fmt.Errorf("signal: %v", <-c))
	}()
	return ctx, caught
}

// pollable returns stdin (or stdout) as a file that Go's netpoller waits
// on, when it is a pipe or a socket: no thread sits blocked in read(2)
// between messages, and a write can be given a deadline (a client that
// stops reading must not hold the process at its end). A terminal is left
// alone: non-blocking mode would leak to the shell that shares it.
func pollable(f *os.File) *os.File {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f
	}
	if err := proc.SetNonblock(f); err != nil {
		return f
	}
	return os.NewFile(f.Fd(), f.Name())
}

// run is the whole program; tests call setup and serve themselves.
// guard watches over the processes it starts (nil: no keeper, no job).
func run(ctx context.Context, caught <-chan struct{}, guard *proc.Guard, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "scenario" {
		<-caught
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "acpbridge scenario: cannot find this program's path (%v); run it with --agent PATH\n", err)
			self = "acpbridge"
		}
		return scenario.Main(ctx, args[1:], self, versionLine(), stdin, stdout, stderr)
	}
	if opt, rest, ok := setupCommand(args); ok {
		// The editor's terminal sign-in runs the agent's command line
		// with setup after it (acpbridge --fanout setup).
		<-caught
		return signin.Setup(ctx, rest, opt, stdin, stdout, stderr)
	}
	cfg, log, trace, code := start(args, stdout, stderr)
	if log == nil {
		return code
	}
	if f, ok := stdin.(*os.File); ok && proc.IsTerminal(f) {
		// Typed at a shell, it would otherwise wait in silence.
		fmt.Fprintln(stderr, "acpbridge speaks ACP (JSON-RPC, one message a line) on stdin and stdout: an editor (Zed's agent_servers) or acpx starts it; see its README. It serves this terminal until Ctrl-D.")
	}
	if trace != nil {
		defer trace.Close()
	}
	if err := guard.Err(); err != nil {
		log.Warn("cannot watch over child processes as this OS allows; they are still ended at exit", "err", err)
	}
	if cfg.fanout {
		// The router serves no session: its children build the model,
		// the store and the recorder (with the same flags), and read the
		// key from the environment they are given.
		if cfg.agentCommand != nil && cfg.stateDirGiven {
			log.Info("--state-dir is unused under -- CMD: the agent keeps its sessions where it keeps them")
		}
		env := os.Environ()
		os.Unsetenv(proc.KeyVar)
		<-caught
		routerOnOneProcessor()
		return fanout.Serve(ctx, fanout.Options{Version: version, Args: args, Env: env, MaxLine: cfg.maxLineBytes, MaxChildren: cfg.maxChildren,
			Log: log, Stderr: stderr, Trace: trace, Command: cfg.agentCommand, Spares: cfg.spares, Guard: guard, IdleTimeout: cfg.idleTimeout, ReopenTimeout: cfg.reopenTimeout}, stdin, stdout)
	}
	a, code := newAgent(cfg, log, stderr)
	if a == nil {
		return code
	}
	// The key is read (newAgent) and then taken out of the environment: a
	// command that runs a program reading this process's current
	// environment does not find it.
	os.Unsetenv(proc.KeyVar)
	a.caught = caught
	a.procs = guard
	return serve(ctx, a, stdin, stdout, trace)
}

// setupCommand reports whether args run acpbridge setup, alone or after
// the agent's own flags (as an editor's terminal sign-in runs it): setup's
// args, and what the agent's flags name of the endpoint and the model.
func setupCommand(args []string) (signin.Options, []string, bool) {
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[:i] // -- CMD: another agent, whose sign-in is its own
	}
	if !slices.Contains(args, "setup") {
		return signin.Options{}, nil, false // the agent's own start parses its flags once
	}
	fs := flag.NewFlagSet("acpbridge", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c commandLine
	c.define(fs)
	if fs.Parse(args) != nil || fs.Arg(0) != "setup" {
		return signin.Options{}, nil, false
	}
	opt := signin.Options{Path: c.cfg.signinPath, Endpoint: c.cfg.baseURL}
	if name, ok := strings.CutPrefix(c.cfg.modelSpec, "openai:"); ok {
		opt.Model = name
	}
	return opt, fs.Args()[1:], true
}

// config is the parsed command line.
type config struct {
	modelSpec        string
	stateDir         string
	signinPath       string // where the sign-in is stored (internal/signin)
	stateDirGiven    bool   // --state-dir on the command line (with -- CMD: unused, and said so)
	baseURL          string
	record           string
	trace            string
	maxTurnRequests  int
	maxLineBytes     int
	models           []string      // --models
	fanout           bool          // --fanout: be the router (internal/fanout)
	maxContextTokens int           // --max-context-tokens
	maxPromptBlocks  int           // --max-prompt-blocks
	maxChildren      int           // --max-children (--fanout)
	passEnv          []string      // --pass-env: secrets the children get anyway
	agentCommand     []string      // --fanout -- CMD ARGS...: any single-session agent, in place of acpbridge
	spares           int           // --spares (--fanout)
	idleTimeout      time.Duration // --idle-timeout (--fanout)
	reopenTimeout    time.Duration // --reopen-timeout (--fanout)
	// imageBudget is the most image data (base64 bytes) one model request
	// carries and a session holds in memory: model.ImageBudget; not a
	// flag (tests make it small).
	imageBudget int
}

// utcTime writes the log's times in UTC, as the session store and the
// protocol do; it also spares the first log line loading /etc/localtime.
func utcTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		a.Value = slog.TimeValue(a.Value.Time().UTC())
	}
	return a
}

// start parses the command line and opens the log and --trace's file:
// what the router and the agent both begin with. The log is nil when the
// process is to exit at once, with the status given.
func start(args []string, stdout, stderr io.Writer) (config, *slog.Logger, *channel.Tracer, int) {
	cfg, logLevel, code, ok := parseFlags(args, stdout, stderr)
	if !ok {
		return cfg, nil, nil, code
	}
	level := slog.LevelInfo
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(stderr, "acpbridge: --log-level %q: use debug, info, warn or error\n", logLevel)
		return cfg, nil, nil, 2
	}
	log := slog.New(events.Open(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: utcTime})))
	var trace *channel.Tracer
	if cfg.trace != "" {
		var err error
		if trace, err = channel.OpenTrace(cfg.trace); err != nil {
			fmt.Fprintf(stderr, "acpbridge: --trace: %v\n", err)
			return cfg, nil, nil, 2
		}
	}
	return cfg, log, trace, 0
}

// newAgent builds the single-session agent cfg describes: its store, its
// ids, its recorder and its sign-in; nil and an exit status when it
// cannot.
func newAgent(cfg config, log *slog.Logger, stderr io.Writer) (*agent, int) {
	a := &agent{cfg: cfg, log: log, stderr: stderr}
	a.childEnv = proc.ChildEnv(cfg.passEnv)
	a.envKey = os.Getenv(proc.KeyVar)
	a.store = &store.Store{Dir: filepath.Join(cfg.stateDir, "sessions"), Log: a.log}
	if v := os.Getenv("ACPBRIDGE_DETERMINISTIC"); v != "" {
		part, err := strconv.Atoi(v)
		if err != nil || part < 1 {
			fmt.Fprintf(stderr, "acpbridge: ACPBRIDGE_DETERMINISTIC=%q: give a part number, 1 or more (scenario record --deterministic sets it)\n", v)
			return nil, 2
		}
		a.newID, a.now = deterministic(part, func(id string) bool {
			_, err := os.Lstat(a.store.Path(id, ".jsonl"))
			return err == nil
		})
	}
	if cfg.record != "" {
		var err error
		if a.recorder, err = model.OpenRecorder(cfg.record, a.log); err != nil {
			fmt.Fprintf(stderr, "acpbridge: --record: %v\n", err)
			return nil, 2
		}
	}
	a.signinPath = cfg.signinPath
	a.useSignIn(a.loadSignIn())
	if a.signInNeeded != "" {
		a.log.Warn("not signed in: sessions will ask the editor to sign in", "why", a.signInNeeded)
	}
	return a, 0
}

// serve runs the agent on one connection until it ends.
func serve(ctx context.Context, a *agent, stdin io.Reader, stdout io.Writer, trace *channel.Tracer) int {
	a.out = channel.NewWire(stdin, stdout, a.cfg.maxLineBytes, trace)
	a.arrivals = a.arrivalTable()
	a.steps.init()
	a.out.Arrive = a.arrive
	a.out.Arrived = a.steps.release
	a.out.OnHangUp = a.hangUp
	if a.newID == nil {
		a.newID = randomID
	}
	if a.now == nil {
		a.now = time.Now
	}
	srv := jrpc2.NewServer(a.handlers(), &jrpc2.ServerOptions{
		Concurrency:    256, // only list, authenticate and unknown methods reach jrpc2; none waits on the loop
		DisableBuiltin: true,
		Logger:         func(text string) { a.log.Debug(text, "from", "jrpc2") },
	}).Start(a.out)
	go a.runLoop()

	a.awaitEnd(ctx, srv)
	a.out.LimitWrites()
	a.shutdown()
	a.out.Flush()
	if a.recorder != nil {
		a.recorder.Close()
	}
	a.log.Debug("exiting")
	return 0
}

// awaitEnd returns when the connection ends: jrpc2 stops, stdin ends,
// stdout breaks, or a signal arrives.
func (a *agent) awaitEnd(ctx context.Context, srv *jrpc2.Server) {
	stopped := make(chan jrpc2.ServerStatus, 1)
	go func() { stopped <- srv.WaitStatus() }()
	select {
	case st := <-stopped:
		if st.Err != nil && !errors.Is(st.Err, io.EOF) {
			a.log.Warn("connection ended", "err", st.Err)
		}
	case <-a.out.Ended:
		// stdin has ended: jrpc2 is stopping, but a handler stuck in a tool
		// must not keep the process alive, so shutdown does not wait for it.
	case <-a.out.Broken:
		a.log.Info("stdout is closed; shutting down")
	case <-ctx.Done():
		a.log.Info("ending as at stdin EOF", "why", context.Cause(ctx))
	}
}

// parseFlags returns the configuration and the log level, or false and
// the exit status.
func parseFlags(args []string, stdout, stderr io.Writer) (config, string, int, bool) {
	fs := flag.NewFlagSet("acpbridge", flag.ContinueOnError)
	var c commandLine
	c.define(fs)
	cfg := &c.cfg
	if len(args) == 1 && args[0] == "help" {
		args = []string{"--help"}
	}
	var command []string // --fanout -- CMD ARGS...: the agent each thread's child runs
	if i := slices.Index(args, "--"); i >= 0 {
		args, command = args[:i], args[i+1:]
	}
	if ok, status := cliflag.Parse(fs, args, "acpbridge", fmt.Sprintf(usageText, versionLine()), stdout, stderr); !ok {
		return *cfg, "", status, false
	}
	if fs.NArg() > 0 {
		cliflag.Fail(stderr, "acpbridge", "unexpected argument %q", fs.Arg(0))
		return *cfg, "", 2, false
	}
	switch {
	case command != nil && !cfg.fanout:
		cliflag.Fail(stderr, "acpbridge", "an agent command after -- is for --fanout (acpbridge --fanout -- CMD ARGS...)")
		return *cfg, "", 2, false
	case command != nil && len(command) == 0:
		cliflag.Fail(stderr, "acpbridge", "name the agent to run after --")
		return *cfg, "", 2, false
	}
	cfg.agentCommand = command
	if command != nil {
		fs.Visit(func(f *flag.Flag) { cfg.stateDirGiven = cfg.stateDirGiven || f.Name == "state-dir" })
		if own := agentOnlyFlags(fs); len(own) > 0 {
			cliflag.Fail(stderr, "acpbridge", "%s: acpbridge's own agent's, which --fanout -- CMD does not run; remove them, and give CMD its own flags after --",
				strings.Join(own, ", "))
			return *cfg, "", 2, false
		}
	}
	cfg.spares = c.spares.Or(fanout.DefaultSpares(command))
	if c.showVersion {
		fmt.Fprintln(stdout, versionLine())
		return *cfg, "", 0, false
	}
	if err := c.finish(); err != nil {
		cliflag.Fail(stderr, "acpbridge", "%v", err)
		return *cfg, "", 2, false
	}
	return *cfg, c.logLevel, 0, true
}

// agentOnlyFlags are the flags given on the command line (fs.Visit: not
// those the environment set) that configure only acpbridge's own agent,
// which --fanout -- CMD runs none of: silently lost, were they accepted.
func agentOnlyFlags(fs *flag.FlagSet) []string {
	var given []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "model", "models", "base-url", "record", "pass-env", "max-context-tokens", "max-turn-requests", "max-prompt-blocks":
			given = append(given, "--"+f.Name)
		}
	})
	return given
}

// finish completes the configuration from the flags and checks the limits.
func (c *commandLine) finish() error {
	c.cfg.models = commaList(c.models)
	c.cfg.passEnv = commaList(c.passEnv)
	for _, limit := range []struct {
		flag     string
		val, min int
	}{
		{"--max-turn-requests", c.cfg.maxTurnRequests, 1}, {"--max-line-bytes", c.cfg.maxLineBytes, 1024},
		{"--max-context-tokens", c.cfg.maxContextTokens, 1000}, {"--max-prompt-blocks", c.cfg.maxPromptBlocks, 1},
		{"--max-children", c.cfg.maxChildren, 2},
	} {
		if limit.val < limit.min {
			return fmt.Errorf("%s must be at least %d", limit.flag, limit.min)
		}
	}
	return nil
}

// commaList is the non-empty names of a comma-separated list.
func commaList(s string) []string {
	var out []string
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// commandLine is what the flags set.
type commandLine struct {
	cfg         config
	logLevel    string
	models      string // comma-separated
	passEnv     string // comma-separated
	spares      cliflag.OptionalCount
	showVersion bool
}

// define defines the flags on fs, with their defaults from the environment.
func (c *commandLine) define(fs *flag.FlagSet) {
	cfg := &c.cfg
	cfg.imageBudget = model.ImageBudget
	cfg.signinPath, _ = signin.Path() // none found: a stored sign-in cannot be read, and setup says why
	fs.StringVar(&cfg.modelSpec, "model", os.Getenv("ACPBRIDGE_MODEL"), "`SPEC`: replay:PATH (a replay fixture) or openai:MODEL [ACPBRIDGE_MODEL]")
	fs.StringVar(&cfg.stateDir, "state-dir", envOr("ACPBRIDGE_STATE_DIR", defaultStateDir()), "`DIR` where sessions persist [ACPBRIDGE_STATE_DIR]")
	fs.StringVar(&cfg.baseURL, "base-url", os.Getenv("OPENAI_BASE_URL"), "`URL` of the OpenAI-compatible endpoint (default: the stored sign-in's, else "+signin.DefaultEndpoint+"); the key comes from OPENAI_API_KEY or the stored sign-in [OPENAI_BASE_URL]")
	fs.StringVar(&cfg.record, "record", "", "append every model response to `PATH` as a replay fixture")
	fs.StringVar(&c.models, "models", os.Getenv("ACPBRIDGE_MODELS"), "comma-separated `NAMES` the model picker offers (default: the server's GET /models) [ACPBRIDGE_MODELS]")
	fs.StringVar(&c.logLevel, "log-level", "info", "stderr log `LEVEL`: debug, info, warn, error")
	fs.StringVar(&cfg.trace, "trace", "", "write every protocol message, in and out, to `PATH` as JSON lines")
	fs.IntVar(&cfg.maxTurnRequests, "max-turn-requests", 50, "most model calls in one turn (then stopReason max_turn_requests)")
	fs.IntVar(&cfg.maxContextTokens, "max-context-tokens", 100_000, "`TOKENS` of conversation the model is sent at most (estimated at 4 bytes a token; older tool results, then older turns are left out)")
	fs.IntVar(&cfg.maxLineBytes, "max-line-bytes", defaultMaxLineBytes, "longest message line accepted; a longer one is answered with an error and skipped")
	fs.BoolVar(&c.showVersion, "version", false, "print the version and exit")
	fs.IntVar(&cfg.maxPromptBlocks, "max-prompt-blocks", 10_000, "most content blocks in one prompt; more are refused")
	fs.IntVar(&cfg.maxChildren, "max-children", 64, "with --fanout: most child processes, spares included")
	fs.DurationVar(&cfg.idleTimeout, "idle-timeout", 10*time.Minute, "with --fanout: a thread idle this long gives its process back, reopened on its next request (0: never)")
	fs.DurationVar(&cfg.reopenTimeout, "reopen-timeout", fanout.DefaultReopenTimeout, "with --fanout: how long reopening a thread in a new process may take before its requests fail; it also bounds an agent process's initialize (at least 5s)")
	fs.Var(&c.spares, "spares", "with --fanout: `N` children kept started for the next threads (default 2, or 1 with -- CMD)")
	fs.StringVar(&c.passEnv, "pass-env", os.Getenv("ACPBRIDGE_PASS_ENV"), "comma-separated `NAMES` of secret environment variables (OPENAI_API_KEY) that commands and stdio MCP servers get anyway [ACPBRIDGE_PASS_ENV]")
	fs.BoolVar(&cfg.fanout, "fanout", false, "serve many sessions on one connection, each in a child acpbridge process of its own (for Zed's threads)")
}

// newModel makes the model that spec names (--model's, or the stored
// sign-in's), at baseURL for openai: with the key key returns.
func newModel(spec, baseURL string, models []string, key func() string, log *slog.Logger) (model.Model, error) {
	kind, arg, ok := strings.Cut(spec, ":")
	if !ok {
		return nil, fmt.Errorf("names no kind of model: for an OpenAI-compatible endpoint use --model openai:%s; for a replay fixture, replay:PATH", spec)
	}
	if arg == "" {
		return nil, errors.New("use replay:PATH or openai:MODEL")
	}
	switch kind {
	case "replay":
		return model.NewReplay(arg)
	case "openai":
		return model.NewOpenAI(baseURL, key, models, arg, log)
	}
	return nil, fmt.Errorf("unknown model kind %q; use replay:PATH or openai:MODEL", kind)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// defaultStateDir is $XDG_STATE_HOME/acpbridge, else ~/.local/state/acpbridge.
func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "acpbridge")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "acpbridge")
	}
	return filepath.Join(home, ".local", "state", "acpbridge")
}

// deterministic makes ids and a clock that are the same on every run, for
// byte-stable recordings (ACPBRIDGE_DETERMINISTIC=PART, which scenario
// record --deterministic sets): ids PREFIX_PART_N, and a clock that starts
// at 2026-01-01 plus PART hours and moves one second a reading. PART, the
// recording's process number, keeps the ids of a client that starts a
// process per prompt apart; a session id already stored (stored reports
// it) is skipped, so that a second process with the same PART and state
// directory does not collide.
func deterministic(part int, stored func(id string) bool) (func(string) string, func() time.Time) {
	var mu sync.Mutex
	n := map[string]int{}
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(part) * time.Hour)
	newID := func(prefix string) string {
		mu.Lock()
		defer mu.Unlock()
		for {
			n[prefix]++
			id := fmt.Sprintf("%s_%d_%d", prefix, part, n[prefix])
			if prefix != "sess" || !stored(id) {
				return id
			}
		}
	}
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
	return newID, now
}

// randomID makes an unguessable id: prefix_ and 32 hex digits.
func randomID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}
