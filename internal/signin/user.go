// user.go holds setup's side of the conversation with the user: a line
// asked for, and a secret read without echo, each given up when the
// command is interrupted, with the terminal left as it was found.

package signin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// errInterrupted is an answer the user ended with Ctrl-D at a terminal.
var errInterrupted = errors.New("interrupted")

// user is whom setup asks.
type user struct {
	ctx context.Context // ends at a signal (Ctrl-C)
	in  *bufio.Reader
	tty *os.File // stdin, when it is a terminal; nil for a script
	out io.Writer
}

// ask prints prompt and reads one line.
func (u *user) ask(prompt string) (string, error) {
	fmt.Fprint(u.out, prompt)
	line, err := u.line()
	if errors.Is(err, io.EOF) && u.tty != nil {
		return "", errInterrupted
	}
	return strings.TrimSpace(line), err
}

// line reads one line of stdin, its end trimmed.
func (u *user) line() (string, error) {
	return u.await(func() (string, error) {
		line, err := u.in.ReadString('\n')
		if err == io.EOF && line != "" {
			err = nil
		}
		return strings.TrimRight(line, "\r\n"), err
	})
}

// secret prints prompt and reads a line from the terminal with its echo
// off from before the prompt to after the line; the echo comes back
// however the read ends (Ctrl-C included).
func (u *user) secret(prompt string) (string, error) {
	restore, err := hideTyping(int(u.tty.Fd()))
	if err != nil {
		return "", fmt.Errorf("cannot turn the terminal's echo off to read the key: %v", err)
	}
	defer restore()
	fmt.Fprint(u.out, prompt)
	key, err := u.line()
	fmt.Fprintln(u.out)
	if errors.Is(err, io.EOF) {
		return "", errInterrupted
	}
	return key, err
}

// await runs read, giving it up when the context ends (the read goes on in
// the background, and the process ends soon after).
func (u *user) await(read func() (string, error)) (string, error) {
	type answer struct {
		s   string
		err error
	}
	done := make(chan answer, 1)
	go func() {
		s, err := read()
		done <- answer{s, err}
	}()
	select {
	case a := <-done:
		return a.s, a.err
	case <-u.ctx.Done():
		return "", u.ctx.Err()
	}
}
