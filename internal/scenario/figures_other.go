//go:build !linux

// figures_other.go: outside Linux a run measures CPU time only; memory and
// process counts are reported as not available.

package scenario

import "os"

func treeMemory(int) ([]procMemory, bool) { return nil, false }

func maxRSS(*os.ProcessState) int64 { return -1 }

// machine is what the platform says simply of the machine: nothing here.
func machine() machineInfo { return machineInfo{} }

// loadAverage is not read here.
func loadAverage() []float64 { return nil }

// programOf is not read here.
func programOf(int) []string { return nil }

// cpuMHz is not read here.
func cpuMHz() float64 { return 0 }
