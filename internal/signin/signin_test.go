// signin_test.go tests the stored sign-in and setup as a script runs it
// (stdin not a terminal); the terminal's side is tested on the binary
// (the root's signin_pty_linux_test.go).

package signin

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that the sign-in is written whole, readable by its owner only,
// and that a sign-out removes the key and keeps the rest.
func TestStored_saveLoadForget(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "conf", "acpbridge", FileName)
	s, err := Load(path)
	require.NoError(t, err, "none stored is no error")
	assert.Equal(t, Stored{}, s)

	want := Stored{Endpoint: "https://example.invalid/v1", Model: "m", Key: "sk-secret"}
	require.NoError(t, Save(path, want))
	got, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "only the user reads the key")
		di, err := os.Stat(filepath.Dir(path))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	assert.Len(t, entries, 1, "no temporary file left beside it")

	had, err := ForgetKey(path)
	require.NoError(t, err)
	assert.True(t, had)
	got, err = Load(path)
	require.NoError(t, err)
	assert.Equal(t, Stored{Endpoint: want.Endpoint, Model: "m"}, got, "the endpoint and model stay")
	b, _ := os.ReadFile(path)
	assert.NotContains(t, string(b), "sk-secret")
	had, err = ForgetKey(path)
	require.NoError(t, err)
	assert.False(t, had, "no key left to remove")

	require.NoError(t, os.WriteFile(path, []byte("not json"), 0o600))
	_, err = Load(path)
	assert.ErrorContains(t, err, "run acpbridge setup again")
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte(" "), maxFile+1), 0o600))
	_, err = Load(path)
	assert.ErrorContains(t, err, "larger than acpbridge setup writes", "a huge file is not read whole")
	_, err = Load("")
	assert.ErrorContains(t, err, "set XDG_CONFIG_HOME")
}

// Verify where the sign-in lives: under $XDG_CONFIG_HOME when set.
func TestPath(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	p, err := Path()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "acpbridge", FileName), p)
	if runtime.GOOS != "windows" {
		home := t.TempDir()
		t.Setenv("XDG_CONFIG_HOME", "")
		t.Setenv("HOME", home)
		p, err = Path()
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(home, ".config", "acpbridge", FileName), p)
	}
}

// Verify which endpoints are on this machine (used without a key) and
// which are one endpoint (a stored key goes only to its own).
func TestLocalAndSameEndpoint(t *testing.T) {
	t.Parallel()
	for u, local := range map[string]bool{
		"http://localhost:11434/v1": true, "http://127.0.0.1:8080/v1": true, "http://127.8.9.1/v1": true,
		"http://[::1]:1234/v1": true, "http://LOCALHOST./v1": true, "http://app.localhost/v1": true,
		"https://api.openai.com/v1": false, "http://192.168.1.2/v1": false, "http://localhost.example.com/v1": false,
		"not a url": false, "http://10.0.0.1:11434/v1": false,
	} {
		assert.Equal(t, local, Local(u), u)
	}
	assert.True(t, SameEndpoint("https://API.openai.com/v1/", "https://api.openai.com/v1"))
	assert.False(t, SameEndpoint("https://api.openai.com/v1", "https://openrouter.ai/api/v1"))
	assert.False(t, SameEndpoint("https://api.openai.com/v1", "http://api.openai.com/v1"), "a key stored for https is not sent in clear")
	assert.False(t, SameEndpoint("https://api.openai.com/v1", "https://api.openai.com/v2"))
}

