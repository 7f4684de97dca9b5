// versions.go finds what a comparison's reader needs to run the same
// agents again: the version an agent says it is, and the ACP library its
// file was built with.

package scenario

import (
	"debug/buildinfo"
	"encoding/json"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// sdkOf is the ACP library the file was built with: a Go
// binary's ACP module from its build information, or for a script that
// names the ACP package itself (imports or bundles it) that package's
// version in the node_modules nearest it; "" when neither is found. A
// wrapper that names no package (a shell script that execs an agent) is
// credited with none, whatever lies beside it.
func sdkOf(file string) string {
	if file == "" {
		return ""
	}
	if info, err := buildinfo.ReadFile(file); err == nil {
		for _, d := range info.Deps {
			if base := path.Base(d.Path); strings.HasPrefix(base, "acp") || strings.Contains(d.Path, "agent-client-protocol") {
				return d.Path + " " + d.Version
			}
		}
		return ""
	}
	text, err := readHead(file, 64<<20)
	if err != nil {
		return ""
	}
	for dir := filepath.Dir(file); ; dir = filepath.Dir(dir) {
		for _, pkg := range []string{"@agentclientprotocol/sdk", "@zed-industries/agent-client-protocol"} {
			if !strings.Contains(text, pkg) {
				continue // the file's own text does not show it
			}
			if v := packageVersion(filepath.Join(dir, "node_modules", pkg, "package.json")); v != "" {
				return pkg + " " + v
			}
		}
		if filepath.Dir(dir) == dir {
			return ""
		}
	}
}

// readHead is the first n bytes of file, as text.
func readHead(file string, n int64) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, n))
	return string(b), err
}

// packageVersion is the version a package.json gives, "" when there is
// none.
func packageVersion(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var pkg struct{ Version string }
	json.Unmarshal(b, &pkg)
	return pkg.Version
}

// agentInfo is the name and version an agent gave in its answer to
// initialize, among the lines it sent; "" when it gave none.
func agentInfo(received [][]byte) string {
	for _, line := range received {
		if !strings.Contains(string(line), `"agentInfo"`) {
			continue
		}
		var msg struct {
			Result struct {
				AgentInfo struct{ Name, Version string }
			}
		}
		if json.Unmarshal(line, &msg) == nil && msg.Result.AgentInfo.Name != "" {
			return strings.TrimSpace(msg.Result.AgentInfo.Name + " " + msg.Result.AgentInfo.Version)
		}
	}
	return ""
}
