// files_test.go attacks the file tools as a hostile repository would:
// FIFOs and other special files, links that lead out of the roots (dangling,
// chained, relative, swapped in while a permission request is pending),
// and files too large to return whole.

package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/acp"
	"acpbridge/internal/tools"
)

// toolResult is the final tool_call_update of a call: its status and text.
type toolResult struct {
	status, text string
}

// runToolCalls runs one turn whose model makes calls (tool name, input
// JSON) in bypass mode and returns each call's final status and text, the
// other updates' kinds, and the client requests the agent made.
func runToolCalls(t *testing.T, start starter, caps string, setup func(ta *testAgent), calls ...[2]string) ([]toolResult, []string) {
	return runToolCallsIn(t, "bypass", start, caps, setup, calls...)
}

// runToolCallsIn is runToolCalls in a given mode.
func runToolCallsIn(t *testing.T, mode string, start starter, caps string, setup func(ta *testAgent), calls ...[2]string) ([]toolResult, []string) {
	t.Helper()
	var chunks []string
	for i, c := range calls {
		chunks = append(chunks, fmt.Sprintf(`{"toolCall":{"id":"t%d","name":%q,"input":%s}}`, i, c[0], c[1]))
	}
	fixture := writeFixture(t, `{"chunks":[`+strings.Join(chunks, ",")+`]}`, `{"chunks":[{"text":"Done."}]}`)
	ta := start(t, "--model", "replay:"+fixture)
	if setup != nil {
		setup(ta)
	}
	ta.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":` + caps + `}}`)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.Nil(t, r.Error)
	var sid struct{ SessionID string }
	require.NoError(t, json.Unmarshal(r.Result, &sid))
	ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":%q}}`, sid.SessionID, mode))
	ta.send(prompt(3, sid.SessionID, "go"))
	var results []toolResult
	var requests []string
	for {
		line := ta.next("the turn's end")
		require.NotNil(t, line)
		var m struct {
			ID     *json.RawMessage
			Method string
			Params struct {
				Update struct {
					SessionUpdate string
					Status        string
					Content       json.RawMessage
				}
			}
		}
		require.NoError(t, json.Unmarshal(line, &m))
		switch {
		case m.Method == acp.MethodSessionUpdate && m.Params.Update.SessionUpdate == "tool_call_update" &&
			(m.Params.Update.Status == "completed" || m.Params.Update.Status == "failed"):
			res := toolResult{status: m.Params.Update.Status}
			var content []struct{ Content struct{ Text string } }
			require.NoError(t, json.Unmarshal(m.Params.Update.Content, &content))
			if len(content) > 0 {
				res.text = content[0].Content.Text
			}
			results = append(results, res)
		case m.Method != "" && m.Method != acp.MethodSessionUpdate:
			requests = append(requests, m.Method)
		case m.Method == "" && m.ID != nil && string(*m.ID) == "3":
			ta.close()
			return results, requests
		}
	}
}

// Verify that read_file, write_file and edit_file on a FIFO, a socket and
// a device fail at once, locally and with a client's fs (which is not
// asked), in-process and on the built binary, and that the process then
// exits on EOF. A link to a FIFO is one too.
func TestFiles_specialFiles(t *testing.T) {
	t.Parallel()
	for _, st := range []struct {
		name  string
		start starter
	}{{"in-process", inProcess}, {"binary", asProcess}} {
		for _, caps := range []string{`{}`, `{"fs":{"readTextFile":true,"writeTextFile":true}}`} {
			t.Run(st.name+"/"+caps, func(t *testing.T) {
				var calls [][2]string
				for _, name := range []string{"fifo", "sock", "link-to-fifo"} {
					calls = append(calls,
						[2]string{"read_file", fmt.Sprintf(`{"path":%q}`, name)},
						[2]string{"write_file", fmt.Sprintf(`{"path":%q,"content":"x"}`, name)},
						[2]string{"edit_file", fmt.Sprintf(`{"path":%q,"old_text":"a","new_text":"b"}`, name)})
				}
				results, requests := runToolCalls(t, st.start, caps, func(ta *testAgent) {
					mkfifo(t, filepath.Join(ta.cwd, "fifo"))
					require.NoError(t, os.Symlink("fifo", filepath.Join(ta.cwd, "link-to-fifo")))
					l, err := net.Listen("unix", filepath.Join(ta.cwd, "sock"))
					require.NoError(t, err)
					t.Cleanup(func() { l.Close() })
				}, calls...)
				require.Len(t, results, len(calls))
				for i, r := range results {
					assert.Equal(t, "failed", r.status, "call %d", i)
					assert.Contains(t, r.text, "not a regular file", "call %d", i)
				}
				assert.Empty(t, requests, "the client was asked about a special file")
			})
		}
	}
}

