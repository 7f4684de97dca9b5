// scenario_test.go tests `acpbridge scenario` as a user runs it: mutated
// goldens fail with a diff at the mutated line, a scenario runs against
// another agent build with --agent, a session recorded through `scenario
// record` (the test is the editor) replays, and bad files and agents that
// end early are reported with the file, the line and the agent's stderr.

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/scenario"
)

// transcriptLines returns the lines of a scenario file and the file line
// numbers of its < lines.
func transcriptLines(t *testing.T, path string) ([]string, []int) {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	var expects []int
	for i, l := range lines {
		if strings.HasPrefix(l, "< ") {
			expects = append(expects, i)
		}
	}
	return lines, expects
}

func TestScenario_mutationsFailAtTheLine(t *testing.T) {
	t.Parallel()
	const golden = "fixtures/tool_allow_once.txtar"
	lines, expects := transcriptLines(t, golden)
	require.Greater(t, len(expects), 8)
	// The completed tool_call_update and the message after it.
	var done int
	for _, i := range expects {
		if strings.Contains(lines[i], `"status":"completed"`) {
			done = i
		}
	}
	require.NotZero(t, done)
	next := done + 1
	for _, m := range []struct {
		name   string
		mutate func([]string) []string
		line   int // 0-based index of the line the failure must name
		says   string
	}{
		{"changed text", func(l []string) []string {
			l[next] = strings.Replace(l[next], `"Written."`, `"Written!"`, 1)
			return l
		}, next, `differs at .params.update.content.text` + "\n" + `  want: "Written!"` + "\n" + `  got:  "Written."`},
		{"missing update", func(l []string) []string {
			return append(l[:done:done], l[done+1:]...)
		}, done, `differs at .params.update.sessionUpdate` + "\n" + `  want: "agent_message_chunk"` + "\n" + `  got:  "tool_call_update"`},
		{"extra update", func(l []string) []string {
			return append(l[:done:done], append([]string{l[done]}, l[done:]...)...)
		}, done + 1, `differs at .params.update.sessionUpdate` + "\n" + `  want: "tool_call_update"` + "\n" + `  got:  "agent_message_chunk"`},
		{"reordered pair", func(l []string) []string {
			l[done], l[next] = l[next], l[done]
			return l
		}, done, `differs at .params.update.sessionUpdate` + "\n" + `  want: "agent_message_chunk"` + "\n" + `  got:  "tool_call_update"`},
	} {
		t.Run(m.name, func(t *testing.T) {
			mutated := m.mutate(append([]string(nil), lines...))
			sc, err := scenario.Parse(golden, []byte(strings.Join(mutated, "\n")))
			require.NoError(t, err)
			res := scenario.Run(sc, goldenOptions(t))
			require.Error(t, res.Err)
			assert.True(t, scenario.IsFailure(res.Err))
			msg := res.Err.Error()
			assert.True(t, strings.HasPrefix(msg, fmt.Sprintf("%s:%d: the agent's line ", golden, m.line+1)), "the failure names the line:\n%s", msg)
			assert.Contains(t, msg, m.says)
			assert.Contains(t, msg, "bindings: $CWD=")
		})
	}
}

func TestScenario_againstAnotherBuild(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	other := filepath.Join(t.TempDir(), "other-agent")
	cmd := exec.Command("go", "build", "-trimpath", "-o", other, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	files, err := filepath.Glob("fixtures/*.txtar")
	require.NoError(t, err)
	// A bound for a loaded machine, where an agent's end after its stdin
	// closes can take longer than the default 10 s.
	run := exec.Command(bin, append([]string{"scenario", "run", "--timeout", "60s", "--agent", other + " $FLAGS"}, files...)...)
	out, err = run.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, len(files), strings.Count(string(out), "\nok   ")+boolInt(strings.HasPrefix(string(out), "ok   ")), "%s", out)
	assert.NotContains(t, string(out), "FAIL")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestScenario_recordThenRun is an editor session through `scenario
// record`: the file it writes replays with `scenario run`.
func TestScenario_recordThenRun(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	fixture := filepath.Join(dir, "model.jsonl")
	require.NoError(t, os.WriteFile(fixture, []byte(
		`{"chunks":[{"text":"Let me look."},{"toolCall":{"id":"r1","name":"read_file","input":{"path":"notes.txt"}}}]}`+"\n"+
			`{"expect":"remember","chunks":[{"text":"It says: remember $5."}]}`+"\n"), 0o644))
	cwd := filepath.Join(dir, "work")
	require.NoError(t, os.Mkdir(cwd, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte("remember $5\n"), 0o644))
	out := filepath.Join(dir, "session.txtar")
	cmd := exec.Command(bin, "scenario", "record", "--out", out, "--",
		bin, "--model", "replay:"+fixture, "--state-dir", filepath.Join(dir, "state"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	sid := recordOneTurn(t, cmd, cwd, "what do my notes say?")
	assert.Contains(t, stderr.String(), "not captured: the workspace files the tool calls named ("+filepath.Join(cwd, "notes.txt")+")",
		"the recorder says what the scenario lacks")

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	file := string(b)
	assert.Contains(t, file, "-- model.jsonl --\n")
	assert.Contains(t, file, "--model replay:$DIR/model.jsonl --state-dir $STATE\n")
	assert.Contains(t, file, `"sessionId":"$SESSION"`)
	assert.NotContains(t, file, sid)
	assert.NotContains(t, file, cwd)
	// The workspace file the model read is the user's to add: without it
	// the run fails where the tool's result differs; with it, it passes.
	res, err := scenarioRun(bin, out).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(res), "FAIL "+out)
	withFile := strings.Replace(file, "-- transcript --\n", "-- cwd/notes.txt --\nremember $5\n-- transcript --\n", 1)
	require.NoError(t, os.WriteFile(out, []byte(withFile), 0o644))
	res, err = scenarioRun(bin, out).CombinedOutput()
	require.NoError(t, err, "%s\n%s", res, withFile)
	assert.Contains(t, string(res), "ok   "+out)
}

func TestScenario_badFilesAndAgents(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o755))
		return p
	}
	good := "-- flags --\n-- transcript --\n" +
		`> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}` + "\n" +
		`< {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"$REST":true}}` + "\n"
	notJSON := write("notjson.txtar", "-- flags --\n-- transcript --\n< {oops\n")
	unbound := write("unbound.txtar", good+`> {"jsonrpc":"2.0","id":1,"method":"session/cancel","params":{"sessionId":"$NEVER"}}`+"\n")
	noSection := write("nosection.txtar", "just a comment\n")
	early := write("early.sh", "#!/bin/sh\necho 'the agent gave up: no model' >&2\nexit 3\n")
	ok := write("good.txtar", good)

	res, err := scenarioRun(bin, notJSON, unbound, noSection, ok).CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, 1, err.(*exec.ExitError).ExitCode())
	out := string(res)
	assert.Contains(t, out, notJSON+":3: the < line is not one JSON value")
	assert.Contains(t, out, unbound+":5: the variable $NEVER is sent before any < line bound it")
	assert.Contains(t, out, noSection+": no -- flags -- section")
	assert.Contains(t, out, "ok   "+ok)
	assert.Contains(t, out, "1 passed, 3 failed")

	res, err = scenarioRun(bin, "--agent", early, ok).CombinedOutput()
	require.Error(t, err)
	// It ends before it reads the first line or before it answers it,
	// whichever comes first: either way the status and stderr are shown.
	assert.Regexp(t, `\Q`+ok+`\E:[34]: the agent ended (its output )?\(exit status 3\)`, string(res))
	assert.Contains(t, string(res), "the agent gave up: no model")

	res, err = exec.Command(bin, "scenario", "bogus").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(res), `unknown command "bogus"`)
}

