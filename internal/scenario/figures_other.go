//go:build !linux

// figures_other.go: outside Linux a run measures CPU time only; memory and
// process counts are reported as not available.

package scenario

import "os"

func treeMemory(int) (rss, pss int64, n int, ok bool) { return 0, 0, 0, false }

func maxRSS(*os.ProcessState) int64 { return -1 }

// machine is the kernel and CPU model, where the platform says them simply.
func machine() (kernel, cpu string) { return "", "" }
