// update.go rewrites a scenario's < lines from what the agent sends.
//
// The client's lines are sent as in a check, each group when the agent has
// sent as many lines of the kind of the last < line before it (a response
// to an id, or a method and update kind) as the old file had there; every
// line read meanwhile becomes a < line. A new line takes the variables of
// the old line of its kind at that place where their values still match;
// ids the old file did not name get new variables, and the run's paths are
// written $CWD, $STATE and $DIR. Comments among the < lines are dropped.
// A <* line and the < line after it are kept as written, and checked.

package scenario

import (
	"encoding/json"
	"fmt"
	"strings"
)

func (r *run) update() ([]byte, error) {
	tr := r.sc.section("transcript")
	ed := newEdits(tr)
	steps := r.sc.Steps
	for i := 0; i <= len(steps); {
		j := i // the run of the file's own expect steps from i
		for j < len(steps) && steps[j].Kind == Expect && steps[j].From == "" {
			ed.remove[ed.index(steps[j].Line)] = true
			j++
		}
		slot := len(ed.raw)
		if i < len(steps) {
			slot = ed.index(steps[i].Line)
		}
		lines, err := r.segment(steps[i:j], j == len(steps))
		if err != nil {
			return nil, err
		}
		ed.insert[slot] = append(ed.insert[slot], lines...)
		if j == len(steps) {
			break
		}
		if i, err = r.advance(steps, j); err != nil {
			return nil, err
		}
	}
	after, err := r.afterEnd()
	if err != nil {
		return nil, err
	}
	ed.insert[len(ed.raw)] = append(ed.insert[len(ed.raw)], after...)
	tr.Data = ed.apply()
	return r.sc.Format(), nil
}

// advance runs the step at j that is not one of the file's own expect
// steps (an included run, a close, a group of sends) and returns the index
// after it.
func (r *run) advance(steps []Step, j int) (int, error) {
	switch {
	case steps[j].From != "":
		// An included step is the included file's: checked, not rewritten.
		return r.included(steps, j)
	case steps[j].Kind == Close:
		r.close()
		return j + 1, nil
	case steps[j].Kind == Restart:
		return j + 1, r.restart(steps[j])
	case steps[j].Kind == Editor:
		r.editor, r.rejecting = true, steps[j].Text == "rejecting"
		return j + 1, nil
	case steps[j].Kind == ExpectAny:
		// A <* line and its < line are kept as written: checked, not rewritten.
		return j + 2, r.runSteps(steps[j : j+2])
	}
	k := j
	for k+1 < len(steps) && (steps[k+1].Kind == Send || steps[k+1].Kind == SendRaw) {
		k++
	}
	return k + 1, r.send(steps[j : k+1])
}

// afterEnd closes stdin and writes what the agent sends after the
// transcript's last line, behind a close step when the file had none.
func (r *run) afterEnd() ([]string, error) {
	wasClosed := r.closed
	var after []string
	err := r.finish(func(line []byte) error {
		text, err := r.v.generalize(line, nil, true)
		after = append(after, "< "+text)
		return err
	})
	if len(after) > 0 && !wasClosed {
		after = append([]string{"close"}, after...)
	}
	return after, err
}

// edits are the changes to a transcript's lines: lines removed, and lines
// inserted before a line (or at the end).
type edits struct {
	tr     *Section
	raw    []string
	insert map[int][]string
	remove map[int]bool
}

func newEdits(tr *Section) *edits {
	return &edits{tr: tr, raw: strings.Split(strings.TrimSuffix(tr.Data, "\n"), "\n"),
		insert: map[int][]string{}, remove: map[int]bool{}}
}

// index is a file line's index in raw.
func (ed *edits) index(line int) int { return line - ed.tr.Line - 1 }

func (ed *edits) apply() string {
	var sb strings.Builder
	for i := 0; i <= len(ed.raw); i++ {
		for _, l := range ed.insert[i] {
			sb.WriteString(l + "\n")
		}
		if i < len(ed.raw) && !ed.remove[i] {
			sb.WriteString(ed.raw[i] + "\n")
		}
	}
	return sb.String()
}

// included runs the included steps from j on as a check does and returns
// the index of the first step after them.
func (r *run) included(steps []Step, j int) (int, error) {
	k := j
	for k < len(steps) && steps[k].From != "" {
		k++
	}
	return k, r.runSteps(steps[j:k])
}