// The scenario doc's example is fixtures/readme_example.txtar, word for
// word, and the README's is its beginning, so the example a user copies is
// one TestGolden runs.
func TestScenario_readmeExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/scenarios.md")
	require.NoError(t, err)
	example, err := os.ReadFile("fixtures/readme_example.txtar")
	require.NoError(t, err)
	assert.Contains(t, string(doc), "```\n"+string(example)+"```\n")
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	i := strings.Index(string(example), "-- flags --")
	j := strings.Index(string(example), "# > is the client")
	require.True(t, i >= 0 && j > i)
	assert.Contains(t, string(readme), string(example)[i:j])
}

// Verify the run command's small promises: --help on stdout with status 0
// and every flag's default, a timeout without a unit refused saying so,
// flags after the file names, a total line, and a run whose result does
// not depend on the user's ACPBRIDGE_* settings.
func TestScenario_commandLine(t *testing.T) {
	bin := binary(t)
	out, err := exec.Command(bin, "scenario", "run", "--help").Output()
	require.NoError(t, err, "--help exits 0")
	assert.Contains(t, string(out), "-timeout")
	assert.Contains(t, string(out), "default 10s")
	res, err := scenarioRun(bin, "--timeout", "3", "fixtures/plain_turn.txtar").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(res), `"3" is not a duration: give it with a unit, such as 3s or 500ms`)
	cmd := scenarioRun(bin, "fixtures/plain_turn.txtar", "--timeout", "20s", "fixtures/thought_turn.txtar")
	cmd.Env = append(os.Environ(), "ACPBRIDGE_MODEL=replay:/nonexistent.jsonl", "ACPBRIDGE_PASS_ENV=X")
	res, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", res)
	assert.Contains(t, string(res), "2 passed, 0 failed")
}

// Verify that --update refuses to write a turn that now ends in an error
// where the file had a result, and writes it with --accept-errors.
func TestScenario_updateQuestionsErrors(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(dir, "preambles"), os.DirFS("fixtures/preambles")))
	file := filepath.Join(dir, "errturn.txtar")
	require.NoError(t, os.WriteFile(file, []byte(`A turn whose model call now fails.
-- flags --
--model replay:$DIR/replay.jsonl --state-dir $STATE
-- replay.jsonl --
{"expect":"nothing like this","chunks":[{"text":"never"}]}
-- transcript --
include preambles/new_session_plain.txtar
> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"$SESSION","prompt":[{"type":"text","text":"hello"}]}}
< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}
`), 0o644))
	before, _ := os.ReadFile(file)
	res, err := scenarioRun(binary(t), "--update", file).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(res), "the agent answered request 2 with error 1005")
	assert.Contains(t, string(res), "--accept-errors")
	after, _ := os.ReadFile(file)
	assert.Equal(t, string(before), string(after), "the file is left as it was")
	res, err = scenarioRun(binary(t), "--update", "--accept-errors", file).CombinedOutput()
	require.NoError(t, err, "%s", res)
	after, _ = os.ReadFile(file)
	assert.Contains(t, string(after), `"error":{"code":1005`)
}

