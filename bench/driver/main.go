// Command driver measures ACP agents from the outside, the same way for
// each, as an editor drives them: newline-delimited JSON-RPC on the
// agent's stdin and stdout. For every agent, in rounds that interleave the
// agents:
//
//   - cold: spawn → initialize answered; session/new; RSS after it;
//   - stream: a prompt answered with N agent_message_chunk updates of K
//     bytes: chunks/s, and the peak RSS during it;
//   - read: a prompt during which the agent makes M fs/read_text_file
//     requests of CWD/f.txt, each answered with 1 KiB: the mean round trip,
//     and the agent's CPU a call (on-CPU time of all its threads, from
//     /proc/PID/task/*/schedstat, in nanoseconds);
//   - tabs: T agents each after session/new: their summed PSS.
//
// Usage:
//
//	driver [--rounds 5] [--n 20000] [--k 64] [--m 1000] [--tabs 10] NAME=COMMAND...
//
// A COMMAND's $FIXTURE is a replay fixture the driver writes for the run
// (the stream entry, then M read_file calls, then an answer: acpbridge's
// --model replay:$FIXTURE plays the same prompts), $STATE a fresh state
// directory. Agents that are not acpbridge get the prompts "stream N K"
// and "read M" as text (../floor and ../floortool answer them). It prints a
// Markdown table of medians (min–max) and the ratios of the last agent to
// the others. Linux only (/proc).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

type config struct {
	rounds, n, k, m, tabs int
}

// result is one agent's figures in one round.
type result struct {
	ColdMs, NewMs, RSSMiB   float64
	ChunksPerS, PeakMiB     float64
	RTTUs, CPUUs, TabsPSSMB float64
}

func main() {
	var cfg config
	flag.IntVar(&cfg.rounds, "rounds", 5, "rounds, each agent once a round after one warm-up")
	flag.IntVar(&cfg.n, "n", 20000, "chunks the stream prompt is answered with")
	flag.IntVar(&cfg.k, "k", 64, "bytes a chunk")
	flag.IntVar(&cfg.m, "m", 1000, "fs/read_text_file round trips in the read prompt")
	flag.IntVar(&cfg.tabs, "tabs", 10, "agents started at once for the summed PSS (0: skip)")
	flag.Parse()
	var names []string
	cmds := map[string]string{}
	for _, a := range flag.Args() {
		name, cmd, ok := strings.Cut(a, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "driver: %q is not NAME=COMMAND\n", a)
			os.Exit(2)
		}
		names = append(names, name)
		cmds[name] = cmd
	}
	if len(names) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	results := map[string][]result{}
	for round := 0; round <= cfg.rounds; round++ {
		for _, name := range names {
			r, err := measure(cfg, cmds[name])
			if err != nil {
				fmt.Fprintf(os.Stderr, "driver: %s: %v\n", name, err)
				os.Exit(1)
			}
			if round > 0 { // round 0 warms the caches
				results[name] = append(results[name], r)
			}
		}
	}
	report(cfg, names, cmds, results)
}

// content is what the driver answers each fs/read_text_file with: 1 KiB
// of text in lines of 64 bytes.
var content = func() string {
	const alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
	var b strings.Builder
	for i := 0; b.Len() < 1024; i++ {
		if i%64 == 63 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(alpha[i%len(alpha)])
		}
	}
	return b.String()
}()

// agent is one running agent and the driver's side of its pipes.
type agent struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	next int // the driver's next request id
}

func start(command, dir string) (*agent, error) {
	fixture := filepath.Join(dir, "fixture.jsonl")
	command = strings.NewReplacer("$FIXTURE", fixture, "$STATE", filepath.Join(dir, "state")).Replace(command)
	words := strings.Fields(command)
	cmd := exec.Command(words[0], words[1:]...)
	cmd.Stderr = io.Discard
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &agent{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}, nil
}

// writeFixture writes the replay fixture acpbridge plays: the stream, then
// the read_file calls, then an answer.
func writeFixture(path string, cfg config) error {
	var b strings.Builder
	chunk := `{"text":"` + strings.Repeat("x", cfg.k) + `"}`
	b.WriteString(`{"chunks":[`)
	for i := range cfg.n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(chunk)
	}
	b.WriteString("]}\n")
	for i := range cfg.m {
		fmt.Fprintf(&b, `{"chunks":[{"toolCall":{"id":"r%d","name":"read_file","input":{"path":"f.txt"}}}]}`+"\n", i)
	}
	b.WriteString(`{"chunks":[{"text":"Read."}]}` + "\n")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		return err
	}
	// On disk before the agent starts: its writeback would otherwise land
	// in the agent's session/new.
	return f.Sync()
}

