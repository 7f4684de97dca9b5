// proc_linux.go: the subreaper and its reaper, parent-death signals and
// /proc.

package proc

import (
	"bytes"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// osGuard is the subreaper's state. Orphans re-parented to this process
// (what a command left in the background: `cmd &`, a dev server) are
// reaped as they exit, on SIGCHLD, so that no zombie holds a pid for the
// life of the session. A child this process started itself is its
// exec.Cmd's to wait for (its exit status, its rusage): the reaper knows
// them by pid and start time, and never reaps one.
type osGuard struct {
	passes sync.RWMutex // read-held across a start, held by a reaping pass
	mu     sync.Mutex
	ours   map[int]string // the children started here, by pid: their start time
	once   sync.Once      // the reaper starts with the first child
}

// init makes orphaned descendants this process's children.
func (*osGuard) init() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// starting is called before a child of this process starts; the function
// it returns, once it has started (pid) or failed to (0). No reaping pass
// runs in between, so a child that exits at once is never taken for an
// orphan.
func (o *osGuard) starting() func(pid int) {
	o.once.Do(o.startReaper)
	o.passes.RLock()
	return func(pid int) {
		if pid > 0 {
			_, start, _ := procStat(pid)
			o.mu.Lock()
			o.ours[pid] = start
			o.mu.Unlock()
		}
		o.passes.RUnlock()
	}
}

func (o *osGuard) startReaper() {
	o.ours = map[int]string{}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		for range sigs {
			o.reapOrphans()
		}
	}()
}

// reapOrphans reaps every exited child that this process did not start,
// and forgets the children of its own that have been waited for.
func (o *osGuard) reapOrphans() {
	o.passes.Lock()
	defer o.passes.Unlock()
	children := map[int]bool{}
	for _, pid := range childLister()(os.Getpid()) {
		children[pid] = true
		state, start, ok := procStat(pid)
		if !ok || state != 'Z' {
			continue
		}
		o.mu.Lock()
		own, known := o.ours[pid]
		o.mu.Unlock()
		if known && own == start {
			continue // its exec.Cmd waits for it
		}
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
	o.mu.Lock()
	for pid := range o.ours {
		if !children[pid] {
			delete(o.ours, pid)
		}
	}
	o.mu.Unlock()
}

// procStat reads p's state and start time from /proc/p/stat (fields 3 and
// 22, counted from the one after the last ')': the command name may hold
// any byte).
func procStat(p int) (state byte, start string, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
	if err != nil {
		return 0, "", false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, "", false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, "", false
	}
	return f[0][0], string(f[19]), true
}

// HideMemory makes this process non-dumpable: its memory and its
// /proc/PID/environ (the environment it started with, the key included)
// are then readable by no process of the same user without
// CAP_SYS_PTRACE, the commands it runs included.
func HideMemory() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }

// orphansTagged lists this process's children whose environment holds
// the entry kv (re-parented daemons: the commands it starts are in groups
// it tracks, and are ended by group).
func orphansTagged(kv string) []int {
	var out []int
	for _, pid := range taskChildren(os.Getpid()) {
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+kv+"\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

// processesTagged lists every process whose environment holds the entry
// kv, wherever it is (the keeper's end: a killed acpbridge's agents'
// commands, re-parented past it).
func processesTagged(kv string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+kv+"\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

// WaitExited waits until the child pid has exited without reaping it
// (waitid WNOWAIT): its pid, and so its group's id, cannot be reused until
// it is reaped, so the group can be killed safely meanwhile. It reports
// whether it could.
func WaitExited(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err == nil
		}
	}
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// envCaseFold: environment variable names differ by case.
const envCaseFold = false

// childAttr: a group of its own, and SIGKILL should acpbridge die.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// ChildAcpbridgeAttr is for a --fanout child: SIGTERM should the router
// die, which it handles as EOF (its turn persisted, its children ended).
func ChildAcpbridgeAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// childLister lists a process's children from /proc/PID/task/TID/children,
// which costs reads in the subtree only (ending a command under load, with
// hundreds of processes about, must not read every one of them), or, on a
// kernel built without that file, from one pass over /proc.
func childLister() func(int) []int {
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(os.Getpid()), "task", strconv.Itoa(os.Getpid()), "children")); err != nil {
		return fromTable(parents())
	}
	return taskChildren
}

// taskChildren lists the children of every thread of p.
func taskChildren(p int) []int {
	dir := filepath.Join("/proc", strconv.Itoa(p), "task")
	tasks, _ := os.ReadDir(dir)
	var out []int
	for _, t := range tasks {
		b, _ := os.ReadFile(filepath.Join(dir, t.Name(), "children"))
		for _, f := range bytes.Fields(b) {
			if c, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// parents maps each process to its children, from /proc.
func parents() map[int][]int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentOf(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	return children
}

// parentOf reads the parent pid of p from /proc/p/stat: the field after the
// state, which follows the last ')' (the command name may hold any byte).
func parentOf(p int) (int, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(string(f[1]))
	return pp, err == nil
}
