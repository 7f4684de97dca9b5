// figures_linux.go measures a process tree from /proc.

package scenario

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"acpbridge/internal/proc"
	"acpbridge/internal/report"
)

// treeMemory measures pid and every process below it: each one's peak RSS
// so far (VmHWM: a sample between two peaks misses nothing), its PSS now
// and its own CPU time so far.
func treeMemory(pid int) ([]procMemory, bool) {
	var out []procMemory
	for _, p := range append([]int{pid}, proc.Descendants(pid)...) {
		dir := "/proc/" + strconv.Itoa(p)
		r, okR := kbField(dir+"/status", "VmHWM:")
		m := rollup(dir + "/smaps_rollup")
		if okR {
			out = append(out, procMemory{pid: p, peakRSS: r, pss: m.pss, uss: m.uss, anon: m.anon, cpu: ownCPU(dir + "/stat")})
		}
	}
	return out, len(out) > 0
}

// programOf is the command line of the program a process tree runs: the
// root's, or where the root is a shell running one program (a wrapper
// script that did not exec it), that program's, and so on down; its
// program as the executable file that runs (/proc/PID/exe), and its
// arguments that name files in its directory made absolute. nil where it
// cannot be read.
func programOf(pid int) []string {
	for range 8 {
		dir := "/proc/" + strconv.Itoa(pid)
		b, err := os.ReadFile(dir + "/cmdline")
		if err != nil || len(b) == 0 {
			return nil
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if kids := proc.Children(pid); isShell(args[0]) && len(kids) == 1 {
			pid = kids[0]
			continue
		}
		if exe, err := os.Readlink(dir + "/exe"); err == nil {
			args[0] = exe
		}
		if cwd, err := os.Readlink(dir + "/cwd"); err == nil {
			for i, a := range args[1:] {
				if p := filepath.Join(cwd, a); !filepath.IsAbs(a) && fileExists(p) {
					args[i+1] = p
				}
			}
		}
		return args
	}
	return nil
}

// isShell reports whether program is a shell a wrapper script runs in.
func isShell(program string) bool {
	switch filepath.Base(program) {
	case "sh", "bash", "dash", "zsh", "env":
		return true
	}
	return false
}

// ownCPU is a process's own user and system time so far, from its stat
// file (in clock ticks of 1/100 s, as /proc gives them on every Linux
// ABI); its children's are theirs.
func ownCPU(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')') // the command's name may hold spaces
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:]) // from the state, the stat's third field
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(string(f[11]), 10, 64)
	stime, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// treeCPU reads the CPU time so far of every thread of pid and of every
// process below it, by thread id: each one's time on a CPU, in nanoseconds
// (schedstat's first field), where the stat file's user and system time
// counts ticks of 10 ms, more than a turn's part of many a process. Keyed
// by thread, a thread that ends between two readings takes only its own
// time with it, not its process's. nil where none can be read (pid gone,
// or a kernel without schedstat).
func treeCPU(pid int) map[int]time.Duration {
	out := map[int]time.Duration{}
	for _, p := range append([]int{pid}, proc.Descendants(pid)...) {
		dir := "/proc/" + strconv.Itoa(p) + "/task/"
		tasks, err := os.ReadDir(dir)
		if err != nil {
			continue // ended meanwhile
		}
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if ns, ok := schedCPU(dir + task.Name() + "/schedstat"); ok && err == nil {
				out[tid] = ns
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// schedCPU is a thread's time on a CPU from its schedstat file (the first
// of its three fields, in nanoseconds); false where it cannot be read.
func schedCPU(path string) (time.Duration, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(string(f[0]), 10, 64)
	return time.Duration(ns), err == nil
}

// rolledUp is what a process's smaps_rollup says of its memory, in bytes.
type rolledUp struct {
	pss  int64 // its proportional share of every page it maps
	uss  int64 // its private pages, clean and dirty: what no other process shares
	anon int64 // its anonymous pages: no file's, so whoever else maps its binary
}

// rollup reads a process's smaps_rollup.
func rollup(path string) rolledUp {
	var m rolledUp
	b, err := os.ReadFile(path)
	if err != nil {
		return m
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		name, v, ok := bytes.Cut(line, []byte(":"))
		f := bytes.Fields(v)
		if !ok || len(f) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			continue
		}
		switch string(name) {
		case "Pss":
			m.pss = kb << 10
		case "Private_Clean", "Private_Dirty":
			m.uss += kb << 10
		case "Anonymous":
			m.anon = kb << 10
		}
	}
	return m
}

// kbField reads a "Name:  N kB" line of a /proc file, in bytes.
func kbField(path, name string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte(name)); ok {
			f := bytes.Fields(v)
			if len(f) == 0 {
				return 0, false
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// maxRSS is the largest RSS of the process (or of a child it waited for).
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10 // kB on Linux
	}
	return -1
}

// machine is the kernel's release, the CPU's model name, the RAM and the
// load average now.
func machine() report.Machine {
	var m report.Machine
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = string(bytes.TrimSpace(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			if name, val, ok := bytes.Cut(line, []byte(":")); ok && string(bytes.TrimSpace(name)) == "model name" {
				m.CPU = string(bytes.TrimSpace(val))
				break
			}
		}
	}
	m.Memory, _ = kbField("/proc/meminfo", "MemTotal:")
	m.Load = loadAverage()
	return m
}

// cpuMHz is the mean of the CPUs' clocks now as /proc/cpuinfo gives them
// ("cpu MHz"; a virtual machine may give a fixed figure), or 0.
func cpuMHz() float64 {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	sum, n := 0.0, 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		if name, val, ok := bytes.Cut(line, []byte(":")); ok && string(bytes.TrimSpace(name)) == "cpu MHz" {
			if v, err := strconv.ParseFloat(string(bytes.TrimSpace(val)), 64); err == nil {
				sum, n = sum+v, n+1
			}
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// loadAverage is the load over 1, 5 and 15 minutes now, or nil.
func loadAverage() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var load []float64
	for _, f := range bytes.Fields(b)[:3] {
		v, _ := strconv.ParseFloat(string(f), 64)
		load = append(load, v)
	}
	return load
}
