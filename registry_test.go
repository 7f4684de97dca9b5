// registry_test.go holds the ACP Registry entry (dist/registry) and the
// release archives together: the entry is valid against the registry's
// schema and passes what its scripts and Zed check of an entry; an archive
// scripts/release.sh builds, fetched and started as the registry's
// verifier does, passes its launch and auth checks.

package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// registryEntry is an agent.json.
type registryEntry struct {
	ID           string
	Version      string
	Distribution struct {
		Binary map[string]struct {
			Archive string
			Cmd     string
			Args    []string
		}
	}
}

var registryPlatforms = []string{"darwin-aarch64", "darwin-x86_64", "linux-aarch64", "linux-x86_64", "windows-aarch64", "windows-x86_64"}

// Verify the entry: valid against the registry's schema; id, digits-only
// version (main.go's), an archive for each of the six platforms named as
// scripts/release.sh names it, under /vVERSION/, cmd the binary at the
// archive's root, --fanout for Zed; and exactly what
// scripts/registry-entry.sh writes for that version.
func TestRegistry_entry(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("dist/registry/agent.json")
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	schema, err := c.Compile("testdata/registry/agent.schema.json")
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	require.NoError(t, err)
	require.NoError(t, schema.Validate(doc), "the registry's schema")

	var e registryEntry
	require.NoError(t, json.Unmarshal(raw, &e))
	assert.Equal(t, "acpbridge", e.ID, "the entry's folder name")
	assert.Regexp(t, `^[0-9]+\.[0-9]+\.[0-9]+$`, e.Version, "digits only")
	assert.Equal(t, version, e.Version, "the entry names the release main.go declares")
	assert.Len(t, e.Distribution.Binary, len(registryPlatforms))
	for _, p := range registryPlatforms {
		target, ok := e.Distribution.Binary[p]
		if !assert.True(t, ok, "a build for %s", p) {
			continue
		}
		ext, cmd := ".tar.gz", "./acpbridge"
		if strings.HasPrefix(p, "windows-") {
			ext, cmd = ".zip", "./acpbridge.exe"
		}
		assert.True(t, strings.HasSuffix(target.Archive, "/v"+e.Version+"/acpbridge-"+e.Version+"-"+p+ext), "%s: %s", p, target.Archive)
		assert.Equal(t, cmd, target.Cmd, p)
		assert.Equal(t, []string{"--fanout"}, target.Args, p)
	}
	out, err := exec.Command("bash", "scripts/registry-entry.sh", e.Version).Output()
	require.NoError(t, err)
	assert.Equal(t, string(out), string(raw), "dist/registry/agent.json is scripts/registry-entry.sh's for its version")
	err = exec.Command("bash", "scripts/registry-entry.sh", "1.2.0-rc1").Run()
	assert.Error(t, err, "a version that is not digits only is refused")
}

// Verify the icon as the registry and Zed take it: square, 16×16, drawn in
// currentColor with no colour of its own.
func TestRegistry_icon(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("dist/registry/icon.svg")
	require.NoError(t, err)
	var svg struct {
		XMLName xml.Name
		Width   string `xml:"width,attr"`
		Height  string `xml:"height,attr"`
		ViewBox string `xml:"viewBox,attr"`
	}
	require.NoError(t, xml.Unmarshal(b, &svg))
	assert.Equal(t, "svg", svg.XMLName.Local)
	assert.Equal(t, "16", svg.Width)
	assert.Equal(t, "16", svg.Height)
	assert.Equal(t, "0 0 16 16", svg.ViewBox)
	assert.Contains(t, string(b), "currentColor")
	for _, m := range regexp.MustCompile(`(fill|stroke|color)\s*[=:]\s*"?([^"; ]+)`).FindAllStringSubmatch(string(b), -1) {
		assert.Contains(t, []string{"currentColor", "none"}, m[2], "%s: no colour of its own", m[0])
	}
}

// registryPlatform is this machine's platform as the registry names it.
func registryPlatform() string {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	return runtime.GOOS + "-" + arch
}

