// zombie_linux_test.go checks, on the binary, that what commands leave in
// the background and that is re-parented to acpbridge (its subreaper) is
// reaped as it exits, in plain mode and under the router.

package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that eight run_command calls of `sleep 0.2 & echo $!` (the shell
// exits at once, its sleep is re-parented to acpbridge) leave no zombie:
// every sleep is reaped once it has exited, while the process serves on.
func TestZombies_reaped(t *testing.T) {
	for _, mode := range []struct {
		name string
		args []string
	}{{"plain", nil}, {"fanout", []string{"--fanout", "--spares", "0"}}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			var calls []string
			for i := range 8 {
				calls = append(calls, fmt.Sprintf(`{"toolCall":{"id":"c%d","name":"run_command","input":{"command":"sleep 0.2 & echo bg=$!"}}}`, i))
			}
			fixture := writeFixture(t, `{"chunks":[`+strings.Join(calls, ",")+`]}`, `{"chunks":[{"text":"Started."}]}`, `{"chunks":[{"text":"Still here."}]}`)
			p := startProcess(t, nil, append(mode.args, "--model", "replay:"+fixture)...)
			sid := p.newSession()
			p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
			p.send(prompt(3, sid, "start them"))
			ups, r := p.updatesUntil(3)
			require.Nil(t, r.Error)
			var pids []int
			for _, m := range regexp.MustCompile(`bg=(\d+)`).FindAllStringSubmatch(strings.Join(ups, "\n"), -1) {
				pid, _ := strconv.Atoi(m[1])
				if len(pids) == 0 || pids[len(pids)-1] != pid {
					pids = append(pids, pid)
				}
			}
			require.Len(t, pids, 8, "each command says its background pid")
			for _, pid := range pids {
				assertGone(t, pid, "a background sleep of 0.2 s")
			}
			// Exited, each is reaped: its /proc entry goes. A zombie keeps it.
			deadline := time.Now().Add(10 * time.Second)
			for _, pid := range pids {
				for {
					_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
					if os.IsNotExist(err) {
						break
					}
					if time.Now().After(deadline) {
						state, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
						assert.Failf(t, "a zombie was left", "pid %d: %s", pid, state)
						break
					}
					time.Sleep(10 * time.Millisecond) // polling what the reaper does, bounded
				}
			}
			ups, r = p.turnUpdates(4, sid, "and now")
			require.Nil(t, r.Error, "the process serves on")
			p.close()
		})
	}
}
