// echo_linux.go names Linux's ioctls for a terminal's settings.

package signin

import "golang.org/x/sys/unix"

const getTermios, setTermios = unix.TCGETS, unix.TCSETS
