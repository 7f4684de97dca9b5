// echo_darwin.go names macOS's ioctls for a terminal's settings.

package signin

import "golang.org/x/sys/unix"

const getTermios, setTermios = unix.TIOCGETA, unix.TIOCSETA
