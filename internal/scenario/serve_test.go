// serve_test.go tests playing the agent's side in-process: what a client
// that does as the file says gets, and each way a client can differ.

package scenario

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const serveFile = `-- flags --
-- transcript --
> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
< {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"$REST":true}}
> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}
< {"jsonrpc":"2.0","id":1,"result":{"sessionId":"$SESSION"}}
< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$SESSION","update":{"sessionUpdate":"session_info_update","title":"in $CWD","updatedAt":"$ANY"}}}
`

func serveLines(t *testing.T, client ...string) (string, []string) {
	t.Helper()
	sc, err := Parse("s.txtar", []byte(serveFile))
	require.NoError(t, err)
	var out bytes.Buffer
	diffs := Serve(context.Background(), sc, strings.NewReader(strings.Join(client, "\n")+"\n"), &out, 5*time.Second)
	return out.String(), diffs
}

func TestServe(t *testing.T) {
	out, diffs := serveLines(t,
		`{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":"b","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	assert.Empty(t, diffs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"a","result":{"protocolVersion":1}}`, lines[0], "the client's id; $REST dropped")
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"b","result":{"sessionId":"session-1"}}`, lines[1], "a value made for $SESSION")
	assert.Contains(t, lines[2], `"title":"in /w"`, "$CWD is the client's")
	assert.Regexp(t, `"updatedAt":"20\d\d-`, lines[2], "$ANY in a member named ...At is a time")

	_, diffs = serveLines(t,
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{}}`)
	require.Len(t, diffs, 1)
	assert.Contains(t, diffs[0], "after the scenario's last line the client sent")

	out, diffs = serveLines(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}`)
	require.Len(t, diffs, 1)
	assert.Contains(t, diffs[0], "s.txtar:3: the client's line differs at .params.protocolVersion")
	assert.Contains(t, out, `"error":{"code":-32603,"message":"acpbridge scenario serve: the client's line differs`, "the request is answered, not left waiting")

	_, diffs = serveLines(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	require.Len(t, diffs, 1)
	assert.Contains(t, diffs[0], "s.txtar:5: the client closed its output (EOF) where the scenario expects it")
}

func TestReadLine_bounded(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", 100)+"\nnext\n"), 16)
	line, err := readLine(br, 10)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("x", 10), string(line), "kept at most max bytes")
	line, err = readLine(br, 10)
	require.NoError(t, err)
	assert.Equal(t, "next\n", string(line), "the rest of the long line was read past")
}