// endpoint is an OpenAI-compatible GET /models that takes one key.
func endpoint(t *testing.T, key string, models ...string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`))
			return
		}
		var list struct {
			Data []map[string]string `json:"data"`
		}
		for _, m := range models {
			list.Data = append(list.Data, map[string]string{"id": m})
		}
		json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(srv.Close)
	return srv
}

type setupRun struct {
	status         int
	stdout, stderr string
}

func runSetup(t *testing.T, path, stdin string, env map[string]string, args ...string) setupRun {
	t.Helper()
	var out, errOut bytes.Buffer
	opt := Options{Path: path, Getenv: func(k string) string { return env[k] }}
	status := Setup(context.Background(), args, opt, strings.NewReader(stdin), &out, &errOut)
	return setupRun{status, out.String(), errOut.String()}
}

// Verify setup as a script runs it: the key on stdin, checked against the
// endpoint, stored with the endpoint and model; a refused key exits 1 with
// the endpoint's own words and stores nothing; a key is never printed.
func TestSetup_script(t *testing.T) {
	t.Parallel()
	const key = "sk-test-0123456789"
	srv := endpoint(t, key, "gpt-b", "gpt-a")
	path := filepath.Join(t.TempDir(), FileName)

	r := runSetup(t, path, "sk-wrong\n", nil, "--base-url", srv.URL+"/v1", "--model", "gpt-a")
	assert.Equal(t, 1, r.status)
	assert.Contains(t, r.stderr, "refused the key (401 Unauthorized): Incorrect API key provided; nothing was stored")
	_, err := os.Stat(path)
	assert.True(t, os.IsNotExist(err), "a refused key is not stored")

	r = runSetup(t, path, key+"\n", nil, "--base-url", srv.URL+"/v1")
	assert.Equal(t, 1, r.status, "no model named, two listed")
	assert.Contains(t, r.stderr, "name the model with --model NAME (the endpoint lists gpt-a, gpt-b)")

	r = runSetup(t, path, key+"\n", nil, "--base-url", srv.URL+"/v1/", "--model", "gpt-b")
	require.Equal(t, 0, r.status, r.stderr)
	assert.Contains(t, r.stdout, "Signed in: "+srv.URL+"/v1 with the model gpt-b")
	got, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, Stored{Endpoint: srv.URL + "/v1", Model: "gpt-b", Key: key}, got)
	assert.NotContains(t, r.stdout+r.stderr, key)

	// Run again with no key: the stored one is kept, the model changed.
	r = runSetup(t, path, "", nil, "--base-url", srv.URL+"/v1", "--model", "gpt-a")
	require.Equal(t, 0, r.status, r.stderr)
	got, _ = Load(path)
	assert.Equal(t, Stored{Endpoint: srv.URL + "/v1", Model: "gpt-a", Key: key}, got)

	r = runSetup(t, path, "", nil, "--sign-out")
	require.Equal(t, 0, r.status)
	assert.Contains(t, r.stdout, "Signed out")
	got, _ = Load(path)
	assert.Empty(t, got.Key)
}

// Verify --from-env (OPENAI_API_KEY), an endpoint on another machine with
// no key (refused before asking it), and an unreachable endpoint.
func TestSetup_fromEnvAndRefusals(t *testing.T) {
	t.Parallel()
	const key = "sk-env-key"
	srv := endpoint(t, key, "only")
	path := filepath.Join(t.TempDir(), FileName)
	r := runSetup(t, path, "", map[string]string{"OPENAI_API_KEY": key}, "--from-env", "--base-url", srv.URL+"/v1")
	require.Equal(t, 0, r.status, r.stderr)
	got, _ := Load(path)
	assert.Equal(t, Stored{Endpoint: srv.URL + "/v1", Model: "only", Key: key}, got, "the one model listed is chosen")

	other := filepath.Join(t.TempDir(), FileName)
	r = runSetup(t, other, "\n", nil, "--base-url", "https://api.example.invalid/v1", "--model", "m")
	assert.Equal(t, 1, r.status)
	assert.Contains(t, r.stderr, "https://api.example.invalid/v1 needs a key, and none was given")

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	r = runSetup(t, other, "sk-x\n", nil, "--base-url", closed.URL+"/v1", "--model", "m")
	assert.Equal(t, 1, r.status)
	assert.Contains(t, r.stderr, "cannot check the key")
	assert.NotContains(t, r.stderr, "sk-x")
	_, err := os.Stat(other)
	assert.True(t, os.IsNotExist(err))

	r = runSetup(t, other, "", nil, "--base-url", "ftp://x", "--model", "m")
	assert.Equal(t, 1, r.status)
	assert.Contains(t, r.stderr, `"ftp://x" is not an http:// or https:// URL`)
	r = runSetup(t, other, "", nil, "extra")
	assert.Equal(t, 2, r.status)
}

// Verify that an endpoint on this machine may have no key, and one
// without GET /models is stored with its key unchecked, said so.
func TestSetup_localEndpoint(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), FileName)
	r := runSetup(t, path, "\n", nil, "--base-url", srv.URL+"/v1", "--model", "llama")
	require.Equal(t, 0, r.status, r.stderr)
	assert.Contains(t, r.stderr, "lists no models (GET /models answered 404 Not Found): the key could not be checked")
	got, _ := Load(path)
	assert.Equal(t, Stored{Endpoint: srv.URL + "/v1", Model: "llama"}, got)
}
