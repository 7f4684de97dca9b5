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

	"acpbridge/internal/clip"
)

// view is a run's lines as the comparison sees them: each line
// generalized with the run's directories as variables (so that ids and
// times read the same in both runs), and consecutive message or thought
// chunks of one session joined into one line, so that how an agent splits
// its stream does not count.
func view(lines [][]byte, env Env) []any {
	v := newVars()
	v.set("CWD", env.Cwd)
	v.set("STATE", env.State)
	v.set("DIR", env.Dir)
	var out []any
	var joining any // the last chunk line, while chunks of its kind follow
	for _, line := range lines {
		text, err := v.generalize(line, nil, true)
		if err != nil {
			out = append(out, string(line))
			joining = nil
			continue
		}
		x, _ := decode([]byte(text))
		if kind, content := chunkOf(x); kind != "" {
			if prevKind, prev := chunkOf(joining); prevKind == kind && sameSession(joining, x) {
				prev["text"] = prev["text"].(string) + content["text"].(string)
				continue
			}
			joining = x
			out = append(out, x)
			continue
		}
		joining = nil
		out = append(out, x)
	}
	return out
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

// differences lists, at most max, where the views a and b differ. The
// lines are first aligned by kind (a response to an id, a method and its
// update kind), so that a line one agent sends and the other does not
// shows as that, not as a shift of every line after it; aligned lines are
// compared as JSON values, path by path.
func differences(nameA string, a []any, nameB string, b []any, max int) []string {
	var out []string
	for _, p := range align(a, b) {
		if len(out) >= max {
			out = append(out, "(more differences not shown)")
			break
		}
		switch {
		case p.i < 0:
			out = append(out, fmt.Sprintf("%s's line %d: only %s sent %s", nameB, p.j+1, nameB, show(b[p.j])))
		case p.j < 0:
			out = append(out, fmt.Sprintf("%s's line %d: only %s sent %s", nameA, p.i+1, nameA, show(a[p.i])))
		default:
			var paths []string
			diffValues("", a[p.i], b[p.j], &paths)
			for _, d := range paths {
				out = append(out, fmt.Sprintf("line %d / %d (%s) at %s", p.i+1, p.j+1, what(a[p.i]), d))
			}
		}
	}
	return out
}

// pair is a line of a (i) and of b (j) aligned; -1 where a side has none.
type pair struct{ i, j int }

// align pairs the lines of a and b of the same kind, keeping their order,
// as many as can be (a longest common subsequence of their kinds).
func align(a, b []any) []pair {
	ka, kb := kinds(a), kinds(b)
	n, m := len(ka), len(kb)
	if n*m > 4_000_000 { // too long to align: line by line
		var out []pair
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
		return out
	}
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if ka[i] == kb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []pair
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
	return out
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

// compareRuns is the report of where each agent after the first differs
// from the first.
func compareRuns(names []string, results []Result) string {
	var sb strings.Builder
	base := view(results[0].Received, results[0].Env)
	for i := 1; i < len(results); i++ {
		diffs := differences(names[0], base, names[i], view(results[i].Received, results[i].Env), 20)
		if len(diffs) == 0 {
			fmt.Fprintf(&sb, "  %s and %s sent the same lines (chunks joined; ids and times as variables)\n", names[0], names[i])
			continue
		}
		fmt.Fprintf(&sb, "  where %s and %s differ (values: %s / %s):\n", names[0], names[i], names[0], names[i])
		for _, d := range diffs {
			sb.WriteString("    " + d + "\n")
		}
	}
	return sb.String()
}
