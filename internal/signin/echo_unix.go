//go:build linux || darwin

// echo_unix.go tells a terminal and turns its echo off on Linux and macOS
// (the ioctls are echo_linux.go's and echo_darwin.go's).

package signin

import "golang.org/x/sys/unix"

// hideTyping turns the echo of the terminal fd off until restore is
// called, so that a key typed (or pasted) as soon as its prompt shows is
// never echoed.
func hideTyping(fd int) (restore func(), err error) {
	t, err := unix.IoctlGetTermios(fd, getTermios)
	if err != nil {
		return func() {}, err
	}
	old := *t
	t.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(fd, setTermios, t); err != nil {
		return func() {}, err
	}
	return func() { unix.IoctlSetTermios(fd, setTermios, &old) }, nil
}

// isTerminal reports whether fd is a terminal.
func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, getTermios)
	return err == nil
}