// request sends a request and returns its id's JSON text.
func (a *agent) request(method, params string) (string, error) {
	a.next++
	id := fmt.Sprintf(`"d%d"`, a.next)
	_, err := fmt.Fprintf(a.in, `{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`+"\n", id, method, params)
	return id, err
}

// until reads lines up to the response to id, answering the agent's
// fs/read_text_file requests, and counts the message chunks and reads.
func (a *agent) until(id string) (line []byte, chunks, reads int, err error) {
	answer, _ := json.Marshal(content)
	for {
		line, err = a.out.ReadBytes('\n')
		if err != nil {
			return nil, chunks, reads, fmt.Errorf("reading the agent: %v", err)
		}
		if bytes.Contains(line, []byte(`"sessionUpdate":"agent_message_chunk"`)) {
			chunks++ // the stream's lines are counted, not decoded: the driver must not be the bottleneck
			continue
		}
		if bytes.Contains(line, []byte(`"method":"session/update"`)) {
			continue // other updates: not counted, not decoded
		}
		var ms map[string]json.RawMessage
		if json.Unmarshal(line, &ms) != nil || ms == nil {
			return nil, chunks, reads, fmt.Errorf("the agent wrote a line that is not a JSON object: %.200s", line)
		}
		mid := ms["id"]
		method, hasMethod := ms["method"]
		switch {
		case string(method) == `"fs/read_text_file"`:
			reads++
			fmt.Fprintf(a.in, `{"jsonrpc":"2.0","id":%s,"result":{"content":%s}}`+"\n", mid, answer)
		case !hasMethod && string(mid) == id:
			return line, chunks, reads, nil
		}
	}
}

func (a *agent) stop() {
	a.in.Close()
	done := make(chan struct{})
	go func() { a.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		a.cmd.Process.Kill()
		<-done
	}
}

// open starts an agent and opens a session; it returns the session id.
func open(command, dir string, cfg config, r *result) (*agent, string, error) {
	cwd := filepath.Join(dir, "cwd")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(cwd, "f.txt"), []byte(content), 0o644); err != nil {
		return nil, "", err
	}
	if err := writeFixture(filepath.Join(dir, "fixture.jsonl"), cfg); err != nil {
		return nil, "", err
	}
	t0 := time.Now()
	a, err := start(command, dir)
	if err != nil {
		return nil, "", err
	}
	id, _ := a.request("initialize", `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}`)
	if _, _, _, err := a.until(id); err != nil {
		a.stop()
		return nil, "", err
	}
	t1 := time.Now()
	cwdJSON, _ := json.Marshal(cwd)
	id, _ = a.request("session/new", `{"cwd":`+string(cwdJSON)+`,"mcpServers":[]}`)
	line, _, _, err := a.until(id)
	if err != nil {
		a.stop()
		return nil, "", err
	}
	var res struct {
		Result struct{ SessionID string }
	}
	json.Unmarshal(line, &res)
	r.ColdMs = ms(t1.Sub(t0))
	r.NewMs = ms(time.Since(t1))
	r.RSSMiB = procKiB(a.cmd.Process.Pid, "status", "VmRSS:") / 1024
	return a, res.Result.SessionID, nil
}

