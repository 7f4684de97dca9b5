// gone_windows_test.go tells whether a process still exists.

package main

import "golang.org/x/sys/windows"

func processGone(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return true
	}
	defer windows.CloseHandle(h)
	var code uint32
	return windows.GetExitCodeProcess(h, &code) == nil && code != 259 // STILL_ACTIVE
}
