// auth_test.go tests signing in: the methods initialize offers, a session
// that waits for a sign-in (-32000), authenticate and logout, and a key
// stored by acpbridge setup used by a plain acpbridge and by --fanout's
// children, found in no file, log or command line.

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/signin"
)

// initCaps is an initialize whose clientCapabilities are caps.
func initCaps(caps string) string {
	return `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":` + caps + `}}`
}

// authMethods is what initialize offered: each method's type (agent when
// none), id and args.
func authMethods(t *testing.T, line []byte) []string {
	t.Helper()
	r := decodeResponse(t, line)
	require.Nil(t, r.Error, "%s", line)
	var res struct {
		AgentCapabilities struct {
			Auth struct {
				Logout *struct{} `json:"logout"`
			} `json:"auth"`
		} `json:"agentCapabilities"`
		AuthMethods []struct {
			Type, ID string
			Args     []string
		} `json:"authMethods"`
	}
	require.NoError(t, json.Unmarshal(r.Result, &res))
	assert.NotNil(t, res.AgentCapabilities.Auth.Logout, "logout is offered")
	var out []string
	for _, m := range res.AuthMethods {
		out = append(out, fmt.Sprintf("%s %s %v", cmp.Or(m.Type, "agent"), m.ID, m.Args))
	}
	return out
}

// Verify the sign-in methods initialize offers: the agent method always;
// the terminal one (acpbridge setup) only to a client that announces it,
// in either of the two ways clients do; never for a value that is not
// true. The router answers the same for its acpbridge children.
func TestAuth_methodsOffered(t *testing.T) {
	t.Parallel()
	cases := []struct {
		caps     string
		terminal bool
	}{
		{`{}`, false},
		{`{"auth":{"terminal":true}}`, true},
		{`{"_meta":{"terminal-auth":true}}`, true},
		{`{"auth":{"terminal":false}}`, false},
		{`{"auth":{"terminal":"yes"}}`, false},
		{`{"auth":null,"_meta":{"terminal-auth":{}}}`, false},
	}
	check := func(who string, line []byte, terminal bool, caps string) {
		want := []string{"agent api-key []"}
		if terminal {
			want = append(want, "terminal setup [setup]")
		}
		assert.Equal(t, want, authMethods(t, line), "%s, %s", who, caps)
	}
	for _, c := range cases {
		ta := startAgent(t, "--model", "replay:fixtures/hello.jsonl")
		check("acpbridge", ta.call(initCaps(c.caps)), c.terminal, c.caps)
		ta.close()
	}
	for _, c := range cases[:3] {
		p := startProcess(t, nil, "--fanout", "--spares", "0")
		check("--fanout", p.call(initCaps(c.caps)), c.terminal, c.caps)
		p.close()
	}
}

// Verify that with no model configured and nothing stored (a registry
// install's first start), or a model on another machine and no key,
// session/new and authenticate answer -32000 saying how to sign in; the
// process goes on serving. An endpoint on this machine and a replay
// fixture need no key.
func TestAuth_noKeyAnywhere(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	newSession := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`
	authenticate := func(id int, method string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"authenticate","params":{"methodId":%q}}`, id, method)
	}
	for _, c := range []struct {
		args []string
		says string // "" when a session opens
	}{
		{nil, "acpbridge has no model yet: sign in (the editor's sign-in, or acpbridge setup in a terminal"},
		{[]string{"--model", "openai:gpt-x"}, "acpbridge has no key for https://api.openai.com/v1: sign in"},
		{[]string{"--model", "openai:gpt-x", "--base-url", "https://user:pw@example.invalid/v1?k=1"}, "no key for https://example.invalid/v1: sign in"},
		{[]string{"--model", "openai:llama", "--base-url", "http://127.0.0.1:1/v1", "--models", "llama"}, ""},
		{[]string{"--model", "replay:fixtures/hello.jsonl"}, ""},
	} {
		ta := startAgent(t, c.args...)
		ta.call(initLine)
		r := decodeResponse(t, ta.call(newSession))
		a := decodeResponse(t, ta.call(authenticate(2, "api-key")))
		if c.says == "" {
			assert.Nil(t, r.Error, "%v: session/new", c.args)
			assert.Nil(t, a.Error, "%v: authenticate", c.args)
			assert.JSONEq(t, `{}`, string(a.Result))
			ta.close()
			continue
		}
		for _, resp := range []response{r, a} {
			require.NotNil(t, resp.Error, "%v", c.args)
			assert.Equal(t, -32000, resp.Error.Code, "%v: auth_required, so that the editor offers its sign-in", c.args)
			assert.Contains(t, resp.Error.Message, c.says, "%v", c.args)
			assert.Contains(t, resp.Error.Message, "OPENAI_API_KEY", "%v", c.args)
			assert.NotContains(t, resp.Error.Message, "pw@", "no credentials of the URL in a message")
		}
		t2 := decodeResponse(t, ta.call(authenticate(3, "setup")))
		require.NotNil(t, t2.Error)
		assert.Equal(t, -32602, t2.Error.Code, "the terminal method is the client's to run")
		t3 := decodeResponse(t, ta.call(authenticate(4, "password")))
		require.NotNil(t, t3.Error)
		assert.Contains(t, t3.Error.Message, `"password" is not one of acpbridge's sign-in methods`)
		ta.close()
	}
}

