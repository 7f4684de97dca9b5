// command.go holds run_command: through the client's terminal/* methods when
// it advertised a terminal, otherwise as a local `sh -c` in its own process
// group. Either way a timeout or a cancel kills the command, and a client
// terminal is always released, after the final tool_call_update embeds it.

package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/clip"
	"acpbridge/internal/events"
	"acpbridge/internal/proc"
)

const (
	terminalOutputLimit = 1 << 20  // outputByteLimit asked of client terminals
	modelOutputLimit    = 32 << 10 // the tail of a command's output the model is sent
)

type exitStatus struct {
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
}

func (e *Env) runCommand(ctx context.Context, id string, command, dir string, timeout time.Duration) Outcome {
	if e.Client.Caps().Terminal {
		return e.runInTerminal(ctx, id, command, dir, timeout)
	}
	return e.runLocal(ctx, command, dir, timeout)
}

func (e *Env) runInTerminal(ctx context.Context, id string, command, dir string, timeout time.Duration) Outcome {
	var created struct {
		TerminalID string `json:"terminalId"`
	}
	shell, args := proc.Shell(command)
	err := e.Client.Call(ctx, acp.MethodTerminalCreate, acp.CreateTerminalParams{
		SessionID: e.SessionID, Command: shell, Args: args, Cwd: dir, OutputByteLimit: terminalOutputLimit,
	}, &created)
	if err != nil {
		return Failure("the editor could not start a terminal for %q: %v", command, err)
	}
	ids := acp.TerminalParams{SessionID: e.SessionID, TerminalID: created.TerminalID}
	release := e.releaser(ctx, ids)
	embed := []acp.ToolContent{{Type: "terminal", TerminalID: created.TerminalID}}
	e.Client.Update(new(acp.ToolCallProgress(id, acp.StatusInProgress, acp.MustJSON(embed), nil)))

	res, timedOut, err := e.awaitTerminal(ctx, ids, timeout)
	if err != nil {
		o := Failure("the editor's terminal failed for %q: %v", command, err)
		o.Content = append(embed, o.Content...)
		o.After = release
		return o
	}
	st := res.ExitStatus
	if st == nil {
		st = &exitStatus{}
	}
	o := commandOutcome(command, res.Output, st, res.Truncated, timedOut, timeout, ctx.Err() != nil)
	o.Content = e.terminalContent(embed, o.Result)
	o.After = release
	return o
}

// terminalContent is what the client is shown of a command run in its
// terminal: the terminal, and the result as text too unless the client
// renders terminals inline (Zed says so with _meta.terminal_output); others
// (acpx) show "[terminal] id".
func (e *Env) terminalContent(embed []acp.ToolContent, result string) []acp.ToolContent {
	if e.Client.Caps().Meta.TerminalOutput {
		return embed
	}
	return append(embed, acp.TextOut(result))
}

// releaser returns what releases the client's terminal ids once the call's
// outcome has been shown. It must reach the client even when the turn is
// cancelled.
func (e *Env) releaser(ctx context.Context, ids acp.TerminalParams) func() {
	return func() {
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), clientGrace)
		defer cancel()
		if err := e.Client.Call(bg, acp.MethodTerminalRelease, ids, nil); err != nil {
			e.Log.Warn("releasing a terminal failed", "terminal", ids.TerminalID, "err", err)
		}
	}
}

// terminalOutput is the client's answer to terminal/output.
type terminalOutput struct {
	Output     string      `json:"output"`
	Truncated  bool        `json:"truncated"`
	ExitStatus *exitStatus `json:"exitStatus"`
}

// clientGrace bounds what the agent still asks of the client's terminal
// once a command is being stopped (kill, its exit, its output) and its
// release: a client that goes quiet after a cancel cannot hold the turn.
const clientGrace = 2 * time.Second