// Verify that no link leads a write out of the roots: a dangling link to a
// file outside, a chain of links, a relative ../.. link, and a link inside
// to a directory outside. Nothing is created outside, and in ask mode no
// permission is even asked (the call fails when it is prepared).
func TestFiles_linksOut(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	for _, caps := range []string{`{}`, `{"fs":{"readTextFile":true,"writeTextFile":true}}`} {
		t.Run(caps, func(t *testing.T) {
			results, requests := runToolCalls(t, inProcess, caps, func(ta *testAgent) {
				must := func(err error) { require.NoError(t, err) }
				must(os.Symlink(filepath.Join(outside, "new1.txt"), filepath.Join(ta.cwd, "dangling")))
				must(os.Symlink(filepath.Join(ta.cwd, "hop2"), filepath.Join(ta.cwd, "hop1")))
				must(os.Symlink(filepath.Join(outside, "new2.txt"), filepath.Join(ta.cwd, "hop2")))
				rel, err := filepath.Rel(ta.cwd, filepath.Join(outside, "new3.txt"))
				must(err)
				must(os.Symlink(rel, filepath.Join(ta.cwd, "relative")))
				must(os.Symlink(outside, filepath.Join(ta.cwd, "outdir")))
			},
				[2]string{"write_file", `{"path":"dangling","content":"x"}`},
				[2]string{"write_file", `{"path":"hop1","content":"x"}`},
				[2]string{"write_file", `{"path":"relative","content":"x"}`},
				[2]string{"write_file", `{"path":"outdir/new4.txt","content":"x"}`},
				[2]string{"edit_file", `{"path":"dangling","old_text":"a","new_text":"b"}`},
				[2]string{"read_file", `{"path":"outdir/new4.txt"}`},
			)
			require.Len(t, results, 6)
			for i, r := range results {
				assert.Equal(t, "failed", r.status, "call %d", i)
				assert.Contains(t, r.text, "outside the session's directories", "call %d", i)
			}
			assert.Empty(t, requests)
			entries, _ := os.ReadDir(outside)
			assert.Empty(t, entries, "a file was created outside the roots")
		})
	}
}

