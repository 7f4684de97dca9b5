// Package shellword quotes a word for a POSIX shell, only when it needs
// it: the commands acpbridge shows people (a scenario's "run it again")
// and the ones the served model has an agent's shell tool run read as
// typed.
package shellword

import "strings"

// Quote is s as one word for a POSIX shell: s itself when no character
// in it means anything to the shell, else single-quoted.
func Quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"$`\\*?[]#~;&|<>(){}!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