// Verify that a recording made with a real model (a fake OpenAI-compatible
// endpoint here) through `scenario record` replays offline as it is: the
// provider's flags are dropped, the fixture it recorded replays, and the
// model option, which names another model on replay, is left free.
func TestScenario_realModelRecordingReplays(t *testing.T) {
	bin := binary(t)
	f := newFakeOpenAI(t, fakeReply{file: "text.sse"})
	dir := t.TempDir()
	cwd := filepath.Join(dir, "work")
	require.NoError(t, os.Mkdir(cwd, 0o755))
	out := filepath.Join(dir, "session.txtar")
	cmd := exec.Command(bin, "scenario", "record", "--out", out, "--",
		bin, "--model", "openai:gpt-test", "--base-url", f.srv.URL+"/v1", "--models", "gpt-test,gpt-other",
		"--record", filepath.Join(dir, "model.jsonl"), "--state-dir", filepath.Join(dir, "state"))
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+testKey)
	recordOneTurn(t, cmd, cwd, "hi")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(b), "-- flags --\n--model replay:$DIR/model.jsonl --state-dir $STATE\n", "the provider's flags dropped")
	res, err := scenarioRun(bin, out).CombinedOutput()
	require.NoError(t, err, "the recording replays offline:\n%s", res)
}

// recordOneTurn drives `scenario record` (cmd, not started) as an editor
// would: initialize and session/new pipelined in one write, then a prompt
// whose turn must end end_turn; then it closes stdin and waits for the
// recorder. It returns the session's id.
func recordOneTurn(t *testing.T, cmd *exec.Cmd, cwd, text string) string {
	t.Helper()
	return processTurn(t, cmd, cwd, "", text)
}

// processTurn is one process of a client that starts a process per prompt
// (as acpx does): initialize, session/new (or session/load of load), one
// prompt, stdin closed. It returns the session's id.
func processTurn(t *testing.T, cmd *exec.Cmd, cwd, load, text string) string {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	r := bufio.NewReader(stdout)
	read := func(id int) map[string]any {
		t.Helper()
		for {
			line, err := r.ReadBytes('\n')
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, json.Unmarshal(line, &m))
			if m["method"] == nil && m["id"] == float64(id) {
				return m
			}
		}
	}
	open := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, cwd)
	if load != "" {
		open = fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":%q,"cwd":%q,"mcpServers":[]}}`, load, cwd)
	}
	fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`+"\n%s\n", open)
	read(0)
	sid := load
	if res := read(1)["result"].(map[string]any); load == "" {
		sid = res["sessionId"].(string)
	}
	fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}}`+"\n", sid, text)
	assert.Equal(t, "end_turn", read(2)["result"].(map[string]any)["stopReason"])
	stdin.Close()
	io.Copy(io.Discard, r)
	require.NoError(t, cmd.Wait())
	return sid
}

// Verify the comparison the project exists for: acpbridge, acpbridge
// --fanout and a multi-session agent (testdata/multiagent), each started
// with its own command line, get the same model answers from the fixture the run serves
// as an OpenAI-compatible endpoint (acpbridge through its OpenAI client);
// both pass the one file; the report names each agent, gives its figures,
// and says where their lines differ, chunks joined and ids as variables.
func TestScenario_compareTwoAgents(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	other := buildMultiAgent(t, filepath.Join(t.TempDir(), "multi agent")) // a space, quoted below
	cmd := scenarioRun(bin, "--timeout", "60s", "--agent", bin, "--agent", fmt.Sprintf("multi=%q", other), "--agent", "fanout="+bin+" --fanout",
		"testdata/scenarios/compare_text.txtar", "testdata/scenarios/permission_by_kind.txtar", "testdata/scenarios/coding.txtar")
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=sk-users-own-key", "OPENAI_BASE_URL=http://127.0.0.1:9/v1")
	res, _ := cmd.CombinedOutput()
	report := string(res)
	assert.Contains(t, report, "ok   testdata/scenarios/compare_text.txtar [acpbridge]")
	assert.Contains(t, report, "ok   testdata/scenarios/compare_text.txtar [multi]")
	assert.Contains(t, report, "ok   testdata/scenarios/permission_by_kind.txtar [acpbridge]")
	assert.Contains(t, report, "FAIL testdata/scenarios/permission_by_kind.txtar [multi]", "multi writes through the client, whose fs this file's client does not offer")
	assert.Contains(t, report, "ok   testdata/scenarios/compare_text.txtar [fanout]", "acpbridge --fanout gets the file's flags too")
	assert.Contains(t, report, "ok   testdata/scenarios/permission_by_kind.txtar [fanout]")
	for _, agent := range []string{"acpbridge", "multi", "fanout"} {
		assert.Contains(t, report, "ok   testdata/scenarios/coding.txtar ["+agent+"]", "the coding turn passes on every agent that has the tools")
	}
	assert.Contains(t, report, "8 passed, 1 failed")
	assert.Contains(t, report, "| turn 1: model requests | 3 | 3 | 3 |", "coding: the call, one after each tool")
	assert.Contains(t, report, "| turn 1: tokens served (the fixture's usage) | 1426 | 1426 | 1426 |", "the fixture's usage, served to each")
	assert.Contains(t, report, "| turn 1: completion tokens, estimated | 29 | 29 | 29 |", "the same answers, estimated the same way")
	assert.Regexp(t, `\| turn 1: prompt tokens, estimated \| ([0-9]+) \| [0-9]+ \| ([0-9]+) \|`, report, "what each agent sent, estimated")
	assert.Regexp(t, `multi's line 6: only multi sent \{"id":"\$REQ_2","jsonrpc":"2.0","method":"fs/write_text_file"`, report, "where it stopped")
	assert.Regexp(t, `multi failed after its line 6 \(testdata/scenarios/permission_by_kind.txtar:[0-9]+: the agent's line 6 differs at \.result\); the other's [0-9]+ lines after it are not compared`, report,
		"a failed agent's block says where it stopped, not every line of the other")
	assert.Contains(t, report, "| figure | acpbridge | multi | fanout |")
	assert.Contains(t, report, "| runs passed | 1/1 | 0/1 | 1/1 |", "permission_by_kind: multi failed")
	assert.Regexp(t, `\| spawn → initialize answered \(ms\) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|`, report)
	assert.Regexp(t, `\| session/new answered \(ms\) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|`, report)
	assert.Regexp(t, `\| turn 2: answer \(ms\) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|`, report, "two turns")
	assert.Regexp(t, `\| turn 1: model requests \| 1 \| 1 \| 1 \|`, report, "one model call each in compare_text's first turn")
	assert.Regexp(t, `\| turn 1: model requests \| 2 \| – \| 2 \|`, report, "permission_by_kind: the call and the one after the tool; multi failed in its turn")
	assert.Regexp(t, `\| turn 1: agent messages \| 5 \| 3 \| 5 \|`, report)
	assert.Regexp(t, `\| processes \| 1 \| 1 \| [3-9] \|`, report, "acpbridge alone; the router with its children")
	assert.Contains(t, report, `at .result.agentInfo.name: "acpbridge" / "multiagent"`)
	assert.Contains(t, report, `where multi and fanout differ`, "every pair, the second and third too")
	assert.Contains(t, report, "acpbridge and fanout sent the same lines")
	turn := strings.Index(report, "only acpbridge sent")
	handshake := strings.Index(report, ".result.agentCapabilities")
	assert.True(t, turn >= 0 && handshake > turn, "the turns' differences before the handshake's")
	assert.Contains(t, report, `only acpbridge sent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$SESSION","update":{"sessionUpdate":"session_info_update"`)
	assert.NotContains(t, report, ".params.update.content.text", "the same answer from the same model, however each split it")
	assert.NotContains(t, report, "sk-users-own-key")
}

