// neutral.go turns a recorded transcript into an agent-neutral one
// (`scenario record --neutral`): what another agent that behaves the same
// passes unchanged. Permission answers go by the kind of option; the
// agent's wording, capabilities and stream are free; its requests to the
// client, its tool calls, the sessions and the stop reasons stay pinned.
// The model fixture's entries that follow a tool call lose their expect
// (a tool's result is worded by each agent its own way).

package scenario

import (
	"encoding/json"
	"strings"
)

// anyUpdates is the line that lets an agent send any session updates
// before the next pinned line.
const anyUpdates = `<* {"jsonrpc":"2.0","method":"session/update","params":"$ANY"}`

// neutralTranscript rewrites a recorded transcript (its lines as
// transcriptWith writes them) agent-neutrally.
func neutralTranscript(tr string) string {
	lines := oneAtATime(strings.Split(strings.TrimSuffix(tr, "\n"), "\n"))
	options := map[string][]permissionOption{} // the permission requests' options, by id as written
	var out []string
	lastPinned := 0 // out's length after the last pinned agent line
	for _, line := range lines {
		text, fromAgent := strings.CutPrefix(line, "< ")
		if !fromAgent {
			if client, ok := strings.CutPrefix(line, "> "); ok {
				line = "> " + answerByKind(client, options)
			}
			out = append(out, line)
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(text), &m) != nil {
			out = append(out, line)
			continue
		}
		pinned, isUpdate := neutralLine(m, options)
		if isUpdate && pinned == nil {
			// Free: the any-updates line before the next pinned line
			// covers it. After the last one, none does: it is kept
			// where it stood, by its kind (marked until the end).
			out = append(out, freeMark+"< "+encodeLine(looseUpdate(m)))
			continue
		}
		out = append(out, anyUpdates, "< "+encodeLine(pinned))
		lastPinned = len(out)
	}
	var kept []string
	for i, line := range out {
		if free, ok := strings.CutPrefix(line, freeMark); ok {
			if i < lastPinned {
				continue
			}
			line = free
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, "\n") + "\n"
}

// oneAtATime makes the requests of a group of client lines written
// together (pipelined in one write) go one at a time, each after the
// answer to the one before it: an agent that runs requests at once answers
// them in any order, which is not a way it behaves otherwise.
func oneAtATime(lines []string) []string {
	var out, held []string
	awaited := "" // the id of the request whose answer lets the held lines go
	release := func() {
		awaited = ""
		for len(held) > 0 {
			line := held[0]
			held = held[1:]
			out = append(out, line)
			if id, ok := clientRequestID(line); ok {
				awaited = id
				return
			}
		}
	}
	together := false // the line before was the client's too: one write
	for _, line := range lines {
		client := strings.HasPrefix(line, ">") || line == "close"
		switch {
		case client && len(held) == 0 && isCancel(line):
			// A cancel (Stop pressed before the first token) is of the
			// request in flight: it stays before that request's answer.
			out = append(out, line)
		case client && (len(held) > 0 || together && awaited != ""):
			held = append(held, line)
		case client:
			out = append(out, line)
			if id, ok := clientRequestID(line); ok {
				awaited = id
			}
		default:
			out = append(out, line)
			if awaited != "" && answerID(line) == awaited {
				release()
			}
		}
		together = client
	}
	return append(out, held...)
}

// isCancel reports whether a > line is session/cancel or $/cancel_request.
func isCancel(line string) bool {
	text, _ := strings.CutPrefix(line, "> ")
	var m struct {
		Method string `json:"method"`
	}
	json.Unmarshal([]byte(text), &m)
	return m.Method == "session/cancel" || m.Method == "$/cancel_request"
}

// clientRequestID is the id of a > line that is a request.
func clientRequestID(line string) (string, bool) {
	text, ok := strings.CutPrefix(line, "> ")
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if !ok || json.Unmarshal([]byte(text), &m) != nil || m.Method == "" || len(m.ID) == 0 {
		return "", false
	}
	return string(m.ID), true
}

// answerID is the id of a < line that is a response, or "".
func answerID(line string) string {
	text, ok := strings.CutPrefix(line, "< ")
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if !ok || json.Unmarshal([]byte(text), &m) != nil || m.Method != "" {
		return ""
	}
	return string(m.ID)
}

// freeMark marks a free update's line while the transcript is rewritten.
const freeMark = "\x00"

// neutralLine is the pinned form of an agent line, or nil (with isUpdate)
// for a session update that is free. options gathers the permission
// requests' options.
func neutralLine(m map[string]any, options map[string][]permissionOption) (pinned map[string]any, isUpdate bool) {
	params, _ := m["params"].(map[string]any)
	method, isCall := m["method"].(string)
	switch {
	case method == "session/update":
		update, _ := params["update"].(map[string]any)
		if update["sessionUpdate"] != "tool_call" {
			return nil, true
		}
		u := map[string]any{"sessionUpdate": "tool_call", "$REST": true}
		if k, ok := update["kind"]; ok {
			u["kind"] = k
		}
		return map[string]any{"jsonrpc": "2.0", "method": method, "params": map[string]any{"sessionId": params["sessionId"], "update": u, "$REST": true}}, true
	case isCall: // a request of the agent's: its method and session pinned
		if method == "session/request_permission" {
			b, _ := json.Marshal(params["options"])
			var opts []permissionOption
			json.Unmarshal(b, &opts)
			id, _ := json.Marshal(m["id"])
			options[string(id)] = opts
		}
		p := map[string]any{"$REST": true}
		if sid, ok := params["sessionId"]; ok {
			p["sessionId"] = sid
		}
		return map[string]any{"jsonrpc": "2.0", "id": m["id"], "method": method, "params": p}, false
	}
	if e, isErr := m["error"].(map[string]any); isErr {
		return map[string]any{"jsonrpc": "2.0", "id": m["id"], "error": map[string]any{"code": e["code"], "message": "$ANY", "$REST": true}}, false
	}
	res, _ := m["result"].(map[string]any)
	kept := map[string]any{"$REST": true}
	for _, k := range []string{"sessionId", "stopReason"} {
		if v, ok := res[k]; ok {
			kept[k] = v
		}
	}
	var result any = kept
	if len(kept) == 1 {
		result = "$ANY"
	}
	return map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": result}, false
}

// looseUpdate is a session update pinned by its kind only.
func looseUpdate(m map[string]any) map[string]any {
	params, _ := m["params"].(map[string]any)
	update, _ := params["update"].(map[string]any)
	return map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": params["sessionId"],
		"update": map[string]any{"sessionUpdate": update["sessionUpdate"], "$REST": true}, "$REST": true}}
}

