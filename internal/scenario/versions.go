// versions.go finds what a comparison's reader needs to run the same
// agents again: the version an agent says it is, and the ACP library its
// file was built with.

package scenario

import (
	"debug/buildinfo"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// sdkOf is the ACP library the file was built with: a Go
// binary's ACP module from its build information, or for a script the
// ACP package in the node_modules nearest it; "" when neither is found.
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
	for dir := filepath.Dir(file); ; dir = filepath.Dir(dir) {
		for _, pkg := range []string{"@agentclientprotocol/sdk", "@zed-industries/agent-client-protocol"} {
			if v := packageVersion(filepath.Join(dir, "node_modules", pkg, "package.json")); v != "" {
				return pkg + " " + v
			}
		}
		if filepath.Dir(dir) == dir {
			return ""
		}
	}
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
