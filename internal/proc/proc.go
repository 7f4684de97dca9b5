// Package proc makes sure that nothing acpbridge starts outlives it: local
// commands, MCP servers, and whatever they start in turn, daemons included.
//
// A Guard is the one seam; each OS fills it in with what it has:
//
//   - Linux: every child starts in a process group of its own with a
//     parent-death signal; acpbridge is a child subreaper (prctl), so a
//     descendant whose parent exits (a setsid or nohup daemon, a double
//     fork) is re-parented to acpbridge and stays findable; at exit the
//     Guard kills every process still below acpbridge. A keeper process
//     (below) ends the groups when acpbridge is killed.
//   - macOS: process groups, the keeper and the sweep at exit (through
//     sysctl instead of /proc). There is no subreaper, so what a command
//     detached from its group (setsid) and whose parent then exited is
//     re-parented to launchd: the sweep cannot find it.
//   - Windows: acpbridge puts itself in a Job Object that kills every
//     process in it when its last handle closes, so every descendant ends
//     with acpbridge however it ends; each command and MCP server runs in a
//     job of its own, nested in it, and is ended through that job, never
//     through a pid (Windows reuses pids, and keeps a dead creator's pid as
//     a process's parent).
//
// The keeper (Unix): a second acpbridge process, started on the first
// command or MCP server, in a group of its own and deaf to terminal
// signals, told over a pipe which process groups are running. When the pipe
// closes (acpbridge exited or was killed, even by kill -9) it kills those
// groups and exits. A parent-death signal alone cannot do this: it reaches
// the shell only, never the shell's children.
package proc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// KeeperArg, as the first argument, makes acpbridge the keeper: main calls
// RunKeeper when it sees it.
const KeeperArg = "__acpbridge_keeper"

// Guard starts and ends the processes of one acpbridge. Its methods are
// safe for concurrent use; a nil *Guard starts children in groups of their
// own and kills them, without a keeper or a job (in-process tests).
type Guard struct {
	exe     string // the acpbridge binary, which serves as the keeper
	initErr error

	mu       sync.Mutex
	keeper   io.WriteCloser // the keeper's stdin, or nil: none yet, or it died
	broken   bool           // a keeper could not be started
	startErr error          // why it could not be started, for Started to return once
	groups   map[int]bool   // the groups the keeper is told of, for a new keeper
	tags     []string       // the tags whose processes the keeper ends too (KeepTagged)
	kept     chan struct{}  // closed when the keeper has exited
	osGuard
}

// NewGuard prepares this process to watch over its children: on Linux it
// becomes a subreaper, on Windows it joins a job that ends with it. exe is
// this program's path ("" for no keeper).
func NewGuard(exe string) *Guard {
	g := &Guard{exe: exe}
	g.initErr = g.osGuard.init()
	return g
}

// Err says why the Guard could not set up what its OS offers (children are
// still ended at exit), or nil.
func (g *Guard) Err() error {
	if g == nil {
		return nil
	}
	return g.initErr
}

// Command is exec.Command for a child that runs in a process group of its
// own and must not outlive acpbridge. Call Started once it has started.
// The keeper is started here, before the child, so that Started has only
// a line to write: a child killed with acpbridge right after its start is
// still the keeper's to end.
func (g *Guard) Command(name string, args []string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = childAttr()
	rawLine(cmd, name, args)
	if g != nil && useKeeper {
		g.mu.Lock()
		if g.keeper != nil {
			// A keeper killed since the last child is found out now (an
			// empty line, which it ignores), not at this child's start.
			if _, err := g.keeper.Write([]byte("\n")); err != nil {
				g.keeper.Close()
				g.keeper = nil
			}
		}
		if g.keeper == nil && !g.broken && g.exe != "" {
			// The first child's, or a new one for a keeper that died
			// (killed): it is told of every group still running.
			if g.startErr = g.startKeeper(); g.startErr != nil {
				g.broken = true
			}
		}
		g.mu.Unlock()
	}
	return cmd
}

// cmdLine is the command line of `cmd /C LINE` as cmd.exe must get it: the
// line as the model wrote it, between quotes /S strips. Go's quoting for
// Windows programs (backslash-escaped quotes) is not cmd.exe's, and would
// mangle every double quote in LINE.
func cmdLine(name string, args []string) (string, bool) {
	if name != "cmd" || len(args) != 2 || args[0] != "/C" {
		return "", false
	}
	return `cmd /S /C "` + args[1] + `"`, true
}

