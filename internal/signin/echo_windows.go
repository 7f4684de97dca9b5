// echo_windows.go tells a console and turns its echo off on Windows.

package signin

import "golang.org/x/sys/windows"

// hideTyping turns the echo of the console fd off until restore is called
// (before the prompt: a key typed or pasted at once is never echoed).
func hideTyping(fd int) (restore func(), err error) {
	h := windows.Handle(fd)
	var mode uint32
	if err := windows.GetConsoleMode(h, &mode); err != nil {
		return func() {}, err
	}
	if err := windows.SetConsoleMode(h, mode&^windows.ENABLE_ECHO_INPUT); err != nil {
		return func() {}, err
	}
	return func() { windows.SetConsoleMode(h, mode) }, nil
}

// isTerminal reports whether fd is a console.
func isTerminal(fd int) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(fd), &mode) == nil
}