// keyedOpenAI is the fake OpenAI endpoint taking only key: anything else
// is refused 401 with the endpoint's own words.
func keyedOpenAI(t *testing.T, key string, replies ...fakeReply) (*fakeOpenAI, string) {
	f := newFakeOpenAI(t, replies...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"message":"Incorrect API key provided: the test's endpoint takes another"}}`))
			return
		}
		f.serve(w, r)
	}))
	t.Cleanup(srv.Close)
	return f, srv.URL + "/v1"
}

// signInEnv is the environment of a process of the tests with its own
// config folder and no key of its own.
func signInEnv(config string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") && !strings.HasPrefix(kv, "ACPBRIDGE_MODEL=") {
			env = append(env, kv)
		}
	}
	return append(env, "XDG_CONFIG_HOME="+config)
}

// runSetupCommand runs the binary's setup with stdin (not a terminal).
func runSetupCommand(t *testing.T, config, stdin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = signInEnv(config)
	cmd.Stdin = strings.NewReader(stdin)
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}

// Verify the whole sign-in as a script does it, on the binary: a refused
// key stores nothing; a checked one is stored 0600; a plain acpbridge and
// --fanout's children then serve prompts with it, sent to its endpoint
// only; the key is in no file under the state folder, no log, no trace and
// no command line; logout removes it, from the file and from the process:
// the next request goes without it (the endpoint here is on this machine,
// which a session may use without a key; TestAuth_noKeyAnywhere has one
// elsewhere).
func TestAuth_storedKeyServes(t *testing.T) {
	t.Parallel()
	const key = "sk-stored-4f7a9c2e1b"
	f, endpoint := keyedOpenAI(t, key, fakeReply{file: "text.sse"}, fakeReply{file: "text.sse"})
	config := t.TempDir()
	file := filepath.Join(config, "acpbridge", signin.FileName)

	status, out := runSetupCommand(t, config, "sk-wrong\n", "setup", "--base-url", endpoint, "--model", "gpt-test")
	assert.Equal(t, 1, status, out)
	assert.Contains(t, out, "refused the key (401 Unauthorized): Incorrect API key provided")
	_, err := os.Stat(file)
	require.True(t, os.IsNotExist(err), "nothing stored")

	// As the editor runs the terminal method: the entry's args, then setup.
	status, out = runSetupCommand(t, config, key+"\n", "--fanout", "setup", "--base-url", endpoint, "--model", "gpt-test")
	require.Equal(t, 0, status, out)
	assert.NotContains(t, out, key)
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(file)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}

	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	prep := func(cmd *exec.Cmd, _ *testAgent) { cmd.Env = signInEnv(config) }
	for i, args := range [][]string{{"--trace", trace}, {"--fanout", "--spares", "0", "--trace", trace}} {
		p := startProcessWith(t, nil, prep, args...)
		sid := p.newSession()
		_, r := p.turnUpdates(2, sid, "hi")
		require.Nil(t, r.Error, "%v: the prompt is served with the stored key", args)
		assert.Equal(t, "Bearer "+key, f.request(i).auth)
		assertNoKeyInCommandLines(t, p.cmd.Process.Pid, key)
		p.close()
		assert.NotContains(t, p.stderr.String(), key, "%v: the log", args)
		assertNoKeyUnder(t, p.state, key)
	}
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	assert.NotContains(t, string(b), key, "the trace")

	p := startProcessWith(t, nil, prep)
	p.call(initLine)
	r := decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":1,"method":"logout","params":{}}`))
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{}`, string(r.Result))
	got, err := signin.Load(file)
	require.NoError(t, err)
	assert.Equal(t, signin.Stored{Endpoint: endpoint, Model: "gpt-test"}, got, "the key is gone, the rest stays")
	r = decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.Nil(t, r.Error)
	var res struct{ SessionID string }
	require.NoError(t, json.Unmarshal(r.Result, &res))
	_, r = p.turnUpdates(3, res.SessionID, "hi")
	require.NotNil(t, r.Error, "signed out: no key is sent")
	assert.Contains(t, r.Error.Message, "401 Unauthorized")
	assert.Contains(t, r.Error.Message, "sign in again with acpbridge setup")
	p.close()
}

// Verify that a process started before the sign-in takes it at its next
// session/new (the editor's terminal sign-in runs beside a waiting
// agent), and that a key stored for one endpoint is not sent to another.
func TestAuth_signInWhileRunning(t *testing.T) {
	t.Parallel()
	const key = "sk-later-77aa"
	f, endpoint := keyedOpenAI(t, key, fakeReply{file: "text.sse"})
	config := t.TempDir()
	prep := func(cmd *exec.Cmd, _ *testAgent) { cmd.Env = signInEnv(config) }
	p := startProcessWith(t, nil, prep)
	p.call(initLine)
	newSession := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`
	r := decodeResponse(t, p.call(newSession))
	require.NotNil(t, r.Error)
	assert.Equal(t, -32000, r.Error.Code)

	status, out := runSetupCommand(t, config, key+"\n", "setup", "--base-url", endpoint, "--model", "gpt-test")
	require.Equal(t, 0, status, out)
	a := decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{"methodId":"api-key"}}`))
	require.Nil(t, a.Error, "authenticate finds the stored key")
	sid := p.newSession()
	_, r = p.turnUpdates(2, sid, "hi")
	require.Nil(t, r.Error)
	assert.Equal(t, "Bearer "+key, f.request(0).auth)
	p.close()

	// The same sign-in, another endpoint on the command line: no key.
	other := startProcessWith(t, nil, prep, "--base-url", "https://elsewhere.invalid/v1")
	other.call(initLine)
	r = decodeResponse(t, other.call(newSession))
	require.NotNil(t, r.Error, "the stored key is not sent to another endpoint")
	assert.Contains(t, r.Error.Message, "no key for https://elsewhere.invalid/v1")
	other.close()
}

// assertNoKeyUnder fails when a file under dir holds key.
func assertNoKeyUnder(t *testing.T, dir, key string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(path)
			assert.NotContains(t, string(b), key, "%s holds the key", path)
		}
		return nil
	})
}

// assertNoKeyInCommandLines fails when the command line of pid or of a
// process it started holds key (Linux: /proc; elsewhere there is nothing to
// read it from, and the key never is an argument).
func assertNoKeyInCommandLines(t *testing.T, pid int, key string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	seen := 0
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), "acpbridge") {
			continue
		}
		seen++
		assert.NotContains(t, string(b), key, "process %s's command line", e.Name())
	}
	assert.NotZero(t, seen, "acpbridge's processes were read (pid %d)", pid)
}

// Verify a registry install's first day behind the router: acpbridge
// --fanout with nothing configured answers session/new -32000 (relayed
// from its child unchanged); the editor's terminal sign-in stores a key;
// the next session/new, served by a spare started before the sign-in,
// opens, and its prompt is sent with the key.
func TestAuth_fanoutSignInFlow(t *testing.T) {
	t.Parallel()
	const key = "sk-registry-day-1"
	f, endpoint := keyedOpenAI(t, key, fakeReply{file: "text.sse"})
	config := t.TempDir()
	p := startProcessWith(t, nil, func(cmd *exec.Cmd, _ *testAgent) { cmd.Env = signInEnv(config) }, "--fanout")
	p.call(initCaps(`{"auth":{"terminal":true}}`))
	newSession := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`
	r := decodeResponse(t, p.call(newSession))
	require.NotNil(t, r.Error)
	assert.Equal(t, -32000, r.Error.Code, "the editor offers its sign-in")
	assert.Contains(t, r.Error.Message, "acpbridge has no model yet: sign in")

	status, out := runSetupCommand(t, config, key+"\n", "--fanout", "setup", "--base-url", endpoint, "--model", "gpt-test")
	require.Equal(t, 0, status, out)
	r = decodeResponse(t, p.call(strings.Replace(newSession, `"id":1`, `"id":2`, 1)))
	require.Nil(t, r.Error, "signed in: the thread opens")
	var res struct{ SessionID string }
	require.NoError(t, json.Unmarshal(r.Result, &res))
	_, r = p.turnUpdates(3, res.SessionID, "hi")
	require.Nil(t, r.Error)
	assert.Equal(t, "Bearer "+key, f.request(0).auth)
	p.close()
}

