// file_windows.go: the store's files and the session lock on Windows
// (LockFileEx, which Windows drops when the holder dies).

package store

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// openFile opens a file of the store (mode 0600 when it creates it); a link
// is refused: the store never follows one.
func openFile(path string, flag int) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrLink}
	}
	return os.OpenFile(path, flag, 0o600)
}

// replaceFile renames tmp over path. Windows refuses to replace a file
// another process has open (a session/list reading the info file), for
// as long as it reads: a few tries, a few milliseconds apart, ride that
// out.
func replaceFile(tmp, path string) error {
	var err error
	for try := range 10 {
		if err = os.Rename(tmp, path); err == nil || !errors.Is(err, windows.ERROR_ACCESS_DENIED) && !errors.Is(err, windows.ERROR_SHARING_VIOLATION) {
			return err
		}
		time.Sleep(time.Duration(try+1) * 2 * time.Millisecond)
	}
	return err
}

// lockOffsetHigh and lockLength are the byte the lock covers: far past the pid written at the
// start of the file, since a Windows lock also bars other processes from
// reading what it covers.
const lockOffsetHigh, lockLength = 1, 1

// lockFile takes f's exclusive lock without waiting; held says that
// another process has it.
func lockFile(f *os.File) (held bool, err error) {
	ol := windows.Overlapped{OffsetHigh: lockOffsetHigh}
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, lockLength, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return true, nil
	}
	return false, err
}

func unlockFile(f *os.File) {
	ol := windows.Overlapped{OffsetHigh: lockOffsetHigh}
	windows.UnlockFileEx(windows.Handle(f.Fd()), 0, lockLength, 0, &ol)
}