// awaitTerminal waits for the client's terminal ids to exit, killing it at
// the timeout or when the turn is cancelled, and asks for its output. After
// a kill, the exit and the output are waited for clientGrace at most.
func (e *Env) awaitTerminal(ctx context.Context, ids acp.TerminalParams, timeout time.Duration) (res terminalOutput, timedOut bool, err error) {
	waitCtx, stopWaiting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWaiting()
	waited := make(chan error, 1)
	go func() { waited <- e.Client.Call(waitCtx, acp.MethodTerminalWait, ids, nil) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	after := waitCtx // what the output is asked with
	select {
	case err = <-waited:
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
	}
	if timedOut || ctx.Err() != nil {
		var cancel context.CancelFunc
		after, cancel = context.WithTimeout(waitCtx, clientGrace)
		defer cancel()
		e.Client.Call(after, acp.MethodTerminalKill, ids, nil)
		select {
		case err = <-waited:
		case <-after.Done():
			return res, timedOut, fmt.Errorf("the editor did not report the command's end within %v of killing it", clientGrace)
		}
	}
	if err == nil {
		err = e.Client.Call(after, acp.MethodTerminalOutput, ids, &res)
	}
	return res, timedOut, err
}

func (e *Env) runLocal(ctx context.Context, command, dir string, timeout time.Duration) Outcome {
	e.Client.Pause()                            // the client sees the tool call while the command runs
	cmd := e.Procs.Command(proc.Shell(command)) // sh -c, or cmd /C on Windows
	cmd.Dir = dir
	tag := e.newTag()
	cmd.Env = append(slices.Clip(e.ChildEnv), proc.TagVar+"="+tag)
	out := &tailBuffer{limit: terminalOutputLimit}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second // a background grandchild must not hold the turn
	started := e.Procs.Starting()
	err := cmd.Start()
	started(cmd)
	if err != nil {
		return Failure("cannot run %q: %v", command, err)
	}
	if err := e.Procs.Started(cmd); err != nil {
		e.Log.Warn("a command's children may outlive acpbridge if it is killed", "err", err)
	}
	e.Log.Debug("command started", events.Of(events.CommandStarted), "pid", cmd.Process.Pid)
	timedOut, err := e.awaitLocal(ctx, cmd, timeout, tag)
	st, err := localStatus(cmd, err)
	if err != nil {
		return Failure("running %q Failed: %v", command, err)
	}
	text, truncated := out.String()
	o := commandOutcome(command, text, st, truncated, timedOut, timeout, ctx.Err() != nil)
	o.Content = []acp.ToolContent{acp.TextOut(o.Result)}
	return o
}

// awaitLocal waits for the started cmd, killing it at the timeout or when
// the turn is cancelled, and then whatever it left running in its group.
// A command stopped early takes with it everything it started, also what
// left its group (setsid), which would hold the output pipe open.
func (e *Env) awaitLocal(ctx context.Context, cmd *exec.Cmd, timeout time.Duration, tag string) (timedOut bool, err error) {
	pid := cmd.Process.Pid
	done := make(chan error, 1)
	grouped := make(chan bool, 1) // whether the group was ended before the reap
	go func() {
		// The group is ended while the exited shell still holds its pid
		// (not yet reaped), so that a pid reused since cannot be hit.
		early := proc.WaitExited(pid)
		if early {
			e.Procs.KillGroup(pid)
		}
		grouped <- early
		done <- cmd.Wait()
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err = <-done:
	case <-timer.C:
		timedOut = true
		e.Procs.Kill(cmd.Process.Pid)
		err = <-done
		e.Procs.KillTagged(tag) // the daemons it detached (setsid), re-parented here
	case <-ctx.Done():
		e.Procs.Kill(cmd.Process.Pid)
		err = <-done
		e.Procs.KillTagged(tag)
	}
	if !<-grouped {
		e.Procs.KillGroup(pid) // whatever the command left running in its group
	}
	return timedOut, err
}

// localStatus is how the waited cmd ended, or the error when it could not
// be waited for.
func localStatus(cmd *exec.Cmd, err error) (*exitStatus, error) {
	st := &exitStatus{}
	var ee *exec.ExitError
	switch {
	case err == nil || errors.As(err, &ee):
		if sig := proc.ExitSignal(cmd.ProcessState); sig != "" {
			st.Signal = &sig
		} else {
			code := cmd.ProcessState.ExitCode()
			st.ExitCode = &code
		}
	case errors.Is(err, exec.ErrWaitDelay):
		code := cmd.ProcessState.ExitCode()
		st.ExitCode = &code
	default:
		return nil, err
	}
	return st, nil
}

// commandOutcome words a finished command for the model and the client.
func commandOutcome(command, output string, st *exitStatus, truncated, timedOut bool, timeout time.Duration, cancelled bool) Outcome {
	var sb strings.Builder
	sb.WriteString(howEnded(st, timedOut, timeout, cancelled))
	if len(output) > modelOutputLimit {
		output = output[len(output)-modelOutputLimit:]
		truncated = true
	}
	if truncated {
		sb.WriteString("(output truncated; this is its end)\n")
	}
	sb.WriteString("Output:\n")
	sb.WriteString(output)
	failed := timedOut || cancelled || st.ExitCode == nil || *st.ExitCode != 0
	return Outcome{
		Failed:    failed,
		RawOutput: map[string]any{"exitCode": st.ExitCode, "signal": st.Signal, "timedOut": timedOut, "truncated": truncated},
		Result:    sb.String(),
	}
}

// howEnded is the first lines of a command's result: why it was killed,
// if it was, and its exit code or signal.
func howEnded(st *exitStatus, timedOut bool, timeout time.Duration, cancelled bool) string {
	var sb strings.Builder
	switch {
	case cancelled:
		sb.WriteString("The command was killed: the turn was cancelled.\n")
	case timedOut:
		fmt.Fprintf(&sb, "The command timed out after %v and was killed.\n", timeout)
	}
	if st.ExitCode != nil {
		fmt.Fprintf(&sb, "Exit code: %d\n", *st.ExitCode)
	} else if st.Signal != nil {
		fmt.Fprintf(&sb, "Killed by signal %s\n", *st.Signal)
	}
	return sb.String()
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu      sync.Mutex
	limit   int
	buf     []byte // a ring of limit bytes once full; next is where the oldest byte is
	next    int
	dropped bool
}

// Write keeps the last limit bytes written: a ring, so that a command
// writing as fast as it can costs a copy of what it writes, not of the
// whole tail at every write.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(b.buf) < b.limit { // filling up
		k := min(len(p), b.limit-len(b.buf))
		b.buf = append(b.buf, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	b.dropped = true
	if len(p) >= b.limit { // only its tail stays
		copy(b.buf, p[len(p)-b.limit:])
		b.next = 0
		return n, nil
	}
	k := copy(b.buf[b.next:], p)
	copy(b.buf, p[k:])
	b.next = (b.next + len(p)) % b.limit
	return n, nil
}

// String is what was kept, oldest first, and whether anything was dropped.
func (b *tailBuffer) String() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf[b.next:]) + string(b.buf[:b.next]), b.dropped
}

