// Package fanout holds the router of --fanout: many sessions on one
// connection, each in a single-session child process of its own: acpbridge,
// or with `--fanout -- CMD` any ACP agent. It is for clients that open
// several sessions on one agent process (Zed's threads); the one-session
// agent (the root's session.go) is untouched, and the demultiplexing lives
// here only.
//
// # One loop
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
// to the line limit, and all of them together to one budget of bytes read
// and not yet written to the client: budget.go), waiting for a process to
// end, and the client's answer to a child's request (a goroutine per
// request, bounded per child).
//
// # Held requests
//
// Every request of the client's with an id is one value (held.go) from its
// arrival to its answer, in one map by the client's id, saying what it
// waits for: a process, its thread's process, a load's old process, a load
// it joined, the first initialize's answer, its child to be ready, or its
// child's answer. The answer takes it out of the map, once (a second is
// refused as a move not in a table is); $/cancel_request withdraws it
// where its wait says; the router's end answers whatever is still held.
// held.go has the table of each wait's exits.
//
// # Four state machines, as tables
//
// Each machine is a table of edges (states.go): every state, what it is,
// and each edge that leaves it with what moves it. A state moves only
// through move, which refuses an edge not in its table (a logged error and
// no move; the package's tests panic there, through Options.RefusedMove);
// the tables below are the
// code's, rendered, and a test holds them together.
//
// A child (child.go) is one process:
//
//	starting: its process is being started; it counts toward --max-children
//	  → spare           its process started
//	  → ending          the router ends first: ended once started
//	  → dead            its process could not be started
//	spare: started; the client's initialize not seen yet
//	  → initializing    the client's initialize (at once when it came first)
//	  → ending          a spare in another directory gives way, or the router ends
//	  → dead            its process ends
//	initializing: initialize sent, not answered (bounded: --reopen-timeout, at least 5 s)
//	  → authenticating  answered, and the client has authenticated: repeated to it
//	  → ready           answered: a spare
//	  → opening         answered: it was taken for a thread that the client sees opened
//	  → replaying       answered: it was taken for the router's own load of a thread
//	  → ending          refused, or not answered in time
//	  → dead            its process ends
//	authenticating: the client's successful authenticate repeated to it, not answered
//	  → ready           answered: back to what it was told it does
//	  → opening         answered: back to what it was told it does
//	  → replaying       answered: back to what it was told it does
//	  → serving         answered: back to what it was told it does
//	  → ending          closed or evicted meanwhile, or the router ends
//	  → dead            its process ends
//	ready: initialized, serving no session: a spare (a session-less request is served here)
//	  → opening         taken for a thread: session/new, a resume, or the client's load
//	  → replaying       taken for the router's own session/load of a lost thread
//	  → authenticating  the client authenticated through another child
//	  → ending          gives way, a request of the moment answered, or the router ends
//	  → dead            its process ends
//	opening: session/new, a resume or the client's load sent for a thread, not answered
//	  → serving         answered with success
//	  → authenticating  the client authenticated through another child
//	  → ending          refused, timed out, or its thread closed
//	  → dead            its process ends
//	replaying: the router's own session/load of a thread sent: its replay is dropped (the client shows it already)
//	  → serving         answered with success
//	  → authenticating  the client authenticated through another child
//	  → ending          refused, timed out, or its thread closed
//	  → dead            its process ends
//	serving: serves one thread
//	  → authenticating  the client authenticated through another child
//	  → ending          session/close or delete, eviction, the client's load of its thread, or the router ends
//	  → dead            its process ends: a crash, told to the thread
//	ending: told to end: session/close, stdin, SIGTERM, SIGKILL, each after the last had its time; still counted
//	  → dead            its process ends
//	dead: its process ended and its output was read: forgotten
//
// A child taken while it is still starting or initializing is told what
// it does (opening, replaying, serving) and moves there once initialized
// (settle); until then it holds the thread's lines (an acpbridge child,
// which orders what it reads, takes them at once). Its process's end is
// seen by waiting on the process, whatever still holds its pipes; its
// process group is then ended.
//
// A thread (thread.go) is a session the client has open on this connection:
//
//	open: served by its child
//	  → evicting        idle past --idle-timeout, or the idlest at --max-children
//	  → loading         the client's session/load of it: its child is ended first
//	  → lost            its child dies (the user is told)
//	  → closed          session/close or delete, or its child died too often
//	evicting: its child is ending; requests wait on the thread
//	  → lost            the child's end (reopened at once when something waits)
//	  → loading         the client's session/load or resume of it
//	  → closed          session/close or delete
//	lost: no process; reopened on its next request (where its agent cannot, answered so)
//	  → reopening       a request: the router reopens it
//	  → loading         the client's session/load or resume of it
//	  → closed          session/close or delete
//	loading: the client's load or resume waits for a process: its old child's end, then one from the pool
//	  → reopening       a child is given: the client's request is sent to it
//	  → evicting        the request withdrawn while its old child still ends
//	  → lost            the request withdrawn, or no child could be given
//	  → closed          session/close or delete; withdrawn or failed for a session never open here
//	reopening: a new child opens it (resume, the router's load, the client's load or resume); requests wait
//	  → open            answered with success: what waited is routed, in order
//	  → retrying        the router's own reopening's child died unanswered (a spare killed as it was taken): once more
//	  → lost            refused, --reopen-timeout, or its child died
//	  → evicting        refused or timed out while its child still ends
//	  → closed          session/close or delete; a failed load of a session never open here
//	retrying: reopened once more, in another new child; a second death is the agent's answer
//	  → open            answered with success
//	  → lost            refused, --reopen-timeout, or its child died again
//	  → evicting        refused or timed out while its child still ends
//	  → closed          session/close or delete
//	closed: session/close or delete: forgotten
//
// The connection (router.go, auth.go):
//
//	new: no initialize answered yet
//	  → initializing    the client's initialize, sent to the first child (-- CMD), asking for v1 whatever version the client asked
//	  → ready           the client's initialize, answered by the router (acpbridge children): v1 whatever version the client asked
//	  → ending          stdin ends or a signal comes
//	initializing: the first child's answer awaited; later initializes wait for it
//	  → ready           answered with success: later initializes get the same answer
//	  → new             refused, or its child died: the next initialize is a first one again
//	  → ending          stdin ends or a signal comes
//	ready: initialized: sessions are routed
//	  → ending          stdin ends or a signal comes
//	ending: every child is ending; the router exits once all are dead and stdin is read (5 s at most)
//
// The spares' hold (pool.go), which keeps a process's start from sharing
// the CPU with a turn; it goes round for the router's life:
//
//	none: spares start as they are wanted (within --spares and --max-children)
//	  → at start        the router starts with more than one spare: one starts, the others wait
//	  → turns           a thread's opening or reopening is answered: its turn comes first
//	at start: the router's first spare starts alone; the others wait (1 s at most)
//	  → none            the first spare is ready, or the wait passed: the others start
//	  → first thread    the first thread opens
//	first thread: the first thread opens; the spares wait for its answer
//	  → turns           its opening is answered: they wait for its turn
//	turns: a turn runs; the spares wait for it (1 s at most)
//	  → none            no prompt in flight, or the wait passed: they start
//	  → opening         another thread opens
//	opening: a thread opens while the spares wait for turns; they wait for its answer
//	  → none            its opening is answered: they start
//
// A child is trusted with its own thread only: a line naming another
// thread's session is dropped. The client's request ids and a child's are
// translated both ways, $/cancel_request included; session ids are never
// rewritten.
package fanout
