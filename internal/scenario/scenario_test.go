// scenario_test.go checks the file format, the variables, update and
// record against a small fake agent; the goldens of the repository root
// run every scenario feature against acpbridge itself.

package scenario

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse_faults(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"-- transcript --\n> {}\n", "s.txtar: no -- flags -- section"},
		{"-- flags --\n", "s.txtar: no -- transcript -- section"},
		{"-- flags --\n-- transcript --\n> {}\n< {not json}\n", "s.txtar:4: the < line is not one JSON value"},
		{"-- flags --\n-- transcript --\n> {} {}\n", "s.txtar:3: the > line is not one JSON value: more than one value"},
		{"-- flags --\n-- transcript --\nsend {}\n", `s.txtar:3: a transcript line starts with > (send), < (expect), <* (expect any number), >! (send as it is), close or #, not "send {}"`},
		{"-- flags --\n-- transcript --\n< {\"text\":\"costs $5\"}\n", "s.txtar:3: \"costs $5\": a $ starts a variable"},
		{"-- flags --\n-- flags --\n-- transcript --\n", `s.txtar:2: the section "flags" appears twice`},
		{"-- flags --\n-- ../x --\n-- transcript --\n", `s.txtar:2: the section "../x" does not name a file inside the run`},
		{"-- flags --\n-- cwd/ --\n-- transcript --\n", `s.txtar:2: the section "cwd/" names no file`},
		{"-- flags --\n-- transcript --\n<* {}\n> {}\n", "s.txtar:3: a <* line must be followed by a < line"},
		{"-- flags --\n-- transcript --\n<* {}\n", "s.txtar:3: a <* line must be followed by a < line"},
	} {
		_, err := Parse("s.txtar", []byte(c.file))
		if assert.Error(t, err, c.file) {
			assert.Contains(t, err.Error(), c.want, c.file)
		}
	}
}

func TestMatch(t *testing.T) {
	v := newVars()
	v.set("CWD", "/w")
	ok := func(want, got string) {
		t.Helper()
		w, err := decode([]byte(want))
		require.NoError(t, err)
		g, err := decode([]byte(got))
		require.NoError(t, err)
		m := v.match("", w, g)
		if assert.Nil(t, m, "%s vs %s", want, got) {
			v.commit()
		} else {
			v.drop()
		}
	}
	differs := func(want, got, at string) {
		t.Helper()
		w, _ := decode([]byte(want))
		g, _ := decode([]byte(got))
		m := v.match("", w, g)
		v.drop()
		if assert.NotNil(t, m, "%s vs %s", want, got) {
			assert.Equal(t, at, m.path)
		}
	}
	ok(`{"a":"$S","b":1}`, `{"b":1.0,"a":"x"}`)
	ok(`{"a":"$S"}`, `{"a":"x"}`)
	differs(`{"a":"$S"}`, `{"a":"y"}`, ".a")
	ok(`{"id":"$N"}`, `{"id":7}`)
	differs(`{"id":"$N"}`, `{"id":"7"}`, ".id")
	ok(`{"p":"$CWD/a.txt","q":"$$HOME"}`, `{"p":"/w/a.txt","q":"$HOME"}`)
	ok(`{"a":"$ANY","$REST":true}`, `{"a":[1,2],"extra":{}}`)
	differs(`{"a":1}`, `{"a":1,"extra":2}`, ".extra")
	differs(`{"a":1,"b":2}`, `{"a":1}`, ".b")
	differs(`{"a":[1,2]}`, `{"a":[1,2,3]}`, ".a")
	differs(`{"a":[{"t":"x"}]}`, `{"a":[{"t":"y"}]}`, ".a[0].t")
	// A line that fails binds nothing.
	differs(`{"a":"$FRESH","b":1}`, `{"a":"z","b":2}`, ".b")
	_, bound := v.get("FRESH")
	assert.False(t, bound)
	m := v.match("", map[string]any{"a": "in $UNBOUND"}, map[string]any{"a": "x"})
	require.NotNil(t, m)
	assert.ErrorContains(t, m.err, "$UNBOUND is used")
}

func TestSubstitute(t *testing.T) {
	v := newVars()
	v.set("CWD", "/w")
	v.set("REQ_1", json.Number("3"))
	v.set("S", "sess_x")
	got, err := v.substitute(`{"id":"$REQ_1","b":{"sessionId":"$S","cwd":"$CWD/sub","t":"$$5 <a>"}}`)
	require.NoError(t, err)
	assert.Equal(t, `{"id":3,"b":{"sessionId":"sess_x","cwd":"/w/sub","t":"$5 <a>"}}`, got)
	_, err = v.substitute(`{"a":"$NOPE"}`)
	assert.ErrorContains(t, err, "$NOPE is sent before any < line bound it")
}