// Shell is the command that runs a shell command line: `sh -c LINE` on
// Unix, `cmd /C LINE` on Windows.
func Shell(line string) (name string, args []string) { return shell(line) }

// Starting is called just before a child of this process starts (cmd.Start,
// or a library's Connect that starts it); the function it returns, once
// cmd has started or failed to. On Linux the orphans re-parented to this
// process are reaped as they exit, and this is how the reaper tells this
// process's own children, which their exec.Cmd waits for, from them.
func (g *Guard) Starting() (started func(cmd *exec.Cmd)) {
	if g == nil {
		return func(*exec.Cmd) {}
	}
	done := g.osGuard.starting()
	return func(cmd *exec.Cmd) {
		pid := 0
		if cmd.Process != nil {
			pid = cmd.Process.Pid
		}
		done(pid)
	}
}

// Started hands a started child's group to the keeper, so that it is
// killed should acpbridge be killed before it ends. The error, returned
// once, says that the keeper could not be started or told: the child's
// children may then outlive a killed acpbridge.
func (g *Guard) Started(cmd *exec.Cmd) error {
	if g == nil || cmd.Process == nil {
		return nil
	}
	g.osGuard.started(cmd.Process.Pid) // Windows: the child's own job
	if !useKeeper {
		return nil
	}
	return g.tell('+', cmd.Process.Pid)
}

// Kill ends a child stopped early: its group (on Windows its job) with
// everything in it, and on Unix what it started outside the group (found
// before the kill, while they are still its descendants).
func (g *Guard) Kill(pid int) {
	var left []int
	if !useJobs {
		left = Descendants(pid)
	}
	g.KillGroup(pid)
	for _, p := range left {
		killProcess(p)
	}
}

// KillGroup ends what is left of a child's group once the child is done
// (no scan of the process table), and tells the keeper. On Windows it
// ends the child's job, never a process found by its pid (which Windows
// reuses).
func (g *Guard) KillGroup(pid int) {
	if useJobs {
		if g != nil {
			g.osGuard.endJob(pid)
		}
		return
	}
	killGroup(pid)
	if g != nil && useKeeper {
		g.tell('-', pid)
	}
}

// keeperWait bounds how long End lets the keeper kill its groups before
// the sweep, which would kill the keeper too.
const keeperWait = 300 * time.Millisecond

// End kills every process still below this one; main calls it at exit.
func (g *Guard) End() {
	if g != nil {
		g.mu.Lock()
		kept := g.kept
		if g.keeper != nil {
			g.keeper.Close() // the keeper kills what is left of its groups
			g.keeper = nil
		} else {
			kept = nil
		}
		g.mu.Unlock()
		if kept != nil {
			select { // then exits: the sweep must not kill it first
			case <-kept:
			case <-time.After(keeperWait):
			}
		}
		if useJobs {
			g.osGuard.endJobs() // the rest ends with this process's own job
			return
		}
	}
	if !useJobs {
		endDescendants()
	}
}

// tell sends the keeper "+PID" (a group to kill should the pipe close) or
// "-PID" (a group that has ended).
func (g *Guard) tell(op byte, pid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.startErr; err != nil {
		g.startErr = nil
		return fmt.Errorf("cannot start the process keeper (%s %s): %w", g.exe, KeeperArg, err)
	}
	if g.groups == nil {
		g.groups = map[int]bool{}
	}
	if op == '+' {
		g.groups[pid] = true
	} else {
		delete(g.groups, pid)
	}
	if g.keeper == nil {
		return nil
	}
	if _, err := fmt.Fprintf(g.keeper, "%c%d\n", op, pid); err != nil {
		// The keeper died: the next child starts another, told of the
		// groups still running.
		g.keeper.Close()
		g.keeper = nil
		return fmt.Errorf("the process keeper stopped listening (a new one starts with the next command): %w", err)
	}
	return nil
}

func (g *Guard) startKeeper() error {
	cmd := exec.Command(g.exe, KeeperArg)
	cmd.SysProcAttr = keeperAttr()
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	started := g.Starting()
	err = cmd.Start()
	started(cmd)
	if err != nil {
		return err
	}
	kept := make(chan struct{})
	go func() {
		cmd.Wait()
		close(kept)
		g.mu.Lock()
		if g.keeper == in {
			g.keeper = nil // killed: the next child starts another
		}
		g.mu.Unlock()
	}()
	g.keeper, g.kept = in, kept
	for pid := range g.groups {
		if _, err := fmt.Fprintf(in, "+%d\n", pid); err != nil {
			break
		}
	}
	for _, tag := range g.tags {
		fmt.Fprintf(in, "t%s\n", tag)
	}
	return nil
}

