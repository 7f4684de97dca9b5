// run.go holds what one run of an agent measured, the comparison's raw
// material: its handshake's and each turn's times, messages and model
// calls as the client and the served model saw them, and its process
// tree's memory, CPU and processes. The scenario runner fills it in.

package report

import (
	"acpbridge/internal/served"
	"time"
)

// Run is what one run of a scenario measured of an agent: with
// `--threads`, one session's run. A duration not measured is -1.
type Run struct {
	Err   error // nil when it passed
	Lines int   // agent lines matched
	// AgentInfo is the name and version the agent gave in its answer to
	// initialize ("" when it gave none).
	AgentInfo string
	Turns     []Turn // each prompt's figures, in the order they were sent
	Stats     Stats  // what the agent used (zero when not measured)

	// Initialize is from the agent's start to its answer to initialize,
	// NewSession from the first session/new's write to its answer; -1
	// when the run had none.
	Initialize, NewSession time.Duration
	// EndedByRun says the agent had not exited soon after its stdin
	// closed, and the run ended it.
	EndedByRun bool
	StartedAt  time.Time // when the run began (UTC)
	// Load and LoadEnd are the machine's load average as it began and
	// ended (1, 5, 15 min; nil where unread); MHz the CPUs' mean clock
	// then (0 where unread): the machine sampled through the comparison.
	Load, LoadEnd []float64
	MHz           [2]float64
	// Served says the run had a served model to ask; Model is what it was
	// asked over the whole run, nil without one (and for a session of
	// `--threads` but the first, whose Model is every session's).
	Served bool
	Model  *served.Count
	// Session is the session's number among the run's `--threads` (from
	// 1); 0 for a run of its own.
	Session int
	// Round is the counted round of `--repeat` it ran in (from 1; 0 for a
	// warm-up or a run of its own): a run's sessions share it, and
	// intervals resample rounds. Seq is the run's place among the
	// scenario's counted runs of every agent, in the order they ran (from
	// 1).
	Round, Seq int
}

// Machine is the machine a comparison ran on, as far as the platform
// says: the kernel's release, the CPU's model, the RAM in bytes and the
// load average over 1, 5 and 15 minutes.
type Machine struct {
	Kernel, CPU string
	Memory      int64
	Load        []float64
}

// Turn is one prompt as the client saw it: from the request's write to the
// first session/update after it, and to its answer; the lines the agent
// sent meanwhile (the answer included) and their bytes; and what the
// served model was asked meanwhile (nil for a session of `--threads`: what
// the model was asked meanwhile is every session's, not the turn's).
type Turn struct {
	// FirstOutput is to the first update that carries the model's output
	// (text, a thought, a tool call or a plan), Answer to the prompt's
	// answer; -1: none came.
	FirstOutput, Answer time.Duration
	// CPU is what the agent's tree used from the prompt's write to its
	// answer; -1 where not read: outside Linux, and for a session of
	// `--threads`, whose tree is every session's.
	CPU      time.Duration
	Failed   bool // the prompt was answered with an error: its answer time is no answer's
	Messages int
	Bytes    int64
	Model    *served.Count
	// Sent counts the agent's messages meanwhile by kind: "update
	// tool_call", "request session/request_permission".
	Sent map[string]int
}

// Stats is what an agent's processes used over a run. A figure the
// platform cannot give is -1.
type Stats struct {
	// PeakRSS is the largest sum of each process's peak RSS so far (VmHWM
	// keeps a process's peak between samples) over the processes seen
	// when the agent had answered every request: those it keeps, not a
	// command's short-lived shell.
	PeakRSS int64
	PeakPSS int64 // bytes: the largest sum of proportional set sizes over the tree seen
	// PeakUSS is the largest sum over the tree of each process's private
	// pages (unique set size): unlike PSS it does not move with what
	// other processes on the machine map of the same files.
	PeakUSS int64
	// PeakAnon is the largest sum over the tree of each process's
	// anonymous memory (heaps, stacks: no file's pages): unlike PSS and
	// USS it does not move when other processes map the same binary.
	PeakAnon int64
	// CPU is the user and system time of the tree: the agent's own and
	// its waited-for children's at its end, or where more, the sum of
	// every process's own time as last sampled.
	CPU time.Duration
	// Processes is the most processes in its tree at once whenever the
	// agent had answered every request (and as its stdin closed): what it
	// keeps running, counted the same way every run, not a command's
	// short-lived shell a sampler may or may not catch (-1: never seen).
	Processes int
	// Program is the command line of the program the tree ran, read as
	// the agent first answered everything (under a wrapper script, what
	// it started); nil where it could not be read.
	Program []string
}
