// tools_test.go tests the tool rules that a transcript cannot set up.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that a symlink inside the cwd that points outside the roots does
// not let a tool through: the path is refused, the file is not read.
func TestTools_symlinkOutsideRoots(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("s3cret"), 0o600))
	fixture := writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"c1","name":"read_file","input":{"path":"link/secret.txt"}}},{"toolCall":{"id":"c2","name":"write_file","input":{"path":"link/new.txt","content":"x"}}}]}`,
		`{"expect":"outside the session's directories","chunks":[{"text":"Refused."}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	require.NoError(t, os.Symlink(outside, filepath.Join(ta.cwd, "link")))
	sid := ta.newSession()
	ta.call(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"bypass"}}`)
	ta.send(prompt(3, sid, "read the secret"))
	updates, r := ta.updatesUntil(3)
	require.Nil(t, r.Error)
	for _, u := range updates {
		assert.NotContains(t, u, "s3cret")
	}
	assert.NoFileExists(t, filepath.Join(outside, "new.txt"))
	assert.JSONEq(t, `{"stopReason":"end_turn"}`, string(r.Result))
}

// Verify that an additional directory is a root as well.
func TestTools_additionalDirectory(t *testing.T) {
	t.Parallel()
	extra := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(extra, "lib.txt"), []byte("library"), 0o600))
	fixture := writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"c1","name":"read_file","input":{"path":"`+filepath.Join(extra, "lib.txt")+`"}}}]}`,
		`{"expect":"library","chunks":[{"text":"Read it."}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	ta.call(initLine)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","additionalDirectories":["`+extra+`"],"mcpServers":[]}}`))
	require.Nil(t, r.Error)
	ta.send(prompt(2, "sess_1", "read the library"))
	_, r = ta.updatesUntil(2)
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{"stopReason":"end_turn"}`, string(r.Result))
}

// Verify that no line of a routine turn outgrows 64 KiB, what a client
// reading lines with asyncio's default limit takes: a 200 KiB file read
// and a long command output reach the editor as previews (head, tail and
// a note), while the model is given the output, and a load replays the
// previews.
func TestTools_previewLinesUnder64KiB(t *testing.T) {
	t.Parallel()
	fixture := writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"c1","name":"read_file","input":{"path":"big.txt"}}},{"toolCall":{"id":"c2","name":"run_command","input":{"command":"seq 1 200000"}}}]}`,
		`{"expect":"199999","chunks":[{"text":"Read it."}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	var big strings.Builder
	for i := 1; big.Len() < 200<<10; i++ {
		fmt.Fprintf(&big, "line %d of the big file, \"quoted\"\t\n", i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(ta.cwd, "big.txt"), []byte(big.String()), 0o600))
	sid := ta.newSession()
	ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
	ups, r := ta.turnUpdates(3, sid, "read it")
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{"stopReason":"end_turn"}`, string(r.Result), "the model was given the file's lines")
	joined := strings.Join(ups, "\n")
	assert.Contains(t, joined, "not shown here")
	assert.Contains(t, joined, `199999\n200000`, "a command's tail is shown")
	for _, l := range ta.got {
		assert.Less(t, len(l), 64<<10, "a line of %d bytes: %.200s", len(l), l)
	}
	ta.close()
}