// serveClient plays an editor against `acpbridge scenario serve FILE`: it
// sends initialize, session/new and a prompt with ids of its own (10, 11,
// 12), answers the permission request with answer, and returns the
// agent's lines, the exit status and stderr.
func serveClient(t *testing.T, file, cwd, answer string, args ...string) ([]string, int, string) {
	t.Helper()
	cmd := exec.Command(binary(t), append(append([]string{"scenario", "serve"}, args...), file)...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	br := bufio.NewReader(stdout)
	var got []string
	send := func(s string) { fmt.Fprintln(stdin, s) }
	until := func(pred func(map[string]any) bool) map[string]any {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("the agent's output ended (%v); stderr:\n%s", err, stderr.String())
			}
			got = append(got, line)
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m))
			if pred(m) {
				return m
			}
		}
	}
	isID := func(id float64) func(map[string]any) bool {
		return func(m map[string]any) bool { return m["id"] == id && m["method"] == nil }
	}
	send(`{"jsonrpc":"2.0","id":10,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	until(isID(10))
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":11,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, cwd))
	sid := until(isID(11))["result"].(map[string]any)["sessionId"].(string)
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":12,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"write hello.txt"}]}}`, sid))
	ask := until(func(m map[string]any) bool { return m["method"] == "session/request_permission" || m["error"] != nil })
	if ask["method"] != nil {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%v,"result":{"outcome":{"outcome":"selected","optionId":%q}}}`, ask["id"], answer))
		until(func(m map[string]any) bool { return m["id"] == 12.0 && m["method"] == nil || m["error"] != nil })
	}
	stdin.Close()
	io.Copy(io.Discard, br)
	cmd.Wait()
	return got, cmd.ProcessState.ExitCode(), stderr.String()
}

// Verify `scenario serve`, the agent's side of a file for testing an
// editor: a client that numbers its requests its own way and does as the
// file says gets the file's lines (its ids in the responses, the paths in
// its own workspace) and status 0; one that answers the permission
// otherwise gets an error answer, status 1, and the difference on stderr
// and in the report file.
func TestScenario_serve(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	got, code, stderr := serveClient(t, "fixtures/readme_example.txtar", cwd, "allow_once")
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	require.Len(t, got, 12, "%s", got)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":11,"result":{"sessionId":"session-1"}}`, got[1], "the file's response with the client's id")
	assert.Contains(t, got[7], `"path":"`+cwd+`/hello.txt"`, "$CWD is the client's workspace")
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":12,"result":{"stopReason":"end_turn"}}`, got[11])

	dir := t.TempDir()
	file := filepath.Join(dir, "example.txtar")
	b, err := os.ReadFile("fixtures/readme_example.txtar")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, b, 0o644))
	got, code, stderr = serveClient(t, file, cwd, "reject_once")
	assert.Equal(t, 1, code)
	assert.Contains(t, got[len(got)-1], `"error":{"code":-32603,"message":"acpbridge scenario serve: the client's line differs at .result.outcome.optionId`)
	assert.Contains(t, stderr, "example.txtar:22: the client's line differs at .result.outcome.optionId")
	report, err := os.ReadFile(filepath.Join(dir, "example.serve-report.txt"))
	require.NoError(t, err, "the report file")
	assert.Contains(t, string(report), `want: "allow_once"`)
}

