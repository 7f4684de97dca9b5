// Package proc makes sure that nothing acpbridge starts outlives it: local
// commands, MCP servers, and whatever they start in turn, daemons included.
//
// Three layers, because each covers what the others cannot:
//   - every child is started with Pdeathsig (SIGKILL when acpbridge dies,
//     even by kill -9) and in a process group of its own, which is killed
//     when the command or the MCP server is done;
//   - the process is a child subreaper (prctl), so a descendant whose
//     parent exits (a setsid or nohup daemon, a double fork) is re-parented
//     to acpbridge rather than to init, and stays findable;
//   - at exit, EndDescendants kills every process still below acpbridge.
//
// What no layer can cover: after kill -9 of acpbridge, a grandchild that left
// its group (setsid) is re-parented to init and lives on.
package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// BecomeSubreaper makes orphaned descendants this process's children.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// EndDescendants kills every process below this one and reaps what it can.
// A few passes catch what a dying process forked meanwhile.
func EndDescendants() {
	self := os.Getpid()
	for range 5 {
		pids := Descendants(self)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			if pid <= 0 || err != nil {
				break // no child left
			}
		}
	}
}

// Descendants lists the processes below pid, from /proc.
func Descendants(pid int) []int {
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
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
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
