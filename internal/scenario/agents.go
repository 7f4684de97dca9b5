// agents.go holds the agents a run starts: --agent's command lines and
// names, the flags each gets from a scenario, and the starter that runs an
// agent as a process in an environment of its own.

package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-shellwords"

	"acpbridge/internal/proc"
	"acpbridge/internal/report"
	"acpbridge/internal/served"
)

// agentSpec is an agent to run: its name, its command line, and whether
// it is acpbridge (which takes the file's -- flags --).
type agentSpec struct {
	name      string
	command   []string
	acpbridge bool
}

// parseAgent reads --agent's [NAME=]CMD: the command split as a shell
// would split it (quotes and escapes; no expansion), its name the word
// before = or its program's base name.
func parseAgent(v, self string) (agentSpec, error) {
	var a agentSpec
	if name, rest, ok := strings.Cut(v, "="); ok && isAgentName(name) {
		a.name, v = name, rest
	}
	words, err := shellwords.Parse(v)
	if err != nil {
		return a, fmt.Errorf("%q: %v", v, err)
	}
	if len(words) == 0 {
		return a, fmt.Errorf("%q names no command", v)
	}
	a.command = words
	// acpbridge --fanout -- CMD is the agent CMD behind the router: it
	// takes the file's flags as CMD does.
	a.acpbridge = isAcpbridge(words[0], self) && !slices.Contains(words, "--")
	if a.name == "" {
		a.name = strings.TrimSuffix(filepath.Base(words[0]), ".exe")
	}
	return a, nil
}

// isAgentName reports whether s can name an agent: letters, digits, _ . -
// (a regexp compiled at package init would cost every acpbridge process's
// start-up).
func isAgentName(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-')
	})
}

// flags are the agent's flags from a scenario: a flags/NAME section's when
// the file has one for the agent, else the file's -- flags -- for acpbridge
// or for a command that asks for them with the word $FLAGS, else none.
func (a agentSpec) flags(sc *Scenario) []string {
	if own, ok := sc.AgentFlags(a.name); ok {
		return own
	}
	if a.acpbridge || slices.Contains(a.command, flagsWord) {
		return sc.Flags
	}
	return nil
}

// overServedModel is flags with an in-process replay model (--model
// replay:PATH) replaced by the run's served model: in a comparison every
// agent gets its model answers over HTTP, acpbridge too, so that each
// pays for the same requests.
func overServedModel(flags []string) []string {
	var out []string
	for i := 0; i < len(flags); i++ {
		name, val, hasVal := strings.Cut(flags[i], "=")
		if name != "--model" && name != "-model" {
			out = append(out, flags[i])
			continue
		}
		if !hasVal && i+1 < len(flags) {
			i++
			val = flags[i]
		}
		if strings.HasPrefix(val, "replay:") {
			out = append(out, "--model", "openai:"+served.ModelName, "--base-url", "$MODEL_URL")
		} else {
			out = append(out, "--model", val)
		}
	}
	return out
}

// flagsWord, as a word of --agent's command, is where the agent's flags go
// (by default, after its words).
const flagsWord = "$FLAGS"

// uniqueNames is the agents' names, a second of a name numbered.
func uniqueNames(agents []agentSpec) []string {
	seen := map[string]int{}
	var out []string
	for _, a := range agents {
		seen[a.name]++
		name := a.name
		if n := seen[a.name]; n > 1 {
			name = fmt.Sprintf("%s#%d", a.name, n)
		}
		out = append(out, name)
	}
	return out
}

// withFlags is a command's arguments with flags in place of the word
// $FLAGS, or after them when there is none.
func withFlags(args, flags []string) []string {
	i := slices.Index(args, flagsWord)
	if i < 0 {
		return append(slices.Clip(args), flags...)
	}
	return slices.Concat(args[:i], flags, args[i+1:])
}

// servedKey is the API key agents get for the served model endpoint, which
// takes any.
const servedKey = "sk-scenario-served-model"

