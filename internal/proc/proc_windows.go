// proc_windows.go: a Job Object ends every descendant with acpbridge;
// commands run under cmd /C and are killed with their process tree.

package proc

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// useKeeper: the job does the keeper's work.
const useKeeper = false

// useJobs: each child runs in a Job Object of its own, ended as a whole.
const useJobs = true

// osGuard holds the job acpbridge and its descendants run in (the handle
// is never closed: the job ends when the process does), and a job for each
// child, nested in it, by the child's pid: a child and what it starts are
// ended through their job, never by a pid, which Windows reuses (and
// keeps as the "parent" of processes whose creator has long exited).
type osGuard struct {
	job windows.Handle

	mu   sync.Mutex
	jobs map[int]windows.Handle
}

// started puts the child pid, just started, in a job of its own (what it
// started before this call stays in acpbridge's job, ended at its exit).
func (g *osGuard) started(pid int) {
	job, err := killOnCloseJob()
	if err != nil {
		return
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		windows.CloseHandle(job)
		return
	}
	err = windows.AssignProcessToJobObject(job, h)
	windows.CloseHandle(h)
	if err != nil {
		windows.CloseHandle(job)
		return
	}
	g.mu.Lock()
	if g.jobs == nil {
		g.jobs = map[int]windows.Handle{}
	}
	g.jobs[pid] = job
	g.mu.Unlock()
}

// endJob ends every process of the child pid's job.
func (g *osGuard) endJob(pid int) {
	g.mu.Lock()
	job, ok := g.jobs[pid]
	delete(g.jobs, pid)
	g.mu.Unlock()
	if ok {
		windows.TerminateJobObject(job, 1)
		windows.CloseHandle(job)
	}
}

// endJobs ends every child's job.
func (g *osGuard) endJobs() {
	g.mu.Lock()
	jobs := g.jobs
	g.jobs = nil
	g.mu.Unlock()
	for _, job := range jobs {
		windows.TerminateJobObject(job, 1)
		windows.CloseHandle(job)
	}
}

// killOnCloseJob is a new job whose processes end when its last handle
// closes.
func killOnCloseJob() (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, fmt.Errorf("creating a job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return 0, fmt.Errorf("setting the job object's limits: %w", err)
	}
	return job, nil
}

// starting does nothing here: a Job Object ends what a command leaves
// behind, and Windows keeps no zombies.
func (*osGuard) starting() func(pid int) { return func(int) {} }

// init creates a job that kills its processes when its last handle closes,
// and puts this process (and so every child it starts) in it.
func (g *osGuard) init() error {
	job, err := killOnCloseJob()
	if err != nil {
		return err
	}
	if err := windows.AssignProcessToJobObject(job, windows.CurrentProcess()); err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("joining the job object: %w", err)
	}
	g.job = job
	return nil
}

// HideMemory does nothing on Windows: a process of the same user may open
// another for reading (its environment block included) unless the
// process's DACL is changed, which acpbridge does not do
// (docs/platforms.md).
func HideMemory() error { return nil }

// orphansTagged: on Windows a command's processes end with its job.
func orphansTagged(string) []int { return nil }

// processesTagged: Windows ends what a command started with its job.
func processesTagged(string) []int { return nil }

// WaitExited: a Windows command's tree is ended through a snapshot after
// its Wait.
func WaitExited(int) bool { return false }

// IsTerminal reports whether f is a console.
func IsTerminal(f *os.File) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(f.Fd()), &mode) == nil
}

// envCaseFold: Windows compares environment variable names without case.
const envCaseFold = true

func shell(line string) (string, []string) { return "cmd", []string{"/C", line} }

// rawLine gives cmd.exe its command line as it must read it (cmdLine).
func rawLine(cmd *exec.Cmd, name string, args []string) {
	if line, ok := cmdLine(name, args); ok {
		cmd.SysProcAttr.CmdLine = line
	}
}

func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP}
}

// ChildAcpbridgeAttr is for a --fanout child, which ends at its stdin's EOF
// or with the job.
func ChildAcpbridgeAttr() *syscall.SysProcAttr { return nil }

func keeperAttr() *syscall.SysProcAttr { return nil }

// TermGroup: Windows has no signal to ask a process group to end; the
// job's end follows.
func TermGroup(int) {}

// killGroup is never called on Windows (useJobs): a child is ended
// through its job.
func killGroup(int) {}

func killProcess(pid int) {
	h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		return
	}
	windows.TerminateProcess(h, 1)
	windows.CloseHandle(h)
}

// reapChildren: Windows has no zombies to reap.
func reapChildren() {}

// childLister lists each process's children from one pass over the process
// table (parents).
func childLister() func(int) []int { return fromTable(parents()) }

// parents maps each process to its children, from a process snapshot.
func parents() map[int][]int {
	children := map[int][]int{}
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return children
	}
	defer windows.CloseHandle(snap)
	var e windows.ProcessEntry32
	e.Size = uint32(unsafe.Sizeof(e))
	for err = windows.Process32First(snap, &e); err == nil; err = windows.Process32Next(snap, &e) {
		pp := int(e.ParentProcessID)
		if int(e.ProcessID) != pp {
			children[pp] = append(children[pp], int(e.ProcessID))
		}
	}
	return children
}

// EndSignals: Ctrl-C and Ctrl-Break (os.Interrupt), and the console's
// close, logoff or shutdown (SIGTERM to Go).
func EndSignals() []os.Signal { return []os.Signal{os.Interrupt, syscall.SIGTERM} }

// IgnoreBrokenOutput: Windows raises no signal for a broken pipe.
func IgnoreBrokenOutput() {}

func ignoreEndSignals() { signal.Ignore(os.Interrupt, syscall.SIGTERM) }

// ExitSignal: a Windows process ends with an exit code only.
func ExitSignal(*os.ProcessState) string { return "" }

// Interrupt ends a process: Windows cannot send a console's Ctrl-C to one
// process alone.
func Interrupt(p *os.Process) error { return p.Kill() }

// SetNonblock: Windows pipes are waited on as they are.
func SetNonblock(*os.File) error { return fmt.Errorf("not on Windows") }
