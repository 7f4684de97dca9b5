// command.go holds run_command: through the client's terminal/* methods when
// it advertised a terminal, otherwise as a local `sh -c` in its own process
// group. Either way a timeout or a cancel kills the command, and a client
// terminal is always released, after the final tool_call_update embeds it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"acpbridge/internal/acp"
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

func (a *agent) runCommand(ctx context.Context, s *SessionRecord, p *prepared, command, dir string, timeout time.Duration) outcome {
	if a.clientCaps().Terminal {
		return a.runInTerminal(ctx, s, p, command, dir, timeout)
	}
	return a.runLocal(ctx, s, command, dir, timeout)
}

func (a *agent) runInTerminal(ctx context.Context, s *SessionRecord, p *prepared, command, dir string, timeout time.Duration) outcome {
	var created struct {
		TerminalID string `json:"terminalId"`
	}
	err := a.call(ctx, s, acp.MethodTerminalCreate, map[string]any{
		"sessionId": s.id, "command": "sh", "args": []string{"-c", command}, "cwd": dir,
		"outputByteLimit": terminalOutputLimit,
	}, &created)
	if err != nil {
		return failure("the editor could not start a terminal for %q: %v", command, err)
	}
	ids := map[string]string{"sessionId": s.id, "terminalId": created.TerminalID}
	// Kill and release must reach the client even when the turn is cancelled.
	bg := context.WithoutCancel(ctx)
	release := func() {
		if err := a.call(bg, s, acp.MethodTerminalRelease, ids, nil); err != nil {
			a.log.Warn("releasing a terminal failed", "terminal", created.TerminalID, "err", err)
		}
	}
	embed := []acp.ToolContent{{Type: "terminal", TerminalID: created.TerminalID}}
	a.out.NotifyJSON(s.id, acp.ToolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: p.id, Status: "in_progress", Content: acp.MustJSON(embed)})

	waited := make(chan error, 1)
	go func() { waited <- a.call(bg, s, acp.MethodTerminalWait, ids, nil) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var timedOut bool
	select {
	case err = <-waited:
	case <-timer.C:
		timedOut = true
		a.call(bg, s, acp.MethodTerminalKill, ids, nil)
		err = <-waited
	case <-ctx.Done():
		a.call(bg, s, acp.MethodTerminalKill, ids, nil)
		err = <-waited
	}
	var res struct {
		Output     string      `json:"output"`
		Truncated  bool        `json:"truncated"`
		ExitStatus *exitStatus `json:"exitStatus"`
	}
	if err == nil {
		err = a.call(bg, s, acp.MethodTerminalOutput, ids, &res)
	}
	if err != nil {
		o := failure("the editor's terminal failed for %q: %v", command, err)
		o.content = append(embed, o.content...)
		o.after = release
		return o
	}
	st := res.ExitStatus
	if st == nil {
		st = &exitStatus{}
	}
	o := commandOutcome(command, res.Output, st, res.Truncated, timedOut, timeout, ctx.Err() != nil)
	o.content = embed
	if !a.clientCaps().Meta.TerminalOutput {
		// Only a client that renders terminals inline (Zed says so with
		// _meta.terminal_output) shows the output from the terminal block;
		// others (acpx) show "[terminal] id". They get the output as text.
		o.content = append(o.content, acp.TextOut(o.result))
	}
	o.after = release
	return o
}

func (a *agent) runLocal(ctx context.Context, s *SessionRecord, command, dir string, timeout time.Duration) outcome {
	a.pause(s) // the client sees the tool call while the command runs
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL} // reap.go
	out := &tailBuffer{limit: terminalOutputLimit}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second // a background grandchild must not hold the turn
	if err := cmd.Start(); err != nil {
		return failure("cannot run %q: %v", command, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	kill := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A command stopped early takes with it everything it started, also
	// what left its group (setsid), which would hold the output pipe open.
	killAll := func() {
		left := proc.Descendants(cmd.Process.Pid) // before the group goes: then they are re-parented
		kill()                                    // the shell first, so that it reports the kill
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var err error
	var timedOut bool
	select {
	case err = <-done:
	case <-timer.C:
		timedOut = true
		killAll()
		err = <-done
	case <-ctx.Done():
		killAll()
		err = <-done
	}
	kill() // whatever the command left running in its group
	st := &exitStatus{}
	var ee *exec.ExitError
	switch {
	case err == nil || errors.As(err, &ee):
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			sig := ws.Signal().String()
			st.Signal = &sig
		} else {
			code := ws.ExitStatus()
			st.ExitCode = &code
		}
	case errors.Is(err, exec.ErrWaitDelay):
		code := cmd.ProcessState.ExitCode()
		st.ExitCode = &code
	default:
		return failure("running %q failed: %v", command, err)
	}
	text, truncated := out.String()
	o := commandOutcome(command, text, st, truncated, timedOut, timeout, ctx.Err() != nil)
	o.content = []acp.ToolContent{acp.TextOut(o.result)}
	return o
}

// commandOutcome words a finished command for the model and the client.
func commandOutcome(command, output string, st *exitStatus, truncated, timedOut bool, timeout time.Duration, cancelled bool) outcome {
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
	return outcome{
		failed:    failed,
		rawOutput: map[string]any{"exitCode": st.ExitCode, "signal": st.Signal, "timedOut": timedOut, "truncated": truncated},
		result:    sb.String(),
	}
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu      sync.Mutex
	limit   int
	buf     []byte
	dropped bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.dropped = true
	}
	return len(p), nil
}

func (b *tailBuffer) String() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf), b.dropped
}
