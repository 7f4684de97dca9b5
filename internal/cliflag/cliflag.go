// Package cliflag parses a command's flags the way every acpbridge command
// answers them: --help prints the usage and every flag to stdout and
// exits 0; a usage error is one line on stderr that says what was wrong,
// with the flag as it is typed (--name), and points to --help.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Parse parses args into fs. It returns ok when the command should go on;
// otherwise the exit status: 0 after --help (usage and the flags printed
// on stdout), 2 after a usage error (one line on stderr naming cmd).
func Parse(fs *flag.FlagSet, args []string, cmd, usage string, stdout, stderr io.Writer) (ok bool, status int) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case err == nil:
		return true, 0
	case errors.Is(err, flag.ErrHelp):
		Help(fs, usage, stdout)
		return false, 0
	}
	Fail(stderr, cmd, "%s", DoubleDash(err.Error()))
	return false, 2
}

// Help prints usage and fs's flags, each as it is typed (--name).
func Help(fs *flag.FlagSet, usage string, w io.Writer) {
	fmt.Fprint(w, usage)
	if !strings.HasSuffix(usage, "\n") {
		fmt.Fprintln(w)
	}
	var sb strings.Builder
	fs.SetOutput(&sb)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprint(w, DoubleDashDefaults(sb.String()))
}

// DoubleDashDefaults writes PrintDefaults' "  -name" lines as "  --name".
func DoubleDashDefaults(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "  -") {
			lines[i] = "  --" + l[3:]
		}
	}
	return strings.Join(lines, "\n")
}

// DoubleDash writes the flag package's "-name" in its errors as "--name".
func DoubleDash(msg string) string {
	for _, p := range []string{"defined: -", "argument: -", "for flag -", "syntax: -"} {
		msg = strings.Replace(msg, p, p[:len(p)-1]+"--", 1)
	}
	return msg
}

// Fail prints a usage error: what was wrong, and where help is.
func Fail(stderr io.Writer, cmd, format string, args ...any) {
	fmt.Fprintf(stderr, "%s: %s; see %s --help\n", cmd, fmt.Sprintf(format, args...), cmd)
}

// OptionalCount is a flag of a count (0 or more) whose default is decided
// after parsing, from other flags: its help says what the default is, and
// no "(default ...)" is added to it.
type OptionalCount struct {
	n     int
	given bool
}

func (c *OptionalCount) String() string {
	if c == nil || !c.given {
		return ""
	}
	return strconv.Itoa(c.n)
}

func (c *OptionalCount) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a count (0 or more)", s)
	}
	c.n, c.given = n, true
	return nil
}

// Or is the count given on the command line, else def.
func (c *OptionalCount) Or(def int) int {
	if c.given {
		return c.n
	}
	return def
}