// segment reads the lines the agent sends in place of the expect steps
// seg and writes them as < lines. An empty last segment reads until every
// request the client sent has been answered.
func (r *run) segment(seg []Step, last bool) ([]string, error) {
	var got [][]byte
	var err error
	switch {
	case len(seg) > 0:
		got, err = r.segmentLines(seg)
	case last:
		got, err = r.remainingAnswers()
	}
	if err != nil {
		return nil, err
	}
	var out []string
	cursor := 0
	for _, line := range got {
		d, _ := decode(line)
		k := r.kindOf(d)
		var old any
		for c := cursor; c < len(seg); c++ {
			if kindMatch(r.kindOf(seg[c].want), k) {
				old, cursor = seg[c].want, c+1
				break
			}
		}
		if err := r.questionError(d, old); err != nil {
			return nil, err
		}
		r.v.bindLoose(old, d)
		text, err := r.v.generalize(line, old, true)
		if err != nil {
			return nil, err
		}
		out = append(out, "< "+text)
	}
	return out, nil
}

// questionError refuses a response that is an error where the old line
// (old, or nil) was not one, unless the run accepts errors: a golden must
// not quietly become "the conversation has diverged".
func (r *run) questionError(d, old any) error {
	m, _ := d.(map[string]any)
	e, isErr := m["error"].(map[string]any)
	if !isErr || r.opt.AcceptErrors {
		return nil
	}
	if o, _ := old.(map[string]any); o != nil && o["error"] != nil {
		return nil
	}
	id, _ := json.Marshal(m["id"])
	return fmt.Errorf("the agent answered request %s with error %v: %v; --update writes a response that is an error only with --accept-errors (check the client's lines first: they may no longer fit what the agent does)", id, e["code"], e["message"])
}

// segmentLines reads the agent's lines for seg: up to as many lines of the
// kind of its last as seg has.
func (r *run) segmentLines(seg []Step) ([][]byte, error) {
	anchor := r.kindOf(seg[len(seg)-1].want)
	need := 0
	for _, st := range seg {
		if kindMatch(r.kindOf(st.want), anchor) {
			need++
		}
	}
	var got [][]byte
	for have := 0; have < need; {
		line, err := r.next(seg[len(seg)-1])
		if err != nil {
			return nil, err
		}
		got = append(got, line)
		if d, _ := decode(line); kindMatch(anchor, r.kindOf(d)) {
			have++
		}
	}
	return got, nil
}

// remainingAnswers reads, at the end, the agent's lines while the client's
// requests are unanswered.
func (r *run) remainingAnswers() ([][]byte, error) {
	var got [][]byte
	for len(r.pending) > 0 {
		line, ok, err := r.read(0, "answers to the client's requests")
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		got = append(got, line)
	}
	return got, nil
}

// kindOf names what a line is: "m:METHOD" (with "/KIND" for a
// session/update), "r:ID" for a response, "r:*" for a response whose id is
// a variable not yet bound.
func (r *run) kindOf(x any) string {
	m, ok := x.(map[string]any)
	if !ok {
		return "?"
	}
	if method, ok := m["method"].(string); ok {
		if su := updateKind(m); su != "" {
			return "m:" + method + "/" + su
		}
		return "m:" + method
	}
	id := m["id"]
	if s, ok := id.(string); ok {
		if name, isVar := varName(s); isVar {
			b, bound := r.v.get(name)
			if !bound {
				return "r:*"
			}
			id = b
		}
	}
	return fmt.Sprintf("r:%s", encode(id))
}

// updateKind is the sessionUpdate of the notification m, or "".
func updateKind(m map[string]any) string {
	p, _ := m["params"].(map[string]any)
	u, _ := p["update"].(map[string]any)
	su, _ := u["sessionUpdate"].(string)
	return su
}

func kindMatch(a, b string) bool {
	return a == b || (a == "r:*" && strings.HasPrefix(b, "r:")) || (b == "r:*" && strings.HasPrefix(a, "r:"))
}

// bindLoose binds the unbound variables of want to what got has in their
// places, whatever else differs.
func (v *vars) bindLoose(want, got any) {
	switch w := want.(type) {
	case string:
		if name, ok := varName(w); ok && name != "ANY" {
			if _, bound := v.get(name); !bound && got != nil {
				v.set(name, got)
			}
		}
	case map[string]any:
		if g, ok := got.(map[string]any); ok {
			for k, e := range w {
				v.bindLoose(e, g[k])
			}
		}
	case []any:
		if g, ok := got.([]any); ok {
			for i := range min(len(w), len(g)) {
				v.bindLoose(w[i], g[i])
			}
		}
	}
}

// Format writes the scenario back as a txtar archive.
func (sc *Scenario) Format() []byte {
	var sb strings.Builder
	sb.WriteString(sc.Comment)
	for _, s := range sc.Sections {
		fmt.Fprintf(&sb, "-- %s --\n%s", s.Name, s.Data)
	}
	return []byte(sb.String())
}