// Verify that a sign-out reaches every thread behind the router: logout
// is served by one child, and a thread open in another sends its next
// request without the key (a stored key follows its file). A sign-in again
// gives it back.
func TestAuth_signOutReachesEveryThread(t *testing.T) {
	t.Parallel()
	const key = "sk-every-thread-9d"
	f, endpoint := keyedOpenAI(t, key, fakeReply{file: "text.sse"}, fakeReply{file: "text.sse"})
	config := t.TempDir()
	status, out := runSetupCommand(t, config, key+"\n", "setup", "--base-url", endpoint, "--model", "gpt-test")
	require.Equal(t, 0, status, out)
	p := startProcessWith(t, nil, func(cmd *exec.Cmd, _ *testAgent) { cmd.Env = signInEnv(config) }, "--fanout")
	sid := p.newSession()
	_, r := p.turnUpdates(2, sid, "one")
	require.Nil(t, r.Error)

	r = decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":3,"method":"logout","params":{}}`))
	require.Nil(t, r.Error)
	_, r = p.turnUpdates(4, sid, "two")
	require.NotNil(t, r.Error, "signed out: the thread's process sends no key")
	assert.Contains(t, r.Error.Message, "401 Unauthorized")

	status, out = runSetupCommand(t, config, key+"\n", "setup", "--base-url", endpoint, "--model", "gpt-test")
	require.Equal(t, 0, status, out)
	_, r = p.turnUpdates(5, sid, "three")
	require.Nil(t, r.Error, "signed in again: the key is back")
	assert.Equal(t, 2, f.count(), "the requests the endpoint took")
	p.close()
}
