// figures.go holds what a run measures of an agent, for comparing agents
// side by side: each turn's times as the client saw them, and the agent's
// memory, CPU and processes.

package scenario

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Turn is one prompt as the client saw it: from the request's write to the
// first session/update after it, and to its answer.
type Turn struct{ FirstUpdate, Answer time.Duration }

// Stats is what an agent's processes used over a run. A figure the
// platform cannot give is -1.
type Stats struct {
	PeakRSS   int64         // bytes: the largest sum over the process tree of each process's peak RSS so far (sampled)
	PeakPSS   int64         // bytes: the largest sum of proportional set sizes over the tree seen
	CPU       time.Duration // user and system time of the agent and the children it waited for
	Processes int           // the most processes seen in its tree at once (-1: never seen)
}

// sampler watches a process tree until stopped, keeping the peaks.
type sampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	stats Stats
}

// sampleInterval is how often the tree is measured.
const sampleInterval = 20 * time.Millisecond

func startSampler(pid int) *sampler {
	s := &sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{}), stats: Stats{PeakRSS: -1, PeakPSS: -1, Processes: -1}}
	go s.loop()
	return s
}

func (s *sampler) loop() {
	defer close(s.done)
	t := time.NewTicker(sampleInterval)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

func (s *sampler) sample() {
	rss, pss, n, ok := treeMemory(s.pid)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.PeakRSS = max(s.stats.PeakRSS, rss)
	s.stats.PeakPSS = max(s.stats.PeakPSS, pss)
	s.stats.Processes = max(s.stats.Processes, n)
}

// closingStdin is the agent's stdin that takes a sample as the run closes
// it: the agent has done its work and not yet exited.
type closingStdin struct {
	io.WriteCloser
	s *sampler
}

func (c closingStdin) Close() error {
	c.s.sample()
	return c.WriteCloser.Close()
}

// finish stops sampling and adds what the process's end tells: its CPU
// time and largest RSS.
func (s *sampler) finish(ps *os.ProcessState) Stats {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps != nil {
		s.stats.CPU = ps.UserTime() + ps.SystemTime()
		if s.stats.PeakRSS < 0 {
			// Never sampled (it ended within the first interval): the
			// kernel's figure, which for a child started with vfork also
			// counts the parent's pages it shared before exec.
			s.stats.PeakRSS = maxRSS(ps)
		}
	}
	return s.stats
}

// figuresTable is the agents' figures for one scenario, side by side.
func figuresTable(names []string, results []Result) string {
	var sb strings.Builder
	sb.WriteString("  | agent | result | turns: first update / answer (ms) | peak RSS (MiB) | peak PSS (MiB) | CPU (ms) | processes |\n")
	sb.WriteString("  |---|---|---|---|---|---|---|\n")
	for i, res := range results {
		verdict := "ok"
		if res.Err != nil {
			verdict = "FAIL"
		}
		var turns []string
		for _, t := range res.Turns {
			turns = append(turns, fmt.Sprintf("%s / %s", ms(t.FirstUpdate), ms(t.Answer)))
		}
		if len(turns) == 0 {
			turns = []string{"–"}
		}
		st := res.Stats
		procs := "n/a"
		if st.Processes > 0 {
			procs = fmt.Sprint(st.Processes)
		}
		fmt.Fprintf(&sb, "  | %s | %s | %s | %s | %s | %.0f | %s |\n", names[i], verdict, strings.Join(turns, ", "),
			mib(st.PeakRSS), mib(st.PeakPSS), float64(st.CPU.Microseconds())/1000, procs)
	}
	return sb.String()
}

func ms(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000)
}

func mib(b int64) string {
	if b < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", float64(b)/(1<<20))
}
