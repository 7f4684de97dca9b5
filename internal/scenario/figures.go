// figures.go measures an agent's process tree as a run goes: its memory,
// sampled until the agent exits, and its CPU, for the figures of a
// comparison (report.Stats, report.Turn).

package scenario

import (
	"acpbridge/internal/report"
	"io"
	"os"
	"sync"
	"time"
)

// cpuSince is what a tree used between two of its readings (treeCPU, by
// thread id): each thread's own time since the earlier reading, from 0 for
// one started meanwhile. A thread that ended meanwhile is not counted, nor
// what it used before it ended; -1 where either reading is missing.
func cpuSince(now, before map[int]time.Duration) time.Duration {
	if now == nil || before == nil {
		return -1
	}
	var d time.Duration
	for tid, t := range now {
		if was := before[tid]; t >= was {
			d += t - was
		} else {
			d += t // less than before: another thread, started meanwhile under an id used again
		}
	}
	return d
}

// sampler watches a process tree until stopped, keeping the peaks.
type sampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	stats report.Stats
	peak  map[int]int64         // each process's peak RSS as last read, by pid
	quiet map[int]bool          // the processes seen at a quiet point
	cpu   map[int]time.Duration // each process's own CPU time as last read, by pid
}

// procMemory is one process's memory as a sample read it: its peak RSS so
// far and its PSS now, in bytes; and its CPU time so far.
type procMemory struct {
	pid               int
	peakRSS, pss, uss int64
	anon              int64         // its anonymous memory: private, not file-backed
	cpu               time.Duration // its own user and system time so far
}

// sampleInterval is how often the tree is measured, at most; see
// sampleWait.
const sampleInterval = 5 * time.Millisecond

// sampleWait is how long the sampler waits after a sample that took took:
// sampleInterval, or twenty times the sample's own time where that is
// longer. Reading a Go process's smaps_rollup takes the better part of a
// millisecond, so a tree of five processes sampled every 5 ms kept most of
// a core busy beside the agent it measured, and slowed an agent of more
// processes more: measuring now takes at most a twentieth of a core.
func sampleWait(took time.Duration) time.Duration {
	return max(sampleInterval, 20*took)
}

func startSampler(pid int) *sampler {
	s := &sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{}), stats: report.Stats{PeakRSS: -1, PeakPSS: -1, PeakUSS: -1, PeakAnon: -1, Processes: -1},
		peak: map[int]int64{}, quiet: map[int]bool{}, cpu: map[int]time.Duration{}}
	go s.loop()
	return s
}

func (s *sampler) loop() {
	defer close(s.done)
	t := time.NewTimer(sampleInterval)
	defer t.Stop()
	for {
		began := time.Now()
		s.sample()
		t.Reset(sampleWait(time.Since(began)))
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// sample measures the tree's PSS.
func (s *sampler) sample() { s.measure(false) }

// settled measures the tree's PSS and peak RSS and counts its processes:
// the agent has answered everything it was asked.
func (s *sampler) settled() { s.measure(true) }

func (s *sampler) measure(count bool) {
	procs, ok := treeMemory(s.pid)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var pss, uss, anon, rss int64
	for _, p := range procs {
		pss += p.pss
		uss += p.uss
		anon += p.anon
		s.peak[p.pid] = p.peakRSS
		s.cpu[p.pid] = p.cpu
		if count {
			s.quiet[p.pid] = true
		}
	}
	for pid := range s.quiet {
		rss += s.peak[pid]
	}
	s.stats.PeakPSS = max(s.stats.PeakPSS, pss)
	s.stats.PeakUSS = max(s.stats.PeakUSS, uss)
	s.stats.PeakAnon = max(s.stats.PeakAnon, anon)
	if len(s.quiet) > 0 {
		s.stats.PeakRSS = max(s.stats.PeakRSS, rss)
	}
	if count {
		s.stats.Processes = max(s.stats.Processes, len(procs))
		if s.stats.Program == nil {
			s.stats.Program = programOf(s.pid)
		}
	}
}

// closingStdin is the agent's stdin that counts as the run closes it: the
// agent has done its work and not yet exited.
type closingStdin struct {
	io.WriteCloser
	s *sampler
}

func (c closingStdin) Close() error {
	c.s.settled()
	return c.WriteCloser.Close()
}

// finish stops sampling and adds what the process's end tells: its CPU
// time and largest RSS.
func (s *sampler) finish(ps *os.ProcessState) report.Stats {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps != nil {
		// The process's own time and its children's that it waited for;
		// or, where more, the tree's as sampled: the children it never
		// waited for (an agent ended at the run's end) count too.
		var tree time.Duration
		for _, d := range s.cpu {
			tree += d
		}
		s.stats.CPU = max(ps.UserTime()+ps.SystemTime(), tree)
		if s.stats.PeakRSS < 0 {
			// Never sampled (it ended within the first interval): the
			// kernel's figure, which for a child started with vfork also
			// counts the parent's pages it shared before exec.
			s.stats.PeakRSS = maxRSS(ps)
		}
	}
	return s.stats
}
