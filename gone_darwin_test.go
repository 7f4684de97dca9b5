// gone_darwin_test.go waits for a process to end through kqueue.

package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// awaitExit waits up to d for pid to end (zombie or reaped) and reports
// whether it has: kqueue reports NOTE_EXIT when it terminates.
func awaitExit(pid int, d time.Duration) bool {
	kq, err := unix.Kqueue()
	if err != nil {
		return processGone(pid)
	}
	defer unix.Close(kq)
	var ev unix.Kevent_t
	unix.SetKevent(&ev, pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ev.Fflags = unix.NOTE_EXIT
	if _, err := unix.Kevent(kq, []unix.Kevent_t{ev}, nil, nil); err != nil {
		return true // no such process: gone
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	out := make([]unix.Kevent_t, 1)
	n, err := unix.Kevent(kq, nil, out, &ts)
	for err == unix.EINTR {
		n, err = unix.Kevent(kq, nil, out, &ts)
	}
	return err == nil && n > 0
}