func TestGeneralize(t *testing.T) {
	v := newVars()
	v.set("CWD", "/work")
	gen := func(line string, fromAgent bool) string {
		t.Helper()
		s, err := v.generalize([]byte(line), nil, fromAgent)
		require.NoError(t, err)
		return s
	}
	// The client's own ids stay; the agent's become variables.
	assert.Equal(t, `{"id":1,"method":"session/load","params":{"sessionId":"mine"}}`, gen(`{"id":1,"method":"session/load","params":{"sessionId":"mine"}}`, false))
	assert.Equal(t, `{"id":1,"error":{"data":{"sessionId":"mine"}}}`, gen(`{"id":1,"error":{"data":{"sessionId":"mine"}}}`, true))
	assert.Equal(t, `{"id":2,"result":{"sessionId":"$SESSION"}}`, gen(`{"id":2,"result":{"sessionId":"sess_1"}}`, true))
	assert.Equal(t, `{"method":"u","params":{"sessionId":"$SESSION","messageId":"$MSG_1","text":"in $CWD/a, $$HOME, $SESSION, sess_10","updatedAt":"$ANY"}}`,
		gen(`{"method":"u","params":{"sessionId":"sess_1","messageId":"m1","text":"in /work/a, $HOME, sess_1, sess_10","updatedAt":"2026-01-02T03:04:05Z"}}`, true))
	// The agent's request ids become $REQ_n, and the client's answers follow.
	assert.Equal(t, `{"id":"$REQ_1","method":"fs/read_text_file","params":{"path":"$CWD/x"}}`, gen(`{"id":0,"method":"fs/read_text_file","params":{"path":"/work/x"}}`, true))
	assert.Equal(t, `{"id":"$REQ_1","result":{"content":"x"}}`, gen(`{"id":0,"result":{"content":"x"}}`, false))
	// An old line's variables are kept where they still match, whole
	// objects and arrays included; $REST keeps only the members it named.
	old, _ := decode([]byte(`{"a":"$ANY","b":"$OBJ","c":"$OBJ","d":{"x":1,"$REST":true}}`))
	v.set("OBJ", map[string]any{"k": []any{json.Number("1")}})
	got, err := v.generalize([]byte(`{"a":[1,{"z":2}],"b":{"k":[1]},"c":{"k":[2]},"d":{"x":2,"y":3}}`), old, true)
	require.NoError(t, err)
	assert.Equal(t, `{"a":"$ANY","b":"$OBJ","c":{"k":[2]},"d":{"x":2,"$REST":true}}`, got)
	// Keys are escaped too.
	assert.Equal(t, `{"$$k":1}`, gen(`{"$k":1}`, true))
}

// fakeAgent answers each request line with {"id":ID,"result":{"echo":METHOD}},
// says "bye" to its stderr and exits with status at the end of its input.
func fakeAgent(status int, extra ...string) func([]string, Env) (*Agent, error) {
	return func(flags []string, env Env) (*Agent, error) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer outW.Close()
			sc := bufio.NewScanner(inR)
			for sc.Scan() {
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				if json.Unmarshal(sc.Bytes(), &m) != nil || m.Method == "exit" {
					return
				}
				fmt.Fprintf(outW, `{"jsonrpc":"2.0","id":%s,"result":{"echo":%q,"flags":%q}}`+"\n", m.ID, m.Method, strings.Join(flags, " "))
			}
			for _, l := range extra {
				fmt.Fprintln(outW, l)
			}
		}()
		return &Agent{Stdin: inW, Stdout: outR,
			Wait:   func() int { <-done; return status },
			Kill:   func() { inW.Close(); outR.Close() },
			Stderr: func() string { return "bye" }}, nil
	}
}

func runText(t *testing.T, file string, opt Options) Result {
	t.Helper()
	sc, err := Parse("s.txtar", []byte(file))
	require.NoError(t, err)
	if opt.Timeout == 0 {
		opt.Timeout = 20 * time.Second
	}
	return Run(sc, opt)
}

const echoScenario = `Echo.
-- flags --
--x $DIR/f
-- f --
data
-- transcript --
> {"jsonrpc":"2.0","id":1,"method":"a"}
< {"jsonrpc":"2.0","id":1,"result":{"echo":"a","flags":"--x $DIR/f"}}
> {"jsonrpc":"2.0","id":2,"method":"b"}
< {"jsonrpc":"2.0","id":2,"result":{"echo":"$M","$REST":true}}
`

