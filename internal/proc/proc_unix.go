//go:build unix

// proc_unix.go holds what every Unix shares: process groups, the keeper,
// the shell and the signals that end acpbridge.

package proc

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

const useKeeper = true

func shell(line string) (string, []string) { return "sh", []string{"-c", line} }

// rawLine: Unix passes arguments as they are.
func rawLine(*exec.Cmd, string, []string) {}

// keeperAttr puts the keeper in a group of its own, so that a terminal's
// Ctrl-C to acpbridge's group does not end it before it has done its job.
func keeperAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func killGroup(pgid int) { syscall.Kill(-pgid, syscall.SIGKILL) }

// TermGroup asks the process group pgid to end (SIGTERM).
func TermGroup(pgid int) { syscall.Kill(-pgid, syscall.SIGTERM) }

// useJobs: Unix ends children by process group.
const useJobs = false

func (*osGuard) started(int) {}
func (*osGuard) endJob(int)  {}
func (*osGuard) endJobs()    {}

func killProcess(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

// reapChildren waits for this process's children, which it has killed, to
// be reaped: until none is left, or for reapWait at most. A child the
// kernel holds in an uninterruptible wait (heavy I/O) or one forked after
// the kill must not hold acpbridge's exit, and with it the client's end of
// its output: what is left is reaped by init once acpbridge has exited.
func reapChildren() {
	deadline := time.Now().Add(reapWait)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err != nil: // ECHILD: none left
			return
		case pid > 0:
			continue
		case time.Now().After(deadline):
			return
		}
		time.Sleep(5 * time.Millisecond) // children left, none exited yet
	}
}

// reapWait bounds how long the exit waits for killed children to be reaped.
const reapWait = time.Second

// EndSignals are the signals that end acpbridge as stdin's EOF does.
func EndSignals() []os.Signal {
	return []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}
}

// IgnoreBrokenOutput makes a client that stops reading, or a full file
// system, an error acpbridge handles rather than a signal that kills it.
func IgnoreBrokenOutput() { signal.Ignore(syscall.SIGPIPE, syscall.SIGXFSZ) }

func ignoreEndSignals() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
}

// ExitSignal is the name of the signal that ended a process, or "".
func ExitSignal(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}

// Interrupt asks a process to end (SIGTERM).
func Interrupt(p *os.Process) error { return p.Signal(syscall.SIGTERM) }

// SetNonblock puts f in non-blocking mode, so that Go's netpoller waits on
// it.
func SetNonblock(f *os.File) error { return syscall.SetNonblock(int(f.Fd()), true) }