// measure runs one agent through cold, stream, read and tabs.
func measure(cfg config, command string) (result, error) {
	var r result
	dir, err := os.MkdirTemp("", "acpbridge-bench-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	a, sid, err := open(command, dir, cfg, &r)
	if err != nil {
		return r, err
	}
	defer a.stop()
	pid := a.cmd.Process.Pid
	prompt := func(text string) (int, int, time.Duration, error) {
		id, _ := a.request("session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}`, sid, text))
		t := time.Now()
		_, chunks, reads, err := a.until(id)
		return chunks, reads, time.Since(t), err
	}
	os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) // resets VmHWM
	chunks, _, took, err := prompt(fmt.Sprintf("stream %d %d", cfg.n, cfg.k))
	if err != nil {
		return r, err
	}
	if chunks != cfg.n {
		return r, fmt.Errorf("stream: %d chunks, want %d", chunks, cfg.n)
	}
	r.ChunksPerS = float64(cfg.n) / took.Seconds()
	r.PeakMiB = procKiB(pid, "status", "VmHWM:") / 1024
	cpu := cpuNs(pid)
	_, reads, took, err := prompt(fmt.Sprintf("read %d", cfg.m))
	if err != nil {
		return r, err
	}
	if reads != cfg.m {
		return r, fmt.Errorf("read: %d fs/read_text_file requests, want %d", reads, cfg.m)
	}
	if cfg.m > 0 {
		r.RTTUs = float64(took.Microseconds()) / float64(cfg.m)
		r.CPUUs = float64(cpuNs(pid)-cpu) / 1e3 / float64(cfg.m)
	}
	if cfg.tabs > 0 {
		r.TabsPSSMB, err = tabs(cfg, command, dir)
	}
	return r, err
}

// tabs starts cfg.tabs agents, opens a session in each, and sums their
// PSS.
func tabs(cfg config, command, dir string) (float64, error) {
	var total float64
	var agents []*agent
	defer func() {
		for _, a := range agents {
			a.stop()
		}
	}()
	for i := range cfg.tabs {
		var r result
		a, _, err := open(command, filepath.Join(dir, "tab"+strconv.Itoa(i)), cfg, &r)
		if err != nil {
			return 0, err
		}
		agents = append(agents, a)
	}
	for _, a := range agents {
		total += procKiB(a.cmd.Process.Pid, "smaps_rollup", "Pss:") / 1024
	}
	return total, nil
}

// procKiB reads a "Key: N kB" line of /proc/PID/file.
func procKiB(pid int, file, key string) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			n, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
			return n
		}
	}
	return 0
}

// cpuNs is the on-CPU time of all of a process's threads, in ns.
func cpuNs(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total int64
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += n
		}
	}
	return total
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// report prints the medians (min–max) and the ratios of the last agent.
func report(cfg config, names []string, cmds map[string]string, results map[string][]result) {
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("%s, %d CPUs, load %s, %s; %d rounds after a warm-up; stream %d×%d B; read %d × 1 KiB; %d tabs\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "),
		runtime.Version(), cfg.rounds, cfg.n, cfg.k, cfg.m, cfg.tabs)
	cols := []struct {
		name string
		get  func(result) float64
		unit string
	}{
		{"cold start", func(r result) float64 { return r.ColdMs }, "ms"},
		{"session/new", func(r result) float64 { return r.NewMs }, "ms"},
		{"RSS after new", func(r result) float64 { return r.RSSMiB }, "MiB"},
		{"stream", func(r result) float64 { return r.ChunksPerS }, "chunks/s"},
		{"stream peak RSS", func(r result) float64 { return r.PeakMiB }, "MiB"},
		{"tool round trip", func(r result) float64 { return r.RTTUs }, "µs"},
		{"agent CPU a call", func(r result) float64 { return r.CPUUs }, "µs"},
		{"tabs, summed PSS", func(r result) float64 { return r.TabsPSSMB }, "MiB"},
	}
	fmt.Print("| agent |")
	for _, c := range cols {
		fmt.Printf(" %s (%s) |", c.name, c.unit)
	}
	fmt.Print("\n|---|")
	for range cols {
		fmt.Print("---|")
	}
	fmt.Println()
	med := map[string][]float64{}
	for _, name := range names {
		fmt.Printf("| %s |", name)
		for _, c := range cols {
			var v []float64
			for _, r := range results[name] {
				v = append(v, c.get(r))
			}
			slices.Sort(v)
			m := v[len(v)/2]
			med[name] = append(med[name], m)
			fmt.Printf(" %s (%s–%s) |", num(m), num(v[0]), num(v[len(v)-1]))
		}
		fmt.Println()
	}
	last := names[len(names)-1]
	for _, name := range names[:len(names)-1] {
		fmt.Printf("\n%s ÷ %s (medians):", last, name)
		for i, c := range cols {
			if med[name][i] != 0 {
				fmt.Printf(" %s %.2f×;", c.name, med[last][i]/med[name][i])
			}
		}
		fmt.Println()
	}
	fmt.Println()
	for _, name := range names {
		fmt.Printf("%s: %s\n", name, cmds[name])
	}
}

func num(f float64) string {
	switch {
	case f >= 1000:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case f >= 10:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}