// Verify a release as the registry's verifier takes it: scripts/release.sh
// builds this platform's archive and the entry pointing at it; the archive
// is fetched from where the entry says, matches SHA256SUMS, holds cmd at
// its root; cmd with the entry's args and stdin closed exits 0; the auth
// check's initialize (terminal-auth in _meta) is answered on the first
// line with an agent and a terminal method; the terminal method runs
// acpbridge setup both as the entry's args followed by its own and as its
// own alone; and with no sign-in, the router answers session/new -32000.
func TestRegistry_releaseArchive(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the release archive is checked where CI runs: Linux (tar, sha256sum)")
	}
	platform := registryPlatform()
	dir := t.TempDir()
	srv := httptest.NewServer(http.StripPrefix("/v9.8.7/", http.FileServer(http.Dir(dir))))
	t.Cleanup(srv.Close)
	cmd := exec.Command("bash", "scripts/release.sh", dir)
	cmd.Env = append(os.Environ(), "VERSION=9.8.7", "PLATFORMS="+platform, "RELEASES_URL="+srv.URL, "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	var e registryEntry
	raw, err := os.ReadFile(filepath.Join(dir, "agent.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &e))
	assert.Equal(t, "9.8.7", e.Version)
	target := e.Distribution.Binary[platform]
	require.True(t, strings.HasPrefix(target.Archive, srv.URL+"/v9.8.7/"), target.Archive)

	resp, err := http.Get(target.Archive)
	require.NoError(t, err)
	archive, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the entry's archive is the one release.sh built")
	sum := sha256.Sum256(archive)
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	require.NoError(t, err)
	assert.Contains(t, string(sums), hex.EncodeToString(sum[:])+"  acpbridge-9.8.7-"+platform+".tar.gz")

	sandbox := t.TempDir()
	names := untar(t, archive, sandbox)
	assert.ElementsMatch(t, []string{"acpbridge", "LICENSE", "README.md"}, names, "the binary at the archive's root")
	exe := filepath.Join(sandbox, strings.TrimPrefix(target.Cmd, "./"))
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "TERM=dumb"}

	launch := exec.Command(exe, target.Args...)
	launch.Dir, launch.Env = sandbox, env
	out, err = launch.CombinedOutput()
	assert.NoError(t, err, "the launch check: stdin closed, a clean exit: %s", out)

	check := startRegistryCheck(t, exe, sandbox, env, target.Args)
	methods := authMethods(t, check.next("the answer to initialize"))
	assert.Equal(t, []string{"agent api-key []", "terminal setup [setup]"}, methods)
	r := decodeResponse(t, check.call(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.NotNil(t, r.Error, "no sign-in yet")
	assert.Equal(t, -32000, r.Error.Code)
	assert.Contains(t, r.Error.Message, "sign in")
	check.close()

	for _, args := range [][]string{append(append([]string{}, target.Args...), "setup"), {"setup"}} {
		term := exec.Command(exe, args...)
		term.Dir, term.Env = sandbox, env
		out, err := term.CombinedOutput()
		require.Error(t, err, "%v: no key given", args)
		assert.Contains(t, string(out), "acpbridge setup: https://api.openai.com/v1 needs a key, and none was given", "%v runs setup", args)
	}
}

// startRegistryCheck starts exe as the registry's auth check does and
// sends its initialize.
func startRegistryCheck(t *testing.T, exe, dir string, env, args []string) *procAgent {
	p := startProcessWith(t, nil, func(cmd *exec.Cmd, ta *testAgent) {
		cmd.Path, cmd.Args, cmd.Dir, cmd.Env = exe, []string{exe}, dir, env
	}, args...)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"ACP Registry Validator","version":"1.0.0"},` +
		`"clientCapabilities":{"terminal":true,"fs":{"readTextFile":true,"writeTextFile":true},"_meta":{"terminal_output":true,"terminal-auth":true}}}}`)
	return p
}

// untar extracts a .tar.gz into dir; the names at its root.
func untar(t *testing.T, archive []byte, dir string) []string {
	t.Helper()
	gz, err := gzip.NewReader(strings.NewReader(string(archive)))
	require.NoError(t, err)
	tr := tar.NewReader(bufio.NewReader(gz))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		require.NoError(t, err)
		require.NotContains(t, h.Name, "..")
		names = append(names, strings.SplitN(h.Name, "/", 2)[0])
		f, err := os.OpenFile(filepath.Join(dir, h.Name), os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode))
		require.NoError(t, err, fmt.Sprint(h.Name))
		_, err = io.Copy(f, tr)
		require.NoError(t, err)
		f.Close()
	}
}