// Exec returns a starter that runs command as a process with the
// scenario's flags after its words, in the run directory, in an
// environment of its own (isolatedEnv). The agent runs in a process group
// of its own, which is killed once it has exited: a helper it left in the
// background, holding its stdout or stderr, neither holds the run nor
// outlives it.
func Exec(command []string) func(flags []string, env Env) (*Agent, error) {
	return func(flags []string, env Env) (*Agent, error) {
		var group *proc.Guard // no keeper: the group is ended here
		cmd := group.Command(command[0], withFlags(command[1:], flags))
		cmd.Dir = env.Dir
		cmd.Env = isolatedEnv(os.Environ(), env)
		errTail := &tail{max: 8 << 10}
		cmd.Stderr = errTail
		cmd.WaitDelay = time.Second // stderr's copy, held by a helper
		stdin, err1 := cmd.StdinPipe()
		stdout, w, err2 := os.Pipe()
		cmd.Stdout = w
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("%s: %w", command[0], err)
		}
		err := cmd.Start()
		w.Close()
		if err != nil {
			stdout.Close()
			return nil, fmt.Errorf("%s: %w", command[0], relativeHint(command[0], env.Dir, err))
		}
		pid := cmd.Process.Pid
		watch := startSampler(pid)
		var code int
		var stats report.Stats
		exited := make(chan struct{})
		go func() {
			err := cmd.Wait()
			if errors.Is(err, exec.ErrWaitDelay) {
				err = nil // it exited 0; a helper held its stderr
			}
			code = exitCode(err)
			stats = watch.finish(cmd.ProcessState)
			group.KillGroup(pid) // what it left behind; its stdout then ends
			close(exited)
		}()
		wait := func() int {
			<-exited
			return code
		}
		kill := func() {
			cmd.Process.Kill() // by its handle, where the OS reuses pids
			group.Kill(pid)
			wait()
		}
		end := func() {
			proc.TermGroup(pid)
			select {
			case <-exited:
			case <-time.After(time.Second):
				kill()
			}
		}
		return &Agent{Stdin: closingStdin{stdin, watch}, Stdout: stdout, Wait: wait, Kill: kill, End: end, Stderr: errTail.String,
			Stats: func() report.Stats { wait(); return stats }, Settled: watch.settled, ReadCPU: func() map[int]time.Duration { return treeCPU(pid) }}, nil
	}
}

// relativeHint adds to a failed start of a relative command what it was
// relative to: agents start in the run's directory, not the caller's.
func relativeHint(name, dir string, err error) error {
	if filepath.IsAbs(name) || !strings.ContainsRune(name, filepath.Separator) {
		return err
	}
	return fmt.Errorf("%w (a relative command starts from the run's directory %s: give --agent an absolute path, such as $PWD/%s)", err, dir, filepath.Clean(name))
}

// isolatedEnv is the agent's environment: the user's, less what would
// change a scenario's result (acpbridge's own ACPBRIDGE_* settings, the
// model endpoint), with HOME and the XDG state directory inside the run's
// directory, and the run's directories named: SCENARIO_DIR, SCENARIO_CWD,
// SCENARIO_STATE. When the run serves the scenario's model, OPENAI_BASE_URL
// and MODEL_URL name that endpoint, ANTHROPIC_BASE_URL and
// GOOGLE_GEMINI_BASE_URL its root (the Anthropic and Gemini clients add
// their own path), and OPENAI_API_KEY, ANTHROPIC_API_KEY and GEMINI_API_KEY
// are a dummy key. A file's result does not depend on who runs it.
func isolatedEnv(user []string, env Env) []string {
	var out []string
	for _, kv := range user {
		name, _, _ := strings.Cut(kv, "=")
		is := func(n string) bool { return proc.SameEnvName(name, n) } // without case on Windows
		switch {
		case proc.EnvNameHasPrefix(name, "ACPBRIDGE_"), is("OPENAI_BASE_URL"), is("HOME"), is("XDG_STATE_HOME"),
			env.ModelURL != "" && slices.ContainsFunc(servedVars, is):
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "HOME="+filepath.Join(env.Dir, "home"), "XDG_STATE_HOME="+filepath.Join(env.Dir, "home", ".local", "state"),
		"SCENARIO_DIR="+env.Dir, "SCENARIO_CWD="+env.Cwd, "SCENARIO_STATE="+env.State)
	if env.ModelURL != "" {
		base := strings.TrimSuffix(env.ModelURL, "/v1")
		out = append(out, "OPENAI_BASE_URL="+env.ModelURL, "OPENAI_API_KEY="+servedKey, "MODEL_URL="+env.ModelURL,
			"ANTHROPIC_BASE_URL="+base, "ANTHROPIC_API_KEY="+servedKey, "GOOGLE_GEMINI_BASE_URL="+base, "GEMINI_API_KEY="+servedKey)
	}
	return out
}

// servedVars are the variables that point an agent at a model: the run's
// served model takes their place.
var servedVars = []string{"OPENAI_API_KEY", "MODEL_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
	"GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY"}

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
