// names.go is the list of events: each name, a constant, with what it
// says. docs/design.md lists them too (a test holds the two together), and
// a test that waits for a name not in the list fails at once.

package events

// Name is an event's name: stable, unlike a log message's wording.
type Name string

// The events, each with the attributes it carries.
const (
	// The one-session agent.
	SessionClosed   Name = "session_closed"    // session: the session is closed (session/close, delete, the connection's end)
	OpeningEnded    Name = "opening_ended"     // session: a session/close ended the session's opening (load, resume)
	CommandStarted  Name = "command_started"   // pid: a run_command's process started
	MCPUnavailable  Name = "mcp_unavailable"   // server, err: an MCP server did not start (failed, too slow, or given up with its session)
	MCPStopped      Name = "mcp_stopped"       // server, err: an MCP server stopped
	MCPToolsChanged Name = "mcp_tools_changed" // server, tools: an MCP server's tools changed

	// The router (--fanout): which process is which thread.
	ThreadHeld      Name = "thread_held"      // session, pid: a thread took a process (opened, loaded, reopened)
	ChildEnded      Name = "child_ended"      // session, pid, status: a thread's process ended unexpectedly
	Evicting        Name = "evicting"         // session, why, pid, idle: a thread's process is being given back
	IdleKept        Name = "idle_kept"        // session, why: an idle thread keeps its process (it cannot be evicted now)
	Reopening       Name = "reopening"        // session, with, pid: a thread is being reopened in a new process
	ThreadGivenUp   Name = "thread_given_up"  // session, crashes: a thread whose process keeps ending is closed
	EvictionOff     Name = "eviction_off"     // agent, why: the agent cannot reopen a session: threads are never evicted
	EvictionStopped Name = "eviction_stopped" // why: a reopen failed: threads are no longer evicted
	InitTimeout     Name = "init_timeout"     // pid, timeout: an agent process did not answer initialize in time
	RequestHeld     Name = "request_held"     // id, method, waits: a request of the client's waits (process, thread, load, joined, init, ready, answer)

	// The router's spares.
	SpareStarted   Name = "spare_started"   // dir: a spare process is started
	SparesWaiting  Name = "spares_waiting"  // for, at_most: the spares wait for a thread's first turn, or an opening
	SparesWaited   Name = "spares_waited"   // why: the spares' wait ended
	WarmingStopped Name = "warming_stopped" // starts, why: the agent exits at every start: no more spares until asked

	// The router and a misbehaving child.
	ChildLineDropped Name = "child_line_dropped" // pid, session, bytes: a child's line that is no JSON-RPC message
	ChildSpoofed     Name = "child_spoofed"      // pid, serves, named, method: a child named another thread's session
	ChildOutputHeld  Name = "child_output_held"  // pid, bytes, all: a child is read no further until the client reads (bytes: its own, with the fragment it waits to read; all: every child's)
	ChildLinePasses  Name = "child_line_passes"  // pid, bytes, all: a child's line passes the budget, alone (one line always passes)
	CancelBehind     Name = "cancel_behind"      // pid, session: a child behind on its input has its prompts cancelled
	MoveRefused      Name = "move_refused"       // machine, from, to: a state move not in its table (a bug)
)

// All is every event, in the order above.
func All() []Name {
	return []Name{
		SessionClosed, OpeningEnded, CommandStarted, MCPUnavailable, MCPStopped, MCPToolsChanged,
		ThreadHeld, ChildEnded, Evicting, IdleKept, Reopening, ThreadGivenUp, EvictionOff, EvictionStopped, InitTimeout, RequestHeld,
		SpareStarted, SparesWaiting, SparesWaited, WarmingStopped,
		ChildLineDropped, ChildSpoofed, ChildOutputHeld, ChildLinePasses, CancelBehind, MoveRefused,
	}
}