func TestRun_fakeAgent(t *testing.T) {
	res := runText(t, echoScenario, Options{Start: fakeAgent(0)})
	require.NoError(t, res.Err)
	assert.Equal(t, 2, res.Lines)

	res = runText(t, echoScenario, Options{Start: fakeAgent(3)})
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "s.txtar: the agent exited with status 3")
	assert.Contains(t, res.Err.Error(), "stderr ends:\n    bye")

	res = runText(t, echoScenario, Options{Start: fakeAgent(0, `{"jsonrpc":"2.0","method":"late"}`)})
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), `the agent sent line 3 after the transcript's last line: {"jsonrpc":"2.0","method":"late"}`)

	// After an editor line, a session/update that comes late (a title) is
	// shown as an editor shows it; anything else still fails.
	title := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"session_info_update","title":"Late"}}}`
	withEditor := strings.Replace(echoScenario, "-- transcript --\n", "-- transcript --\neditor\n", 1)
	res = runText(t, echoScenario, Options{Start: fakeAgent(0, title)})
	require.Error(t, res.Err, "without an editor line, a late update is a difference")
	res = runText(t, withEditor, Options{Start: fakeAgent(0, title)})
	require.NoError(t, res.Err)
	res = runText(t, withEditor, Options{Start: fakeAgent(0, title, `{"jsonrpc":"2.0","method":"late"}`)})
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), `the agent sent line 4 after the transcript's last line: {"jsonrpc":"2.0","method":"late"}`)

	// The agent ends its output while a line is awaited.
	early := strings.Replace(echoScenario, `"method":"b"`, `"method":"exit"`, 1)
	res = runText(t, early, Options{Start: fakeAgent(4)})
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "s.txtar:10: the agent ended its output (exit status 4) while the scenario waited for < ")

	// A line that never comes: the timeout names it (long enough that the
	// lines before it arrive on a loaded machine).
	never := echoScenario + "< {\"never\":true}\n"
	res = runText(t, never, Options{Start: fakeAgent(0), Timeout: 2 * time.Second})
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), `s.txtar:11: timed out after 2s waiting for < {"never":true}`)
}

func TestRun_hostileAgents(t *testing.T) {
	// An agent that writes something that is not JSON.
	res := runText(t, echoScenario, Options{Start: func(flags []string, env Env) (*Agent, error) {
		a, err := fakeAgent(0)(flags, env)
		a.Stdout = io.MultiReader(strings.NewReader("Starting up...\n"), a.Stdout)
		return a, err
	}})
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "s.txtar:8: the agent's line 1 is not JSON")
	assert.Contains(t, res.Err.Error(), "Starting up...")

	// An agent that never reads its input, and one that never exits.
	stuck := func(flags []string, env Env) (*Agent, error) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		return &Agent{Stdin: inW, Stdout: outR, Wait: func() int { select {} },
			Kill: func() { inR.Close(); outW.Close() }, Stderr: func() string { return "" }}, nil
	}
	res = runText(t, echoScenario, Options{Start: stuck, Timeout: 50 * time.Millisecond})
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "s.txtar:7: the agent read none of this line for 50ms")
	quiet := func(flags []string, env Env) (*Agent, error) {
		a, _ := fakeAgent(0)(flags, env)
		a.Wait = func() int { select {} }
		return a, nil
	}
	res = runText(t, echoScenario, Options{Start: quiet, Timeout: time.Second}) // its answers come first, on a loaded machine too
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "the agent closed its output but did not exit within 1s")
}

func TestRun_update(t *testing.T) {
	stale := strings.Replace(echoScenario, `{"echo":"a","flags":"--x $DIR/f"}`, `{"echo":"old"}`, 1)
	stale = strings.Replace(stale, "< {\"jsonrpc\":\"2.0\",\"id\":2", "# a comment kept\n< {\"jsonrpc\":\"2.0\",\"id\":2", 1)
	res := runText(t, stale, Options{Start: fakeAgent(0, `{"jsonrpc":"2.0","method":"late"}`), Update: true})
	require.NoError(t, res.Err)
	want := strings.Replace(echoScenario, "< {\"jsonrpc\":\"2.0\",\"id\":2", "# a comment kept\n< {\"jsonrpc\":\"2.0\",\"id\":2", 1)
	want = strings.Replace(want, `{"echo":"$M","$REST":true}`, `{"echo":"$M","$REST":true}`, 1)
	assert.Equal(t, want+"close\n< {\"jsonrpc\":\"2.0\",\"method\":\"late\"}\n", string(res.Updated))
	// The rewritten file passes.
	res = runText(t, string(res.Updated), Options{Start: fakeAgent(0, `{"jsonrpc":"2.0","method":"late"}`)})
	assert.NoError(t, res.Err)
}

