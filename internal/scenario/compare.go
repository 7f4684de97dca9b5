// compare.go says where two agents' runs of one scenario differ: each
// run's lines as a client sees them (ids and times as variables, a
// session's streamed chunks joined), compared as JSON values.

package scenario

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"acpbridge/internal/clip"
	"acpbridge/internal/report"
)

// view is a run's lines as the comparison sees them: each line
// generalized with the run's directories as variables (so that ids and
// times read the same in both runs), and consecutive message or thought
// chunks of one session joined into one line, so that how an agent splits
// its stream does not count.
// raw holds, for each line of the view, the index of the agent's line it
// starts at.
func view(lines [][]byte, env Env) (out []any, raw []int) {
	v := newVars()
	v.set("CWD", env.Cwd)
	v.set("STATE", env.State)
	v.set("DIR", env.Dir)
	var joining any            // the last chunk line, while chunks of its kind follow
	var joined strings.Builder // its text so far (joined once: linear in the chunks)
	endJoin := func() {
		if _, content := chunkOf(joining); content != nil {
			content["text"] = joined.String()
		}
		joining = nil
		joined.Reset()
	}
	for n, line := range lines {
		text, err := v.generalize(line, nil, true)
		if err != nil {
			endJoin()
			out, raw = append(out, string(line)), append(raw, n)
			continue
		}
		x, _ := decode([]byte(text))
		if kind, content := chunkOf(x); kind != "" {
			if prevKind, _ := chunkOf(joining); prevKind == kind && sameSession(joining, x) {
				joined.WriteString(content["text"].(string))
				continue
			}
			endJoin()
			joining = x
			joined.WriteString(content["text"].(string))
			out, raw = append(out, x), append(raw, n)
			continue
		}
		endJoin()
		out, raw = append(out, x), append(raw, n)
	}
	endJoin()
	return out, raw
}

// chunkOf returns the kind of a message or thought chunk line and its
// content (text), or "" for any other line.
func chunkOf(x any) (string, map[string]any) {
	m, _ := x.(map[string]any)
	if m["method"] != "session/update" {
		return "", nil
	}
	params, _ := m["params"].(map[string]any)
	update, _ := params["update"].(map[string]any)
	kind, _ := update["sessionUpdate"].(string)
	content, _ := update["content"].(map[string]any)
	if _, isText := content["text"].(string); !isText || (kind != "agent_message_chunk" && kind != "agent_thought_chunk") {
		return "", nil
	}
	return kind, content
}

func sameSession(a, b any) bool {
	sid := func(x any) any {
		m, _ := x.(map[string]any)
		p, _ := m["params"].(map[string]any)
		return p["sessionId"]
	}
	return sid(a) == sid(b)
}

// runView is one run of one agent as the comparison sees it.
type runView struct {
	name   string
	lines  []any
	raw    []int // each line's index among the agent's lines
	before int   // the agent's lines before the first prompt: its handshake
	err    error // the run's failure, or nil
}

func newRunView(name string, res Result) runView {
	lines, raw := view(res.Received, res.Env)
	return runView{name: name, lines: lines, raw: raw, before: res.BeforeTurns, err: res.Err}
}

// differences lists where the runs a and b differ, the turns' lines before
// the handshake's, at most limit (0: all). The lines are first aligned by
// kind (a response to an id, a method and its update kind and status), so
// that a line one agent sends and the other does not shows as that, not as
// a shift of every line after it; aligned lines are compared as JSON
// values, path by path. When a run failed, the lines after its last are
// not compared: the list ends saying where it stopped.
func differences(a, b runView, limit int, deadline time.Time) []string {
	pairs, done := align(a.lines, b.lines, deadline)
	if !done {
		return []string{fmt.Sprintf("not compared: aligning %s's %d lines with %s's %d took longer than --timeout", a.name, len(a.lines), b.name, len(b.lines))}
	}
	stop := ""
	for side, r := range []runView{a, b} {
		if r.err == nil {
			continue
		}
		// After the last pair of two lines, only r's own lines count:
		// the other's there are what r never reached.
		matched := -1
		for k, p := range pairs {
			if p.i >= 0 && p.j >= 0 {
				matched = k
			}
		}
		kept, dropped := pairs[:matched+1], 0
		for _, p := range pairs[matched+1:] {
			if side == 0 && p.i >= 0 || side == 1 && p.j >= 0 {
				kept = append(kept, p)
			} else {
				dropped++
			}
		}
		if dropped > 0 {
			stop = fmt.Sprintf("%s failed after its line %d (%s); the other's %d lines after it are not compared", r.name, len(r.raw), firstLine(r.err), dropped)
		}
		pairs = kept
	}
	var turns, handshake []string
	for _, p := range pairs {
		var found []string
		inTurn := p.i >= 0 && a.raw[p.i] >= a.before || p.j >= 0 && b.raw[p.j] >= b.before
		switch {
		case p.i < 0:
			found = append(found, fmt.Sprintf("%s's line %d: only %s sent %s", b.name, b.raw[p.j]+1, b.name, show(b.lines[p.j])))
		case p.j < 0:
			found = append(found, fmt.Sprintf("%s's line %d: only %s sent %s", a.name, a.raw[p.i]+1, a.name, show(a.lines[p.i])))
		default:
			var paths []string
			diffValues("", a.lines[p.i], b.lines[p.j], &paths)
			for _, d := range paths {
				found = append(found, fmt.Sprintf("line %d / %d (%s) at %s", a.raw[p.i]+1, b.raw[p.j]+1, what(a.lines[p.i]), d))
			}
		}
		if inTurn {
			turns = append(turns, found...)
		} else {
			handshake = append(handshake, found...)
		}
	}
	out := append(turns, handshake...)
	if limit > 0 && len(out) > limit {
		out = append(out[:limit], fmt.Sprintf("(%d more differences not shown: --diff-limit 0 shows them all)", len(out)-limit))
	}
	if stop != "" {
		out = append(out, stop)
	}
	return out
}