// Verify that a directory swapped for a link to outside while the
// permission request for a write into it is pending does not take the
// write outside: locally (os.Root refuses at the moment of the write) and
// through the client (the path is resolved again before fs/write).
func TestFiles_swapDuringPermission(t *testing.T) {
	t.Parallel()
	for _, caps := range []string{`{}`, `{"fs":{"readTextFile":true,"writeTextFile":true}}`} {
		t.Run(caps, func(t *testing.T) {
			outside := t.TempDir()
			fixture := writeFixture(t, `{"chunks":[{"toolCall":{"id":"w","name":"write_file","input":{"path":"sub/x.txt","content":"x"}}}]}`,
				`{"expect":"outside","chunks":[{"text":"Refused."}]}`)
			ta := startAgent(t, "--model", "replay:"+fixture)
			require.NoError(t, os.Mkdir(filepath.Join(ta.cwd, "sub"), 0o755))
			ta.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":` + caps + `}}`)
			ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`)
			ta.send(prompt(2, "sess_1", "write"))
			ta.await(`{"method":"session/request_permission"}`)
			require.NoError(t, os.Rename(filepath.Join(ta.cwd, "sub"), filepath.Join(ta.cwd, "sub.old")))
			require.NoError(t, os.Symlink(outside, filepath.Join(ta.cwd, "sub")))
			ta.send(`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`)
			for {
				line := ta.next("the turn's end")
				require.NotNil(t, line)
				assert.NotContains(t, string(line), `"method":"fs/write_text_file"`)
				if strings.HasPrefix(string(line), `{"jsonrpc":"2.0","id":2,`) {
					assert.Contains(t, string(line), `"stopReason":"end_turn"`)
					break
				}
			}
			assert.NoFileExists(t, filepath.Join(outside, "x.txt"), "the write landed outside the roots")
		})
	}
}

// Verify read_file's bounds: at most 2,000 lines and 256 KiB a call, long
// lines cut, the note saying how to read on, line and limit validated.
func TestFiles_readBounds(t *testing.T) {
	t.Parallel()
	var many strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&many, "line %d\n", i)
	}
	wide := strings.Repeat(strings.Repeat("w", 1999)+"\n", 200) // 400,000 bytes
	long := "short\n" + strings.Repeat("é", 6000) + "\nafter\n"
	// 132 lines of 2,000 bytes: the byte cap falls on the last one.
	tail := strings.Repeat(strings.Repeat("t", 1999)+"\n", 132)
	results, _ := runToolCalls(t, inProcess, `{}`, func(ta *testAgent) {
		require.NoError(t, os.WriteFile(filepath.Join(ta.cwd, "many.txt"), []byte(many.String()), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(ta.cwd, "wide.txt"), []byte(wide), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(ta.cwd, "long.txt"), []byte(long), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(ta.cwd, "tail.txt"), []byte(tail), 0o644))
	},
		[2]string{"read_file", `{"path":"many.txt"}`},
		[2]string{"read_file", `{"path":"many.txt","line":2001}`},
		[2]string{"read_file", `{"path":"many.txt","line":2,"limit":3}`},
		[2]string{"read_file", `{"path":"many.txt","limit":5000}`},
		[2]string{"read_file", `{"path":"many.txt","line":4000}`},
		[2]string{"read_file", `{"path":"many.txt","limit":-1}`},
		[2]string{"read_file", `{"path":"many.txt","line":0}`},
		[2]string{"read_file", `{"path":"wide.txt"}`},
		[2]string{"read_file", `{"path":"long.txt"}`},
		[2]string{"read_file", `{"path":"tail.txt"}`},
	)
	require.Len(t, results, 10)
	lines := func(s string) int { return strings.Count(s, "\nline ") + 1 }
	assert.Equal(t, 2000, lines(results[0].text))
	assert.Contains(t, results[0].text, "read on with line 2001")
	assert.True(t, strings.HasPrefix(results[1].text, "line 2001\n"))
	assert.True(t, strings.HasSuffix(results[1].text, "line 3000\n"), "no note at the end of the file")
	assert.Equal(t, "line 2\nline 3\nline 4\n\n[read_file: lines 2–4 of the file, which goes on; read on with line 5]", results[2].text)
	assert.Contains(t, results[3].text, "at most 2000 lines a call; read on with line 2001")
	assert.Contains(t, results[4].text, "the file has 3000 lines; line 4000 is past its end")
	assert.Equal(t, "failed", results[5].status)
	assert.Contains(t, results[5].text, "limit must be 1 or more")
	assert.Equal(t, "failed", results[6].status)
	assert.Contains(t, results[6].text, "line must be 1 or more")
	assert.LessOrEqual(t, len(results[7].text), tools.MaxResultBytes+200)
	assert.Contains(t, results[7].text, "stopped at 262144 bytes; read on with line 132")
	assert.Contains(t, results[8].text, "… [line 2 cut: 10000 more bytes]")
	assert.Contains(t, results[8].text, "after\n")
	assert.Contains(t, results[9].text, "stopped at 262144 bytes; read on with line 132", "the left-out last line is said")
}

// vmHWM is a process's peak resident memory in KiB.
func vmHWM(t *testing.T, pid int) int { return procStatusKB(t, pid, "VmHWM:") }

// procStatusKB reads a field of /proc/PID/status, in KiB.
func procStatusKB(t *testing.T, pid int, field string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			n, err := strconv.Atoi(strings.Fields(v)[0])
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// Verify on the built binary that reading a 200 MB file (one line, and with
// line and limit) keeps memory flat and the session log small, and that a
// 90 MB request line (over the 80 MiB default) is dropped without holding
// more than the line limit.
// The bounds are generous: they catch memory that follows the input's size.
func TestFiles_hugeInputsMemory(t *testing.T) {
	t.Parallel()
	fixture := writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"a","name":"read_file","input":{"path":"huge.bin"}}},{"toolCall":{"id":"b","name":"read_file","input":{"path":"huge.bin","line":2,"limit":3}}},{"toolCall":{"id":"c","name":"read_file","input":{"path":"huge.bin","line":1,"limit":100000}}}]}`,
		`{"chunks":[{"text":"Read."}]}`)
	p := startProcess(t, nil, "--model", "replay:"+fixture)
	f, err := os.Create(filepath.Join(p.cwd, "huge.bin"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(200<<20)) // 200 MB of zeros, no newline
	f.Close()
	sid := p.newSession()
	p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
	p.send(prompt(3, sid, "read it"))
	ups, r := p.updatesUntil(3)
	require.Nil(t, r.Error)
	for _, u := range ups {
		assert.Less(t, len(u), tools.MaxResultBytes+4096, "an update carried the file")
	}
	peak := vmHWM(t, p.cmd.Process.Pid)
	t.Logf("peak RSS after reading a 200 MB file three ways: %d KiB", peak)
	assert.Less(t, peak, 64<<10, "memory followed the file's size")

	big := `{"jsonrpc":"2.0","id":9,"method":"session/list","params":{"cwd":"` + strings.Repeat("x", 90<<20) + `"}}`
	_, err = p.stdin.Write([]byte(big + "\n"))
	require.NoError(t, err)
	rr := decodeResponse(t, p.await(`{"id":9}`))
	require.NotNil(t, rr.Error)
	peak = vmHWM(t, p.cmd.Process.Pid)
	t.Logf("peak RSS after a 90 MB line: %d KiB", peak)
	assert.Less(t, peak, 120<<10, "a line over the limit was held more than once")
	p.close()
	fi, err := os.Stat(filepath.Join(p.state, "sessions", sid+".jsonl"))
	require.NoError(t, err)
	assert.Less(t, fi.Size(), int64(2<<20), "the session log holds the file")
}

// Verify on the built binary that the memory a huge prompt costs is given
// back once it is answered: after a 30 MB prompt the process holds about
// its conversation (the text once), not every copy made on the way in
// (240 MiB before: the line, the decoded params, the log's buffer and the
// step were all kept).
func TestFiles_bigPromptMemoryGivenBack(t *testing.T) {
	t.Parallel()
	p := startProcess(t, nil, "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"ok"}]}`, `{"chunks":[{"text":"again"}]}`))
	sid := p.newSession()
	text, err := json.Marshal(strings.Repeat("z", 30<<20))
	require.NoError(t, err)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%s}]}}`, sid, text))
	_, r := p.updatesUntil(2)
	require.Nil(t, r.Error)
	// The next step runs once the loop has given the first one's memory back.
	p.send(prompt(3, sid, "small"))
	_, r = p.updatesUntil(3)
	require.Nil(t, r.Error)
	rss := procStatusKB(t, p.cmd.Process.Pid, "VmRSS:")
	t.Logf("after a 30 MB prompt: RSS %d KiB, peak %d KiB", rss, vmHWM(t, p.cmd.Process.Pid))
	assert.Less(t, rss, 120<<10, "the prompt's copies were kept after its turn")
	p.close()
}

// Verify that the memory of a huge prompt refused at arrival (an image over
// the per-image limit) is given back too, as an answered one's is (it was
// kept: only the loop's steps gave memory back).
func TestFiles_refusedPromptMemoryGivenBack(t *testing.T) {
	t.Parallel()
	p := startProcess(t, nil, "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"ok"}]}`))
	sid := p.newSession()
	data := base64.StdEncoding.EncodeToString(make([]byte, 28<<20))
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"image","mimeType":"image/png","data":%q}]}}`, sid, data))
	data = ""
	_, r := p.updatesUntil(2)
	require.NotNil(t, r.Error, "an image over 20 MiB")
	// The next step runs once the loop has given the refused one's memory back.
	p.send(prompt(3, sid, "small"))
	_, r = p.updatesUntil(3)
	require.Nil(t, r.Error)
	rss := procStatusKB(t, p.cmd.Process.Pid, "VmRSS:")
	t.Logf("after a refused 37 MB prompt: RSS %d KiB, peak %d KiB", rss, vmHWM(t, p.cmd.Process.Pid))
	assert.Less(t, rss, 100<<10, "the refused prompt's copies were kept")
	p.close()
}

// Verify that run_command's timeout_ms is bounded: a huge or negative one
// fails the call with a message saying the range, and runs nothing.
func TestFiles_commandTimeoutBounded(t *testing.T) {
	t.Parallel()
	results, _ := runToolCalls(t, inProcess, `{}`, nil,
		[2]string{"run_command", `{"command":"touch ran","timeout_ms":9223372036854775807}`},
		[2]string{"run_command", `{"command":"touch ran","timeout_ms":-5}`})
	require.Len(t, results, 2)
	assert.Equal(t, "failed", results[0].status)
	assert.Contains(t, results[0].text, "timeout_ms may be at most 3600000")
	assert.Equal(t, "failed", results[1].status)
	assert.Contains(t, results[1].text, "timeout_ms must be positive")
}

// Verify that FIFOs in the tree (a file, a .gitignore at the root and in a
// directory) are skipped by find_files and search_text, never opened for
// good; and that a cancel ends a read of a huge file (a 100 GiB sparse
// file whose text ends early), by read_file and by search_text, at once.
func TestFiles_fifosAndHugeFilesInTheTree(t *testing.T) {
	t.Parallel()
	t.Run("fifos", func(t *testing.T) {
		t.Parallel()
		fixture := writeFixture(t,
			`{"chunks":[{"toolCall":{"id":"s","name":"search_text","input":{"pattern":"needle"}}},{"toolCall":{"id":"f","name":"find_files","input":{"pattern":"**/*.go"}}}]}`,
			`{"expect":"sub/b.go","chunks":[{"text":"Found."}]}`)
		ta := startAgent(t, "--model", "replay:"+fixture)
		makeTree(t, ta.cwd, map[string]string{"a.go": "needle\n", "sub/b.go": "needle too\n"})
		for _, p := range []string{".gitignore", "sub/.gitignore", "pipe.go"} {
			mkfifo(t, filepath.Join(ta.cwd, p))
		}
		ups, r := ta.turnUpdates(2, ta.newSession(), "search")
		require.Nil(t, r.Error)
		all := strings.Join(ups, "\n")
		assert.Contains(t, all, `a.go:1:needle`)
		assert.Contains(t, all, `sub/b.go:1:needle too`)
	})
	for _, tool := range []string{
		`{"name":"read_file","input":{"path":"huge.txt","line":5000,"limit":20}}`,
		`{"name":"search_text","input":{"pattern":"never there"}}`,
	} {
		t.Run(tool[9:18], func(t *testing.T) {
			t.Parallel()
			fixture := writeFixture(t, `{"chunks":[{"toolCall":{"id":"h",`+tool[1:]+`}]}`)
			ta := startAgent(t, "--model", "replay:"+fixture)
			f, err := os.Create(filepath.Join(ta.cwd, "huge.txt"))
			require.NoError(t, err)
			_, err = f.WriteString(strings.Repeat("a line of text\n", 1000)) // past the binary sniff
			require.NoError(t, err)
			require.NoError(t, f.Truncate(100<<30)) // then zeros, never stored
			require.NoError(t, f.Close())
			sid := ta.newSession()
			ta.send(prompt(2, sid, "read the huge file"))
			ta.await(`{"params":{"update":{"sessionUpdate":"tool_call"}}}`)
			ta.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
			_, r := ta.updatesUntil(2)
			require.Nil(t, r.Error)
			assert.Equal(t, "cancelled", stopReason(t, r))
		})
	}
}
