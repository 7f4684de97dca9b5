//go:build unix

// editor_unix_test.go attacks the scenario's editor as a hostile workspace
// would: a FIFO, and links that lead out of the run's directory.

package scenario

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that the editor refuses to read a FIFO (it would hold the run
// past its timeout) and to read or write through a link out of the run's
// directory, and the run goes on.
func TestRun_editorHostileWorkspace(t *testing.T) {
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o644))
	start := func(flags []string, env Env) (*Agent, error) {
		require.NoError(t, syscall.Mkfifo(filepath.Join(env.Cwd, "fifo"), 0o644))
		require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(env.Cwd, "link")))
		require.NoError(t, os.Symlink(outside, filepath.Join(env.Cwd, "out")))
		require.NoError(t, os.Symlink(filepath.Join(outside, "dangling.txt"), filepath.Join(env.Cwd, "dangling")))
		require.NoError(t, os.Symlink("made.txt", filepath.Join(env.Cwd, "inside")))
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer outW.Close()
			br := bufio.NewScanner(inR)
			ask := func(id int, method, path string) string {
				fmt.Fprintf(outW, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"path":%q,"content":"x"}}`+"\n", id, method, path)
				br.Scan()
				return br.Text()
			}
			for br.Scan() {
				var m struct{ ID int }
				json.Unmarshal(br.Bytes(), &m)
				got := []string{
					ask(100, "fs/read_text_file", filepath.Join(env.Cwd, "fifo")),
					ask(101, "fs/read_text_file", filepath.Join(env.Cwd, "link")),
					ask(102, "fs/write_text_file", filepath.Join(env.Cwd, "out", "new.txt")),
					ask(103, "fs/write_text_file", filepath.Join(env.Cwd, "dangling")),
					ask(104, "fs/write_text_file", filepath.Join(env.Cwd, "inside")),
				}
				b, _ := json.Marshal(got)
				fmt.Fprintf(outW, `{"jsonrpc":"2.0","id":%d,"result":{"answers":%s}}`+"\n", m.ID, b)
			}
		}()
		return &Agent{Stdin: inW, Stdout: outR, Wait: func() int { <-done; return 0 },
			Kill: func() { inW.Close(); outR.Close() }, Stderr: func() string { return "" }}, nil
	}
	res := runText(t, `A hostile workspace.
-- flags --
-- transcript --
editor
> {"jsonrpc":"2.0","id":1,"method":"go"}
< {"jsonrpc":"2.0","id":1,"result":{"answers":"$ANSWERS"}}
`, Options{Start: start})
	require.NoError(t, res.Err)
	last := string(res.Received[len(res.Received)-1])
	assert.Contains(t, last, "is not a regular file")
	assert.NotContains(t, last, "s3cret", "a link out of the run is not read")
	assert.Contains(t, last, "keeps to the run's directory")
	_, err := os.Stat(filepath.Join(outside, "new.txt"))
	assert.True(t, os.IsNotExist(err), "nothing written through a link out of the run")
	_, err = os.Stat(filepath.Join(outside, "dangling.txt"))
	assert.True(t, os.IsNotExist(err), "nothing written through a dangling link out of the run")
	assert.Equal(t, 3, strings.Count(last, "keeps to the run's directory"), "the two links and the dangling one refused")
	assert.Contains(t, last, `104,\"jsonrpc\":\"2.0\",\"result\":{}`, "a dangling link inside the run is written through")
}