// firstLine is the first line of err's message.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// pair is a line of a (i) and of b (j) aligned; -1 where a side has none.
type pair struct{ i, j int }

// align pairs the lines of a and b of the same kind, keeping their order,
// as many as can be (a longest common subsequence of their kinds); done is
// false when the deadline (if not zero) passed first.
func align(a, b []any, deadline time.Time) (out []pair, done bool) {
	ka, kb := kinds(a), kinds(b)
	n, m := len(ka), len(kb)
	if n*m > 4_000_000 { // too long to align: line by line
		for i := 0; i < n || i < m; i++ {
			p := pair{i, i}
			if i >= n {
				p.i = -1
			}
			if i >= m {
				p.j = -1
			}
			out = append(out, p)
		}
		return out, true
	}
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		if !deadline.IsZero() && time.Now().After(deadline) {
			return nil, false
		}
		for j := m - 1; j >= 0; j-- {
			if ka[i] == kb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && ka[i] == kb[j]:
			out = append(out, pair{i, j})
			i, j = i+1, j+1
		case j >= m || (i < n && lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, pair{i, -1})
			i++
		default:
			out = append(out, pair{-1, j})
			j++
		}
	}
	return out, true
}

// kinds names each line's kind: "response ID", or its method and, for a
// session/update, the update's kind.
func kinds(lines []any) []string {
	out := make([]string, len(lines))
	for i, x := range lines {
		m, _ := x.(map[string]any)
		method, isCall := m["method"].(string)
		if !isCall {
			out[i] = fmt.Sprintf("response %v", m["id"])
			continue
		}
		params, _ := m["params"].(map[string]any)
		update, _ := params["update"].(map[string]any)
		out[i] = fmt.Sprintf("%s %v", method, update["sessionUpdate"])
		if status, ok := update["status"].(string); ok {
			out[i] += " " + status // a tool call's in_progress is not its completed
		}
	}
	return out
}

// diffValues appends, for each place where x and y differ, its path and
// the two values.
func diffValues(path string, x, y any, out *[]string) {
	xm, xObj := x.(map[string]any)
	ym, yObj := y.(map[string]any)
	if xObj && yObj {
		both := maps.Clone(xm) // for its keys: those of x and y
		maps.Copy(both, ym)
		for _, k := range slices.Sorted(maps.Keys(both)) {
			xv, inX := xm[k]
			yv, inY := ym[k]
			switch {
			case !inX:
				*out = append(*out, fmt.Sprintf("%s.%s: absent / %s", path, k, show(yv)))
			case !inY:
				*out = append(*out, fmt.Sprintf("%s.%s: %s / absent", path, k, show(xv)))
			default:
				diffValues(path+"."+k, xv, yv, out)
			}
		}
		return
	}
	xa, xArr := x.([]any)
	ya, yArr := y.([]any)
	if xArr && yArr && len(xa) == len(ya) {
		for i := range xa {
			diffValues(fmt.Sprintf("%s[%d]", path, i), xa[i], ya[i], out)
		}
		return
	}
	if !equal(x, y) {
		if path == "" {
			path = "the top"
		}
		*out = append(*out, fmt.Sprintf("%s: %s / %s", path, show(x), show(y)))
	}
}

// what names a line: its method, or the response it is.
func what(x any) string {
	m, _ := x.(map[string]any)
	if method, ok := m["method"].(string); ok {
		return method
	}
	if _, isErr := m["error"]; isErr {
		return fmt.Sprintf("the error response %v", m["id"])
	}
	return fmt.Sprintf("the response %v", m["id"])
}

func show(x any) string {
	b, _ := json.Marshal(x)
	return clip.Marked(string(b), 160)
}

// compareAll compares every pair of agents' runs, folding a pair whose
// differences repeat an earlier pair's into it; the pairs not compared
// within timeout (0: no bound) say so.
func compareAll(names []string, first []Result, limit int, timeout time.Duration) []report.Differences {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	var out []report.Differences
	seen := map[string]string{} // a pair's differences, names as placeholders → the pair
	for i := range first {
		for j := i + 1; j < len(first); j++ {
			var d []string
			if !deadline.IsZero() && time.Now().After(deadline) {
				d = []string{"not compared: the comparison took longer than --timeout"}
			} else {
				d = differences(newRunView(names[i], first[i]), newRunView(names[j], first[j]), limit, deadline)
			}
			p := report.Differences{A: names[i], B: names[j], Lines: d}
			if len(d) > 0 {
				key := placeholders(d, names[i], names[j])
				if earlier, ok := seen[key]; ok {
					p.SameAs, p.Lines = earlier, nil
				} else {
					seen[key] = names[i] + " and " + names[j]
				}
			}
			out = append(out, p)
		}
	}
	return out
}

// placeholders is lines with the two agents' names replaced by the same
// placeholders for every pair, as one string.
func placeholders(lines []string, a, b string) string {
	r := strings.NewReplacer(a+"'s ", "\x00A's ", "only "+a+" ", "only \x00A ", a+" failed", "\x00A failed",
		b+"'s ", "\x00B's ", "only "+b+" ", "only \x00B ", b+" failed", "\x00B failed")
	return r.Replace(strings.Join(lines, "\n"))
}