type commandInput struct {
	Command   string `json:"command"`
	Cwd       string `json:"cwd"`
	TimeoutMs int64  `json:"timeout_ms"`
}

func prepareCommand(env *Env, in commandInput, c *Call) error {
	c.Title = "Run " + clip.Marked(in.Command, 80)
	if strings.TrimSpace(in.Command) == "" {
		return errors.New("run_command needs a command")
	}
	dir := env.Cwd
	if in.Cwd != "" {
		var err error
		if dir, err = env.resolve(in.Cwd); err != nil {
			return err
		}
	}
	timeout := 120 * time.Second
	switch {
	case in.TimeoutMs < 0:
		return fmt.Errorf("run_command: timeout_ms must be positive, not %d", in.TimeoutMs)
	case in.TimeoutMs > maxCommandTimeout.Milliseconds():
		return fmt.Errorf("run_command: timeout_ms may be at most %d (%v), not %d", maxCommandTimeout.Milliseconds(), maxCommandTimeout, in.TimeoutMs)
	case in.TimeoutMs > 0:
		timeout = time.Duration(in.TimeoutMs) * time.Millisecond
	}
	c.Run = func(ctx context.Context, id string) Outcome { return env.runCommand(ctx, id, in.Command, dir, timeout) }
	return nil
}

// newTag makes the mark of one command's processes (proc.TagVar).
func (e *Env) newTag() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