// Verify recording a client that starts a process per prompt (acpx's
// flow, emulated without Node): each process is added to one scenario as
// its next part (--append), after a restart; the load of a session the
// recording did not create embeds its log as a state/ file, and what the
// recorder cannot capture it says; the scenario replays offline; and with
// --deterministic the same conversation records byte for byte the same.
func TestScenario_recordProcessPerPrompt(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	fixture := filepath.Join(dir, "model.jsonl")
	require.NoError(t, os.WriteFile(fixture, []byte(`{"chunks":[{"text":"First."}]}`+"\n"+`{"chunks":[{"text":"Second."}]}`+"\n"+`{"chunks":[{"text":"Third."}]}`+"\n"), 0o644))
	cwd := filepath.Join(dir, "work")
	require.NoError(t, os.Mkdir(cwd, 0o755))
	state := filepath.Join(dir, "state")
	agent := []string{bin, "--model", "replay:" + fixture, "--state-dir", state}
	record := func(out string, args ...string) *exec.Cmd {
		cmd := exec.Command(bin, append(append([]string{"scenario", "record", "--append", "--deterministic", "--out", out}, args...), append([]string{"--"}, agent...)...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		t.Cleanup(func() { t.Logf("recorder's stderr:\n%s", stderr.String()) })
		return cmd
	}
	once := func(out string) string {
		require.NoError(t, os.RemoveAll(state))
		// A session made before the recording: the recording loads it.
		made := exec.Command(agent[0], agent[1:]...)
		made.Env = append(os.Environ(), "ACPBRIDGE_DETERMINISTIC=9")
		before := processTurn(t, made, cwd, "", "made before")
		processTurn(t, record(out), cwd, before, "one")
		sid := processTurn(t, record(out), cwd, "", "two")
		processTurn(t, record(out), cwd, sid, "three")
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		return string(b)
	}
	out := filepath.Join(dir, "acpx.txtar")
	file := once(out)
	assert.Equal(t, 2, strings.Count(file, "\nrestart\n"), "three processes, one scenario")
	i := strings.Index(file, "-- state/sessions/sess_9_1.jsonl --\n")
	require.True(t, i >= 0, "the log of the session loaded first is embedded:\n%s", file)
	stateFile := file[i:strings.Index(file, "-- record/bindings --")]
	assert.Contains(t, stateFile, `"cwd":"$CWD"`)
	assert.Contains(t, stateFile, `"fixture":"$DIR/model.jsonl"`)
	assert.NotContains(t, file[strings.Index(file, "-- transcript --"):], cwd, "the workspace is $CWD")
	assert.NotContains(t, file, " on 20", "no date with --deterministic")
	res, err := scenarioRun(bin, out).CombinedOutput()
	require.NoError(t, err, "%s\n%s", res, file)
	assert.Contains(t, string(res), "1 passed, 0 failed")

	again := filepath.Join(dir, "again.txtar")
	require.NoError(t, os.Rename(out, again))
	assert.Equal(t, file, once(out), "--deterministic: the same conversation, the same bytes")
}

// Verify that the goldens' index in docs/scenarios.md names every golden.
func TestScenario_goldensIndexed(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/scenarios.md")
	require.NoError(t, err)
	files, err := filepath.Glob("fixtures/*.txtar")
	require.NoError(t, err)
	for _, f := range files {
		assert.Contains(t, string(doc), "| `"+filepath.Base(f)+"` |", "docs/scenarios.md's index of the goldens")
	}
}

// Verify that a chat-only agent (one that offers the model no tools: the
// multi-session agent with MULTIAGENT_TOOLS=none) is served the
// recording's answers beside acpbridge, not taken for a side call.
func TestScenario_chatOnlyAgent(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	other := buildMultiAgent(t, filepath.Join(t.TempDir(), "multi"))
	dir := t.TempDir()
	cmd := scenarioRun(bin, "--agent", "chat="+other, "--json", filepath.Join(dir, "runs.json"), "testdata/scenarios/chat_only.txtar")
	cmd.Env = append(os.Environ(), "MULTIAGENT_TOOLS=none")
	res, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", res)
	assert.Contains(t, string(res), "ok   testdata/scenarios/chat_only.txtar [chat]", "the recording's answer, word for word")
	b, err := os.ReadFile(filepath.Join(dir, "runs.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"side_calls": 0`, "no call of the chat-only agent was taken for a side call")
}

// buildMultiAgent builds the multi-session test agent (testdata/multiagent)
// at path and returns it.
func buildMultiAgent(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("go", "build", "-o", path, "./testdata/multiagent").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return path
}

// Verify --threads: N sessions of a scenario at once on one agent process
// and connection, each passing as a run of its own; the agent's figures
// and the whole run's model requests once per run; an agent that serves
// one session a process (acpbridge plain) fails the second, saying so.
func TestScenario_threads(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	other := buildMultiAgent(t, filepath.Join(dir, "multi"))
	jsonPath := filepath.Join(dir, "runs.json")
	// --timeout is generous: on a loaded machine the router's children
	// may take seconds to persist their sessions at stdin's end, and the
	// router waits for them.
	res, err := scenarioRun(bin, "--timeout", "60s", "--agent", "multi="+other, "--agent", "fanout="+bin+" --fanout", "--threads", "3", "--repeat", "2",
		"--json", jsonPath, "testdata/scenarios/compare_text.txtar").CombinedOutput()
	report := string(res)
	require.NoError(t, err, "%s", report)
	assert.Contains(t, report, "ok   testdata/scenarios/compare_text.txtar [multi] (run 1 of 2) (3 sessions at once")
	assert.Contains(t, report, "ok   testdata/scenarios/compare_text.txtar [fanout] (run 2 of 2) (3 sessions at once")
	assert.Contains(t, report, "12 passed, 0 failed", "2 runs of 3 sessions, each agent")
	assert.Contains(t, report, "(2 runs after a warm-up run, each 3 sessions at once")
	assert.Contains(t, report, "| runs passed (every session) | 2/2 |")
	assert.NotContains(t, report, "| turn 1: model requests |", "a session owns no model figures: they are every session's")
	assert.NotContains(t, report, "| turn 1: CPU of the tree (ms) |", "nor the tree's CPU")

	var got struct {
		Threads   int
		Scenarios []struct {
			Results []struct {
				Agent string
				Runs  []map[string]any
			}
		}
	}
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, 3, got.Threads)
	for _, ar := range got.Scenarios[0].Results {
		require.Len(t, ar.Runs, 6, "%s: a record per session", ar.Agent)
		for i, run := range ar.Runs {
			assert.Equal(t, float64(i%3+1), run["session"], "%s", ar.Agent)
			assert.Equal(t, -1.0, run["turns"].([]any)[0].(map[string]any)["model_requests"], "%s: a session's turn owns no model figures", ar.Agent)
			assert.Equal(t, -1.0, run["turns"].([]any)[0].(map[string]any)["cpu_ms"], "%s: nor the tree's CPU, which is every session's", ar.Agent)
			if i%3 == 0 {
				whole := run["model_whole_run"].(map[string]any)
				assert.Equal(t, 6.0, whole["requests"], "%s: two turns of three sessions", ar.Agent)
				// What the test is about, from the run's own record: multi
				// serves the three sessions in one process; the router gives
				// each its own, beside itself. How many spares the router
				// has started besides is its timing's, which load moves: no
				// upper bound.
				if ar.Agent == "multi" {
					assert.Equal(t, 1.0, run["processes"], "multi: one process for three sessions")
				} else {
					assert.GreaterOrEqual(t, run["processes"], 4.0, "the router: a process a session, and itself")
				}
			} else {
				assert.NotContains(t, run, "model_whole_run", "counted once a run")
				assert.Equal(t, -1.0, run["processes"])
			}
		}
	}

	res, err = scenarioRun(bin, "--threads", "2", "testdata/scenarios/compare_text.txtar").CombinedOutput()
	require.Error(t, err)
	assert.Regexp(t, `FAIL testdata/scenarios/compare_text.txtar \(session [12] of 2\)`, string(res), "one session a process: the second to ask is refused")
	assert.Contains(t, string(res), "serves one session per process")
	assert.Contains(t, string(res), "1 passed, 1 failed", "the first session goes on")
}

// Verify what a researcher publishes: --repeat runs a warm-up per agent
// then N counted runs, interleaved; --json holds every run's figures and
// the machine; --report writes report.md and SVG charts that parse.
func TestScenario_repeatJSONAndReport(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	other := buildMultiAgent(t, filepath.Join(dir, "multi"))
	jsonPath, reportDir := filepath.Join(dir, "runs.json"), filepath.Join(dir, "report")
	res, err := scenarioRun(bin, "--agent", bin, "--agent", "multi="+other, "--repeat", "3",
		"--json", jsonPath, "--report", reportDir, "testdata/scenarios/compare_text.txtar").CombinedOutput()
	report := string(res)
	require.NoError(t, err, "%s", report)
	assert.Equal(t, 1, strings.Count(report, "[acpbridge] (warm-up run)"), "one warm-up each")
	assert.Equal(t, 1, strings.Count(report, "[multi] (warm-up run)"))
	at := func(label string) int { return strings.Index(report, label) }
	assert.True(t, at("[acpbridge] (run 1 of 3)") < at("[multi] (run 1 of 3)") && at("[multi] (run 1 of 3)") < at("[multi] (run 2 of 3)") &&
		at("[multi] (run 2 of 3)") < at("[acpbridge] (run 2 of 3)") && at("[acpbridge] (run 2 of 3)") < at("[acpbridge] (run 3 of 3)") &&
		at("[acpbridge] (run 3 of 3)") < at("[multi] (run 3 of 3)"), "interleaved, the order rotated each round: acpbridge multi, multi acpbridge, acpbridge multi")
	assert.Contains(t, report, "6 passed, 0 failed", "the warm-up runs are not counted")
	assert.Contains(t, report, "| runs passed | 3/3 | 3/3 |")
	assert.Contains(t, report, "(median over 3 runs after a warm-up run, its 95% interval in brackets; ratios to acpbridge paired by round")

	var got struct {
		Environment struct {
			OS, Arch, Go, Acpbridge string
			CPUs                    int
			Command                 string
			WorkingDir              string    `json:"working_directory"`
			MemoryBytes             int64     `json:"memory_bytes"`
			LoadAverage             []float64 `json:"load_average"`
		}
		Baseline   string
		AgentOrder string `json:"agent_order"`
		Agents     []struct {
			Name, Version string
			Command       []string
			SHA256        string
		}
		Scenarios []struct {
			Path    string
			Repeat  int
			Results []struct {
				Agent   string
				Runs    []map[string]any
				Summary map[string]struct {
					N                 int
					Median, Low, High float64
					Spread            string
				}
			}
			Differences []struct {
				A, B  string
				Lines []string
			}
		}
	}
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, runtime.GOOS, got.Environment.OS)
	assert.Positive(t, got.Environment.CPUs)
	assert.Contains(t, got.Environment.Acpbridge, "acpbridge ")
	assert.Equal(t, []string{other}, got.Agents[1].Command)
	assert.Equal(t, "acpbridge", got.Baseline, "the first agent by default")
	assert.Contains(t, got.AgentOrder, "Williams design")
	assert.True(t, strings.HasPrefix(got.Agents[0].Version, "acpbridge "), "the version it gave: %q", got.Agents[0].Version)
	if runtime.GOOS == "linux" {
		assert.Positive(t, got.Environment.MemoryBytes)
		assert.Len(t, got.Environment.LoadAverage, 3)
	}
	assert.Len(t, got.Agents[1].SHA256, 64, "the agent's executable hashed")
	assert.True(t, strings.HasPrefix(got.Environment.Command, bin+" scenario run "), "one shell-quoted line, from the binary that ran (not a name a clean shell's PATH may not find): %s", got.Environment.Command)
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, wd, got.Environment.WorkingDir, "the directory it ran in")
	require.Len(t, got.Scenarios, 1)
	sc := got.Scenarios[0]
	assert.Equal(t, 3, sc.Repeat)
	require.Len(t, sc.Results, 2)
	for _, ar := range sc.Results {
		require.Len(t, ar.Runs, 3, "%s: the counted runs, no warm-up", ar.Agent)
		for _, run := range ar.Runs {
			for _, field := range []string{"index", "agent", "started_at", "passed", "agent_lines", "spawn_to_initialize_ms", "session_new_ms", "turns", "cpu_ms", "rss_peaks_sum_bytes", "peak_pss_bytes", "peak_uss_bytes", "peak_anon_bytes", "processes", "exited_after_eof"} {
				assert.Contains(t, run, field, "%s", ar.Agent)
			}
			turns := run["turns"].([]any)
			require.Len(t, turns, 2)
			for _, field := range []string{"first_output_ms", "answer_ms", "cpu_ms", "agent_messages", "agent_bytes", "model_requests", "model_request_bytes", "prompt_tokens_estimated", "completion_tokens_estimated", "tokens_served"} {
				assert.Contains(t, turns[0], field)
			}
			assert.Equal(t, 1.0, turns[0].(map[string]any)["model_requests"])
			if cpu := turns[0].(map[string]any)["cpu_ms"]; runtime.GOOS == "linux" {
				assert.Positive(t, cpu, "%s: the tree's CPU from the prompt to its answer", ar.Agent)
			} else {
				assert.Equal(t, -1.0, cpu, "%s: not read outside Linux", ar.Agent)
			}
			assert.Positive(t, turns[0].(map[string]any)["prompt_tokens_estimated"])
			assert.Positive(t, turns[0].(map[string]any)["sent"].(map[string]any)["update agent_message_chunk"], "the turn's messages by kind")
		}
		assert.Contains(t, ar.Summary, "peak_pss_bytes")
		assert.Contains(t, ar.Summary, "spawn_to_initialize_ms")
		s := ar.Summary["turn1_answer_ms"]
		assert.Equal(t, 3, s.N)
		assert.Equal(t, "min-max", s.Spread)
		assert.True(t, s.Low <= s.Median && s.Median <= s.High)
	}
	require.Len(t, sc.Differences, 1)
	assert.Equal(t, "acpbridge", sc.Differences[0].A)

	md, err := os.ReadFile(filepath.Join(reportDir, "report.md"))
	require.NoError(t, err)
	if runtime.GOOS == "linux" {
		for _, ar := range sc.Results {
			for _, run := range ar.Runs {
				assert.Len(t, run["load_average"], 3, "the load as each run began")
				assert.Len(t, run["load_average_at_end"], 3, "and as it ended")
				if cpuinfo, _ := os.ReadFile("/proc/cpuinfo"); strings.Contains(string(cpuinfo), "cpu MHz") {
					assert.Len(t, run["cpu_mhz"], 2, "the CPU clock as each run began and ended")
				}
			}
		}
		assert.Contains(t, string(md), "| load average (1 min) as each run began and ended | ", "sampled through the comparison")
		assert.Regexp(t, `\| CPU clock (\(the CPUs' mean\) as each run began and ended \| [0-9]+ to [0-9]+ MHz|\| not readable here) \|`, string(md))
	}
	assert.Contains(t, string(md), "| runs passed | 3/3 | 3/3 |")
	assert.Contains(t, string(md), "![turn 1: answer (ms)](")
	if runtime.GOOS == "linux" {
		assert.Contains(t, string(md), "| turn 1: CPU of the tree (ms) |")
	}
	assert.Contains(t, string(md), "| CPU, user + system, the whole run (ms) |")
	assert.Contains(t, string(md), "| figure | acpbridge | multi | multi ÷ acpbridge |", "the ratio column")
	assert.Contains(t, string(md), "### What each agent sent, per turn")
	assert.Contains(t, string(md), "| 1 | update agent_message_chunk |")
	assert.Contains(t, string(md), "## Figures", "every row defined")
	assert.Contains(t, string(md), "## Limits of this comparison", "what the figures do not cover")
	assert.Contains(t, string(md), "![ratios to acpbridge](")
	svgs, _ := filepath.Glob(filepath.Join(reportDir, "*.svg"))
	assert.GreaterOrEqual(t, len(svgs), 10, "a chart per figure")
	for _, svg := range svgs {
		b, err := os.ReadFile(svg)
		require.NoError(t, err)
		dec := xml.NewDecoder(bytes.NewReader(b))
		for {
			_, err := dec.Token()
			if err == io.EOF {
				break
			}
			require.NoError(t, err, "%s does not parse", svg)
		}
		assert.Contains(t, string(b), `<svg xmlns="http://www.w3.org/2000/svg"`)
		if !strings.HasSuffix(svg, "ratios.svg") {
			assert.Contains(t, string(b), ">multi</text>", "a bar per agent")
			assert.Contains(t, string(b), ">n = 3 runs<")
		}
	}
}

// Verify `scenario model`: the served model on its own, for an agent run
// by another harness: the base URL first on stdout, the fixture's answers
// (a scenario's too), and the end at stdin's end.
func TestScenario_modelOnItsOwn(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary(t), "scenario", "model", "testdata/scenarios/compare_text.txtar")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	url, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "stderr: %s", stderr.String())
	url = strings.TrimSpace(url)
	assert.Regexp(t, `^http://127\.0\.0\.1:[0-9]+/v1$`, url)
	// One conversation, its second call carrying the first's messages.
	messages := `{"role":"user","content":"hi"}`
	for _, want := range []string{"Hello from the model.", "A second answer."} {
		resp, err := http.Post(url+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"any-model","tools":[{"type":"function","function":{"name":"read_file","parameters":{}}}],"messages":[`+messages+`]}`))
		messages += `,{"role":"assistant","content":"` + want + `"},{"role":"user","content":"more"}`
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Contains(t, string(b), `"content":"`+want+`"`)
	}
	stdin.Close()
	require.NoError(t, cmd.Wait(), "it ends at stdin's end, status 0")

	res, err := exec.Command(binary(t), "scenario", "model", "testdata/scenarios/nothing.txtar").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(res), "nothing.txtar")
}

// Verify the neutral recording: acpbridge recorded with --neutral passes
// unchanged on another agent (the multi-session test agent) that answers
// the same, where the plain recording fails it at its first line.
func TestScenario_neutralRecordingPassesOnAnotherAgent(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	other := buildMultiAgent(t, filepath.Join(dir, "multi"))
	fixture := filepath.Join(dir, "model.jsonl")
	require.NoError(t, os.WriteFile(fixture, []byte(`{"expect":"Say hello","chunks":[{"text":"Hello "},{"text":"there."}]}`+"\n"), 0o644))
	cwd := filepath.Join(dir, "work")
	require.NoError(t, os.Mkdir(cwd, 0o755))
	for _, neutral := range []bool{false, true} {
		file := filepath.Join(dir, fmt.Sprintf("neutral-%v.txtar", neutral))
		args := []string{"scenario", "record", "--out", file}
		if neutral {
			args = append(args, "--neutral")
		}
		cmd := exec.Command(bin, append(args, "--", bin, "--model", "replay:"+fixture, "--state-dir", filepath.Join(dir, "state"))...)
		recordOneTurn(t, cmd, cwd, "Say hello.")
		res, err := scenarioRun(bin, "--agent", bin, "--agent", "multi="+other, file).CombinedOutput()
		if !neutral {
			require.Error(t, err)
			assert.Contains(t, string(res), "FAIL "+file+" [multi]")
			continue
		}
		b, _ := os.ReadFile(file)
		require.NoError(t, err, "%s\n%s", res, b)
		assert.Contains(t, string(res), "ok   "+file+" [acpbridge]")
		assert.Contains(t, string(res), "ok   "+file+" [multi]")
	}
}

// Verify that a failed warm-up run is kept: it fails the comparison (exit
// status 1, the closing line counts it), is in the JSON (warm_up) and is
// listed with its reason in report.md, while the counted runs that passed
// stay counted.
func TestScenario_failedWarmUpKept(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "acpbridge") // acpbridge's name: it is given the scenario's flags
	marker := filepath.Join(dir, "warmed")
	require.NoError(t, os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\nif [ ! -e %q ]; then touch %q; echo 'cold start failed' >&2; exit 3; fi\nexec %q \"$@\"\n", marker, marker, bin)), 0o755))
	jsonPath, reportDir := filepath.Join(dir, "runs.json"), filepath.Join(dir, "report")
	res, err := scenarioRun(bin, "--agent", script, "--repeat", "2",
		"--json", jsonPath, "--report", reportDir, "testdata/scenarios/compare_text.txtar").CombinedOutput()
	out := string(res)
	require.Error(t, err, "a failed warm-up fails the comparison: %s", out)
	assert.Contains(t, out, "2 passed, 1 failed", "the counted runs passed; the warm-up did not")
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var got struct {
		Scenarios []struct {
			Results []struct {
				Passed int
				WarmUp []struct {
					Passed bool
					Error  string
				} `json:"warm_up"`
			}
		}
	}
	require.NoError(t, json.Unmarshal(b, &got))
	require.Len(t, got.Scenarios, 1)
	r := got.Scenarios[0].Results[0]
	assert.Equal(t, 2, r.Passed)
	require.Len(t, r.WarmUp, 1)
	assert.False(t, r.WarmUp[0].Passed)
	md, err := os.ReadFile(filepath.Join(reportDir, "report.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "### Failures\n\n- ")
	assert.Contains(t, string(md), ", warm-up run: ")
}

// scenarioRun is `acpbridge scenario run ARGS` with a bound for a loaded
// machine: there an agent's end after its stdin closed can take longer
// than the default 10 s (here --timeout is a deadlock guard, not a
// figure); a later --timeout in args wins.
func scenarioRun(bin string, args ...string) *exec.Cmd {
	return exec.Command(bin, append([]string{"scenario", "run", "--timeout", "2m"}, args...)...)
}