// answerByKind rewrites a client's answer to a permission request from the
// option's id to its kind.
func answerByKind(line string, options map[string][]permissionOption) string {
	var m map[string]any
	if !strings.Contains(line, `"optionId"`) || json.Unmarshal([]byte(line), &m) != nil {
		return line
	}
	id, _ := json.Marshal(m["id"])
	res, _ := m["result"].(map[string]any)
	outcome, _ := res["outcome"].(map[string]any)
	for _, o := range options[string(id)] {
		if o.OptionID == outcome["optionId"] {
			delete(outcome, "optionId")
			outcome["optionKind"] = o.Kind
			return encodeLine(m)
		}
	}
	return line
}

// encodeLine is a transcript line's JSON, without HTML escaping.
func encodeLine(x any) string {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	enc.Encode(x)
	return strings.TrimSuffix(sb.String(), "\n")
}

// neutralFixture is a model fixture whose entries after a tool call have no
// expect: the tool's result, which that expect holds, is each agent's own
// wording.
func neutralFixture(fixture string) string {
	lines := strings.SplitAfter(fixture, "\n")
	afterCall := false
	for i, line := range lines {
		var e map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &e) != nil {
			continue // a comment or a blank line
		}
		if _, has := e["expect"]; has && afterCall {
			delete(e, "expect")
			b, _ := json.Marshal(e)
			lines[i] = string(b) + "\n"
		}
		afterCall = strings.Contains(string(e["chunks"]), `"toolCall"`)
	}
	return strings.Join(lines, "")
}
