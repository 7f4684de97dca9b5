// figures_linux.go measures a process tree from /proc.

package scenario

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"

	"acpbridge/internal/proc"
)

// treeMemory measures pid and every process below it: each one's peak RSS
// so far (VmHWM: a sample between two peaks misses nothing) and its PSS
// now.
func treeMemory(pid int) ([]procMemory, bool) {
	var out []procMemory
	for _, p := range append([]int{pid}, proc.Descendants(pid)...) {
		r, okR := kbField("/proc/"+strconv.Itoa(p)+"/status", "VmHWM:")
		ps, _ := kbField("/proc/"+strconv.Itoa(p)+"/smaps_rollup", "Pss:")
		if okR {
			out = append(out, procMemory{pid: p, peakRSS: r, pss: ps})
		}
	}
	return out, len(out) > 0
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
func machine() machineInfo {
	var m machineInfo
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = string(bytes.TrimSpace(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			if name, val, ok := bytes.Cut(line, []byte(":")); ok && string(bytes.TrimSpace(name)) == "model name" {
				m.cpu = string(bytes.TrimSpace(val))
				break
			}
		}
	}
	m.memory, _ = kbField("/proc/meminfo", "MemTotal:")
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		for _, f := range bytes.Fields(b)[:3] {
			v, _ := strconv.ParseFloat(string(f), 64)
			m.load = append(m.load, v)
		}
	}
	return m
}
