// setting.go holds what a comparison's reader needs to run it again: the
// command and the machine it ran on, and each agent's file, its hash, the
// version it says it is and the ACP library its file was built with.

package report

import (
	"acpbridge/internal/shellword"
	"cmp"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
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

// environment is where a comparison ran.
type environment struct {
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	Kernel string `json:"kernel,omitempty"`
	CPU    string `json:"cpu,omitempty"`
	CPUs   int    `json:"cpus"`
	Go     string `json:"go"`
	Node   string `json:"node,omitempty"` // node --version, where node is on the PATH
	// MemoryBytes is the machine's RAM; LoadAverage its load over 1, 5
	// and 15 minutes as the comparison began.
	MemoryBytes int64     `json:"memory_bytes,omitempty"`
	LoadAverage []float64 `json:"load_average,omitempty"`
	Acpbridge   string    `json:"acpbridge"`
	Started     time.Time `json:"started"`
	// Command is the command that ran, the binary that ran first (not a
	// name a PATH may or may not find), one string quoted as a POSIX shell
	// splits it back into its words; WorkingDir is the directory it ran
	// in. From there, paste it to run the same again.
	Command    string `json:"command"`
	WorkingDir string `json:"working_directory"`
}

// workingDir is the directory this process runs in, or "" if unknown.
func workingDir() string {
	wd, _ := os.Getwd()
	return wd
}

// readNode notes node's version in the environment, once: asked only
// for a file that shows it.
func (c *Comparison) readNode() {
	if c.Environment.Node == "" {
		c.Environment.Node = nodeVersion()
	}
}

// nodeVersion is what `node --version` says, "" without node.
func nodeVersion() string {
	path, err := exec.LookPath("node")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// shellLine is words as one command line a POSIX shell splits back into
// them.
func shellLine(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellword.Quote(w)
		if w == "" {
			quoted[i] = "''"
		}
	}
	return strings.Join(quoted, " ")
}

type agentRecord struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
	// Path and SHA256 are the file the agent ran: the command's program,
	// or for an interpreter (node, python3, sh, bash) the script it was
	// given; "" where it could not be read.
	Path   string `json:"path,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Version is the name and version the agent gave in its answer to
	// initialize (agentInfo); SDK the ACP library its file was built
	// with, where that can be read (a Go binary's build information, or
	// the package.json of the SDK beside a Node script).
	Version string `json:"version,omitempty"`
	SDK     string `json:"sdk,omitempty"`
	// Program is what the command ran, read from its process, where that
	// is another file than Path (a wrapper script's program).
	Program *programRecord `json:"program,omitempty"`
}

// programRecord is the program an agent's command ran, where that is not
// the file its command names (a wrapper script started it): as read from
// the process that ran, hashed.
type programRecord struct {
	Command []string `json:"command"`
	Path    string   `json:"path,omitempty"`
	SHA256  string   `json:"sha256,omitempty"`
	SDK     string   `json:"sdk,omitempty"`
}

// ranProgram is what a run's tree ran (Stats.Program), for an agent whose
// command ran a wrapper: nil when it is the command's own file, or unread.
func (a agentRecord) ranProgram(program []string) *programRecord {
	if len(program) == 0 {
		return nil
	}
	path := ranFile(program)
	if path == "" || path == a.Path {
		return nil
	}
	return &programRecord{Command: program, Path: path, SHA256: fileSHA256(path), SDK: sdkOf(path)}
}

// newAgentRecord is an agent's record, its executable found and hashed.
func newAgentRecord(name string, command []string) agentRecord {
	a := agentRecord{Name: name, Command: command}
	a.Path = ranFile(command)
	a.SHA256 = fileSHA256(a.Path)
	a.SDK = sdkOf(a.Path)
	return a
}

// ranFile is the file a command runs: its program found on the PATH, or
// for an interpreter the first of its arguments that is a file.
func ranFile(command []string) string {
	path, err := exec.LookPath(command[0])
	if err != nil {
		return ""
	}
	switch strings.TrimSuffix(filepath.Base(path), ".exe") {
	case "node", "python3", "python", "sh", "bash":
		for _, arg := range command[1:] {
			if st, err := os.Stat(arg); err == nil && st.Mode().IsRegular() {
				abs, _ := filepath.Abs(arg)
				return abs
			}
		}
	}
	abs, _ := filepath.Abs(path)
	return abs
}

// fileSHA256 is the hex SHA-256 of the file at path, "" when it cannot
// be read.
func fileSHA256(path string) string {
	f, err := os.Open(path)
	if err != nil || path == "" {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeSetting writes what a reader needs to run the comparison again:
// the command, the machine and every agent's file and version.
func (c *Comparison) writeSetting(md *strings.Builder) {
	e := c.Environment
	fmt.Fprintf(md, "# Scenario comparison\n\nRun %s; to run it again:\n\n```sh\ncd %s && %s\n```\n\n", e.Started.Format(time.RFC3339), shellword.Quote(e.WorkingDir), e.Command)
	fmt.Fprintf(md, "| | |\n|---|---|\n| acpbridge | %s |\n| OS | %s/%s %s |\n| CPU | %s × %d |\n", e.Acpbridge, e.OS, e.Arch, e.Kernel, cmp.Or(e.CPU, "unknown"), e.CPUs)
	if e.MemoryBytes > 0 {
		fmt.Fprintf(md, "| RAM | %.1f GiB |\n", float64(e.MemoryBytes)/(1<<30))
	}
	if len(e.LoadAverage) == 3 {
		fmt.Fprintf(md, "| load average at the start | %.2f, %.2f, %.2f (1, 5, 15 min) |\n", e.LoadAverage[0], e.LoadAverage[1], e.LoadAverage[2])
		if lo, hi, ok := c.sampledRange(func(rec runRecord) []float64 { return firsts(rec.LoadAverage, rec.LoadAtEnd) }); ok {
			fmt.Fprintf(md, "| load average (1 min) as each run began and ended | %.2f to %.2f |\n", lo, hi)
		}
	}
	if lo, hi, ok := c.sampledRange(func(rec runRecord) []float64 { return rec.CPUMHz }); ok {
		fmt.Fprintf(md, "| CPU clock (the CPUs' mean) as each run began and ended | %.0f to %.0f MHz |\n", lo, hi)
	} else {
		md.WriteString("| CPU clock | not readable here |\n")
	}
	fmt.Fprintf(md, "| Go | %s |\n| Node | %s |\n| bootstrap seed | %d |\n\n", e.Go, cmp.Or(e.Node, "not on the PATH"), c.Seed)
	md.WriteString("| agent | says it is | command | file run | sha256 | ACP library |\n|---|---|---|---|---|---|\n")
	for _, a := range c.Agents {
		fmt.Fprintf(md, "| %s | %s | `%s` | %s | %s | %s |\n", a.Name, cmp.Or(a.Version, "–"), shellLine(a.Command), cmp.Or(a.Path, "not found"), cmp.Or(a.SHA256, "–"), cmp.Or(a.SDK, "–"))
		if p := a.Program; p != nil {
			fmt.Fprintf(md, "| %s, the program it started | | `%s` | %s | %s | %s |\n", a.Name, shellLine(p.Command), p.Path, cmp.Or(p.SHA256, "–"), cmp.Or(p.SDK, "–"))
		}
	}
}
