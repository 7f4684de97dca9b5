//go:build !linux && !darwin && !windows

// echo_other.go: elsewhere setup takes stdin as a script's (the key its
// first line), never asking at a terminal whose echo it cannot turn off.

package signin

func hideTyping(fd int) (restore func(), err error) { return func() {}, nil }

func isTerminal(fd int) bool { return false }
