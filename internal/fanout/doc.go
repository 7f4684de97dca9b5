// Package fanout holds the router of --fanout: many sessions on one
// connection, each in a single-session child process of its own: acpbridge,
// or with `--fanout -- CMD` any ACP agent. It is for clients that open
// several sessions on one agent process (Zed's threads); the one-session
// agent (the root's session.go) is untouched, and the demultiplexing lives
// here only.
//
// # One loop, two state machines
//
// All of the router's state is owned by one goroutine, the loop (router.go).
// Everything that happens reaches it as an event, a function posted to it:
// a line of the client's, a line of a child's, a child's process started or
// ended, a timer, the client's answer to a child's request. Each event is
// one method named on…, which moves the states below; no state is shared
// under a lock. What blocks runs beside the loop and posts its outcome:
// starting a process, writing a child's stdin (a writer goroutine per child
// with a bounded queue, so a child that stops reading stalls only its own
// thread), reading a child's stdout (a reader per child, holding each line
// to the line limit), waiting for a process to end, and the client's
// answer to a child's request (a goroutine per request, bounded per child).
//
// A child (child.go) is one process:
//
//	state           what it is                                  leaves on
//	starting        its process is being started                started → spare or initializing; failed → gone
//	spare           started, the client's initialize not known  the client's initialize → initializing
//	initializing    initialize sent, not answered               answer → authenticating (an authenticate to repeat) or ready
//	authenticating  the client's authenticate repeated to it    answer → ready (or back to opening or serving)
//	ready           initialized, serving no session: a spare    taken for a thread → opening; a session-less request served
//	opening         session/new, load or resume sent for it     success → serving; failure → ending
//	serving         serves one thread                           close, eviction, load of its thread → ending; crash → dead
//	ending          told to end: session/close, stdin, TERM,    its process ends → dead
//	                KILL in turn; it still counts toward --max-children
//	dead            its process ended and its output was read   (forgotten)
//
// A child taken while it is still starting or initializing keeps that state
// and holds the thread's lines until it is ready (an acpbridge child, which
// orders what it reads, takes them at once). Its process's end is seen by
// waiting on the process, whatever still holds its pipes; its process group
// is then ended.
//
// A thread (thread.go) is a session the client has open on this connection:
//
//	state      what it is                                       leaves on
//	open       served by its child                              child dies → lost; idle past --idle-timeout,
//	                                                            or session/load of it → evicting
//	evicting   its child is ending; requests wait on the thread the child ends → lost (reopened at once when
//	                                                            something waits)
//	lost       no process; reopened on its next request         a request, load or resume → reopening
//	reopening  a new child opens it (resume, or load whose      answer → open, or lost with the agent's reason
//	           replay the client does not see unless it asked); to every waiting request; --reopen-timeout or
//	           requests wait on the thread                      session/close → lost or closed
//	closed     session/close or session/delete: forgotten
//
// A child is trusted with its own thread only: a line naming another
// thread's session is dropped. The client's request ids and a child's are
// translated both ways, $/cancel_request included; session ids are never
// rewritten.
package fanout
