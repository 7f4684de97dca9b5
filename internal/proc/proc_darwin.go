// proc_darwin.go: macOS has no subreaper and no parent-death signal;
// process groups, the keeper and a sweep through sysctl stand in.

package proc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

type osGuard struct{}

func (*osGuard) init() error { return nil }

// starting: macOS re-parents orphans to launchd, so there are none here to
// reap.
func (*osGuard) starting() func(pid int) { return func(int) {} }

// HideMemory does nothing on macOS: a process of the same user can read
// another's starting environment (sysctl KERN_PROCARGS2) and nothing a
// process can set prevents it (docs/platforms.md).
func HideMemory() error { return nil }

// orphansTagged: macOS re-parents orphans to launchd, not to acpbridge
// (docs/platforms.md): there are none of its own to find.
func orphansTagged(string) []int { return nil }

// processesTagged: macOS does not show another process's environment
// without privileges; the keeper ends groups only.
func processesTagged(string) []int { return nil }

// WaitExited cannot wait without reaping here: the caller kills the
// group after its Wait.
func WaitExited(int) bool { return false }

// parentsFromPS is parents from ps(1), for when sysctl fails.
func parentsFromPS() map[int][]int {
	children := map[int][]int{}
	out, _ := exec.Command("/bin/ps", "-axo", "pid=,ppid=").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		ppid, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	return children
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TIOCGETA)
	return err == nil
}

// envCaseFold: environment variable names differ by case.
const envCaseFold = false

func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// ChildAcpbridgeAttr is for a --fanout child, which ends at its stdin's EOF
// when the router dies.
func ChildAcpbridgeAttr() *syscall.SysProcAttr { return nil }

// childLister lists each process's children from one pass over the process
// table (parents).
func childLister() func(int) []int { return fromTable(parents()) }

// parents maps each process to its children, from the kernel's process
// table.
func parents() map[int][]int {
	children := map[int][]int{}
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return parentsFromPS() // the sweep must not be lost with the call
	}
	for _, p := range procs {
		pp := int(p.Eproc.Ppid)
		children[pp] = append(children[pp], int(p.Proc.P_pid))
	}
	return children
}