// KeepTagged tells the keeper to end, should this process be killed, the
// processes marked tag (TagVar=tag in their environment) wherever they
// are: what an agent started in a session of its own, re-parented past
// this process once its parent is killed with it. Linux only, where the
// keeper can read every process's environment.
func (g *Guard) KeepTagged(tag string) {
	if g == nil || !useKeeper {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tags = append(g.tags, tag)
	if g.keeper != nil {
		fmt.Fprintf(g.keeper, "t%s\n", tag)
	}
}

// RunKeeper is the keeper's whole life: it reads "+PID" and "-PID" lines
// from r until r ends, then kills every group still listed, and what each
// group's leader started outside its group (an agent that runs a command
// in a session of its own, as codex-acp and claude-agent-acp do: found
// below the leader while it still lives, then killed with it).
func RunKeeper(r io.Reader) {
	ignoreEndSignals()
	groups := map[int]bool{}
	var tags []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		if line[0] == 't' {
			tags = append(tags, line[1:])
			continue
		}
		pid, err := strconv.Atoi(line[1:])
		if err != nil || pid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pid] = true
		case '-':
			delete(groups, pid)
		}
	}
	var below []int
	for pid := range groups {
		below = append(below, Descendants(pid)...)
	}
	for _, tag := range tags {
		below = append(below, processesTagged(TagVar+"="+tag)...)
	}
	for pid := range groups {
		killGroup(pid)
	}
	for _, pid := range below {
		killProcess(pid)
	}
}

// TagVar is the environment variable that marks a command's processes:
// what they start inherits it, also what detaches from the command's
// group and is re-parented to acpbridge (a setsid daemon).
const TagVar = "ACPBRIDGE_COMMAND_ID"

// KillTagged ends the processes marked tag (TagVar=tag in their
// environment) that were re-parented to this process, with what is below
// them: the daemons a command stopped early left behind. Linux only, where
// this process is their subreaper; elsewhere they are ended at exit.
func (g *Guard) KillTagged(tag string) {
	for _, pid := range orphansTagged(TagVar + "=" + tag) {
		left := Descendants(pid)
		killProcess(pid)
		for _, p := range left {
			killProcess(p)
		}
	}
}

// Descendants lists the processes below pid, each once: a table with a
// cycle in it (Windows keeps a dead creator's pid, which another process
// may have since) does not make it loop.
func Descendants(pid int) []int { return descendantsIn(childLister(), pid) }

// Children are pid's own child processes.
func Children(pid int) []int { return childLister()(pid) }

func descendantsIn(children func(int) []int, pid int) []int {
	var out []int
	seen := map[int]bool{pid: true}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children(p) {
			if seen[c] {
				continue
			}
			seen[c] = true
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// fromTable lists children from a table of the whole process list, for an
// OS that cannot list one process's children.
func fromTable(table map[int][]int) func(int) []int {
	return func(p int) []int { return table[p] }
}

// endDescendants kills every process below this one. A few passes catch
// what a dying process forked meanwhile.
func endDescendants() {
	self := os.Getpid()
	for range 5 {
		pids := Descendants(self)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			killProcess(pid)
		}
		reapChildren()
	}
}

// secret reports whether an environment variable holds the model
// provider's key: the processes acpbridge starts for the model's tools do
// not get it.
func secret(name string) bool { return SameEnvName(name, KeyVar) }

// SameEnvName reports whether two environment variable names are one on
// this OS.
func SameEnvName(a, b string) bool { return sameEnvName(a, b, envCaseFold) }

// EnvNameHasPrefix reports whether an environment variable name begins
// with prefix on this OS (without case on Windows).
func EnvNameHasPrefix(name, prefix string) bool {
	return len(name) >= len(prefix) && SameEnvName(name[:len(prefix)], prefix)
}

func sameEnvName(a, b string, fold bool) bool {
	if fold {
		return strings.EqualFold(a, b)
	}
	return a == b
}

// KeyVar is the environment variable of the provider's key.
const KeyVar = "OPENAI_API_KEY"

// ChildEnv is this process's environment less the secrets, except those
// named in pass: what commands and stdio MCP servers start with.
func ChildEnv(pass []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if secret(name) && !slices.ContainsFunc(pass, func(p string) bool { return SameEnvName(p, name) }) {
			continue
		}
		env = append(env, kv)
	}
	return env
}
