//go:build !linux

// figures_other.go: outside Linux a run measures the whole run's CPU time
// only; a turn's CPU, memory and process counts are reported as not
// available.

package scenario

import (
	"os"
	"time"

	"acpbridge/internal/report"
)

func treeMemory(int) ([]procMemory, bool) { return nil, false }

// treeCPU is not read here: a turn's CPU is not measured.
func treeCPU(int) map[int]time.Duration { return nil }

func maxRSS(*os.ProcessState) int64 { return -1 }

// machine is what the platform says simply of the machine: nothing here.
func machine() report.Machine { return report.Machine{} }

// loadAverage is not read here.
func loadAverage() []float64 { return nil }

// programOf is not read here.
func programOf(int) []string { return nil }

// cpuMHz is not read here.
func cpuMHz() float64 { return 0 }