func TestRecorder(t *testing.T) {
	dir := t.TempDir()
	fixture := filepath.Join(dir, "model.jsonl")
	require.NoError(t, os.WriteFile(fixture, []byte(`{"chunks":[{"text":"hi"}]}`+"\n"), 0o644))
	rec := &Recorder{}
	rec.Note(false, []byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/home/u/p"}}`))
	rec.Note(true, []byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s9"}}`))
	rec.Note(false, []byte(`not json`))
	rec.Closed()
	rec.Note(true, []byte(`{"jsonrpc":"2.0","method":"x","params":{"sessionId":"s9","path":"/home/u/p/a"}}`))
	got := string(rec.Scenario([]string{"/usr/bin/acpbridge", "--model=openai:gpt", "--record", fixture, "-state-dir", "/s", "--log-level", "debug"}))
	_, after, _ := strings.Cut(got, "-- flags --\n")
	assert.Equal(t, `--log-level debug --model replay:$DIR/model.jsonl --state-dir $STATE
-- model.jsonl --
{"chunks":[{"text":"hi"}]}
-- transcript --
> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD"}}
< {"jsonrpc":"2.0","id":1,"result":{"sessionId":"$SESSION"}}
>! not json
close
< {"jsonrpc":"2.0","method":"x","params":{"sessionId":"$SESSION","path":"$CWD/a"}}
`, after)
	_, err := Parse("r.txtar", []byte(got))
	assert.NoError(t, err)
}

// Verify a recording of another agent: its arguments are its own (a
// flags/NAME section, not acpbridge's flags), and the file says the
// command that runs it, which names the agent.
func TestRecorder_anotherAgent(t *testing.T) {
	rec := &Recorder{Self: "/usr/bin/acpbridge", Deterministic: true}
	rec.Note(false, []byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w"}}`))
	rec.Note(true, []byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"p1"}}`))
	cmd := []string{"/opt/peers/peer", "--verbose", "x"}
	sc, err := Parse("r.txtar", rec.Scenario(cmd))
	require.NoError(t, err)
	assert.Empty(t, sc.Flags, "acpbridge's flags: none")
	own, ok := sc.AgentFlags("peer")
	require.True(t, ok)
	assert.Equal(t, []string{"--verbose", "x"}, own)
	assert.Contains(t, sc.Comment, "Run it with: acpbridge scenario run --agent peer=/opt/peers/peer FILE")
	assert.Equal(t, "acpbridge scenario run --agent 'peer=/opt/my peers/peer' s.txtar", RunHint([]string{"/opt/my peers/peer"}, "/usr/bin/acpbridge", "s.txtar"))
	assert.Equal(t, "acpbridge scenario run s.txtar", RunHint([]string{"/usr/bin/acpbridge", "--fanout"}, "/usr/bin/acpbridge", "s.txtar"))
}

// probe checks, at each write, that the recorder already noted the line.
type probe struct {
	t   *testing.T
	rec *Recorder
}

func (p probe) Write(b []byte) (int, error) {
	p.rec.mu.Lock()
	defer p.rec.mu.Unlock()
	last := p.rec.events[len(p.rec.events)-1]
	assert.Equal(p.t, strings.TrimSuffix(string(b), "\n"), string(last.line), "noted before it passed on")
	return len(b), nil
}

// A line is noted before it passes on: the client's answer to it (noted by
// the other direction) can only come after it in the scenario.
func TestRecorder_notesBeforePassing(t *testing.T) {
	rec := &Recorder{}
	require.NoError(t, rec.Pipe(probe{t, rec}, strings.NewReader(`{"id":1,"result":{}}`+"\n"), true))
	require.NoError(t, rec.Pipe(probe{t, rec}, strings.NewReader(`{"id":2,"method":"m"}`+"\n"), false))
	assert.Len(t, rec.events, 2)
}

// An include splices another file's transcript in; a difference in it names
// both the include line and the included file's line, and --update keeps
// the include as it is.
func TestInclude(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pre.txtar"), []byte("-- transcript --\n"+
		`> {"jsonrpc":"2.0","id":1,"method":"a"}`+"\n"+
		`< {"jsonrpc":"2.0","id":1,"result":{"echo":"a","$REST":true}}`+"\n"), 0o644))
	main := "-- flags --\n-- transcript --\ninclude pre.txtar\n" +
		`> {"jsonrpc":"2.0","id":2,"method":"b"}` + "\n" +
		`< {"jsonrpc":"2.0","id":2,"result":{"echo":"b","$REST":true}}` + "\n"
	path := filepath.Join(dir, "s.txtar")
	sc, err := Parse(path, []byte(main))
	require.NoError(t, err)
	require.Len(t, sc.Steps, 4)
	assert.Equal(t, filepath.Join(dir, "pre.txtar")+":3", sc.Steps[1].From)
	res := Run(sc, Options{Start: fakeAgent(0), Timeout: 20 * time.Second})
	require.NoError(t, res.Err)
	res = Run(sc, Options{Start: fakeAgent(0), Timeout: 20 * time.Second, Update: true})
	require.NoError(t, res.Err)
	assert.Contains(t, string(res.Updated), "-- transcript --\ninclude pre.txtar\n> ")

	_, err = Parse(path, []byte("-- flags --\n-- transcript --\ninclude nope.txtar\n"))
	assert.ErrorContains(t, err, "s.txtar:3: include: open")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pre.txtar"), []byte("-- transcript --\n"+
		`> {"jsonrpc":"2.0","id":1,"method":"a"}`+"\n"+
		`< {"jsonrpc":"2.0","id":1,"result":{"echo":"z","$REST":true}}`+"\n"), 0o644))
	sc, err = Parse(path, []byte(main))
	require.NoError(t, err)
	res = Run(sc, Options{Start: fakeAgent(0), Timeout: 20 * time.Second})
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "s.txtar:3: the agent's line 1 differs at .result.echo (included: "+filepath.Join(dir, "pre.txtar")+":3)")
}

// Parse takes any bytes without panicking, and what it accepts formats back
// to an archive it accepts again.
func FuzzParse(f *testing.F) {
	f.Add([]byte(echoScenario))
	f.Add([]byte("-- flags --\n-- transcript --\n> {\"a\":\"$X\"}\n< {\"$REST\":true,\"b\":[\"$ANY\"]}\n>! raw\nclose\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sc, err := Parse("f.txtar", b)
		if err != nil {
			return
		}
		again, err := Parse("f.txtar", sc.Format())
		require.NoError(t, err)
		assert.Equal(t, len(sc.Steps), len(again.Steps))
	})
}

// Verify that the recorder reads a loaded session's log only as a plain
// file named by a plain id: a client's "../" id or a log that is a link
// does not put another file into the scenario.
func TestReadSessionLog_refusesPathsAndLinks(t *testing.T) {
	state := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(state, "sessions"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(state, "sessions", "s1.jsonl"), []byte("log\n"), 0o600))
	secret := filepath.Join(t.TempDir(), "secret.jsonl")
	require.NoError(t, os.WriteFile(secret, []byte("secret\n"), 0o600))
	b, err := readSessionLog(state, "s1")
	require.NoError(t, err)
	assert.Equal(t, "log\n", string(b))
	_, err = readSessionLog(state, "../../"+strings.TrimSuffix(secret, ".jsonl"))
	assert.ErrorContains(t, err, "is not a session id acpbridge would store")
	require.NoError(t, os.Symlink(secret, filepath.Join(state, "sessions", "s2.jsonl")))
	_, err = readSessionLog(state, "s2")
	assert.ErrorContains(t, err, "is not a regular file")
}

// Verify that the one-line synopsis of each command in --help names every
// flag the command accepts (as its --help lists them).
func TestUsage_synopsisNamesEveryFlag(t *testing.T) {
	synopsis := usage[:strings.Index(usage, "\n\n")]
	for _, command := range []string{"run", "serve", "record", "model"} {
		var stdout, stderr strings.Builder
		assert.Equal(t, 0, Main(context.Background(), []string{command, "--help"}, "acpbridge", "v", strings.NewReader(""), &stdout, &stderr), command)
		flags := stdout.String()[strings.Index(stdout.String(), "flags:\n"):]
		line := ""
		for _, l := range strings.Split(synopsis, "\n") {
			if strings.Contains(l, "scenario "+command+" ") {
				line = l
			} else if line != "" && strings.HasPrefix(l, "      ") {
				line += l
			} else if line != "" {
				break
			}
		}
		require.NotEmpty(t, line, command)
		names := regexp.MustCompile(`(?m)^  (--[a-z-]+)`).FindAllStringSubmatch(flags, -1)
		require.NotEmpty(t, names, command)
		for _, n := range names {
			assert.Regexp(t, regexp.QuoteMeta(n[1])+`[\] ]`, line, "scenario %s's synopsis names %s", command, n[1])
		}
	}
}
