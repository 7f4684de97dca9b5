// encode.go writes a record as encoding/json would (the log's bytes do not
// depend on which writes it), by hand: a tool result's content, about as
// long as what the tool read, is copied once instead of scanned again.
//
// Raw fields are spliced as they are, so they must be compact JSON, as
// everything acpbridge makes is; a user record's blocks come from the
// client, and such a record goes through encoding/json (which compacts).
package store

import (
	"encoding/json"
	"strconv"

	"acpbridge/internal/jsonenc"
)

// appendRecord appends r's JSON encoding.
func appendRecord(b []byte, r *Record) ([]byte, error) {
	if len(r.Blocks) > 0 {
		out, err := jsonenc.Marshal(r)
		return append(b, out...), err
	}
	w := recordWriter{b: append(b, `{"type":`...)}
	w.b = jsonenc.AppendString(w.b, r.Type)
	w.int("v", r.V)
	w.str("sessionId", r.SessionID)
	w.str("cwd", r.Cwd)
	w.strs("additionalDirectories", r.Dirs)
	w.str("createdAt", r.CreatedAt)
	w.str("mode", r.Mode)
	w.str("model", r.Model)
	w.str("tool", r.Tool)
	if r.Allow != nil {
		w.key("allow")
		w.b = strconv.AppendBool(w.b, *r.Allow)
	}
	w.str("messageId", r.MessageID)
	w.str("text", r.Text)
	w.bool("notice", r.Notice)
	w.str("toolCallId", r.ToolCallID)
	if r.Call != nil {
		w.call(r.Call)
	}
	w.str("title", r.Title)
	w.str("kind", r.Kind)
	w.raw("locations", r.Locations)
	w.str("status", r.Status)
	w.raw("content", r.Content)
	w.raw("rawOutput", r.RawOutput)
	w.str("result", r.Result)
	w.bool("resultIsContent", r.ResultIsContent)
	w.str("stopReason", r.StopReason)
	if r.Usage != nil {
		w.usage(r.Usage)
	}
	w.str("error", r.Error)
	w.bool("interrupted", r.Interrupted)
	w.int("replayPos", r.ReplayPos)
	w.raw("plan", r.Plan)
	return append(w.b, '}'), nil
}

// strs writes a member whose value is a list of strings, when it has any.
func (w *recordWriter) strs(k string, ss []string) {
	if len(ss) == 0 {
		return
	}
	w.key(k)
	for i, s := range ss {
		w.b = append(w.b, "[,"[min(i, 1)])
		w.b = jsonenc.AppendString(w.b, s)
	}
	w.b = append(w.b, ']')
}

// call writes a tool call record's call.
func (w *recordWriter) call(c *Call) {
	w.key("call")
	w.b = append(w.b, `{"id":`...)
	w.b = jsonenc.AppendString(w.b, c.ID)
	w.b = append(w.b, `,"name":`...)
	w.b = jsonenc.AppendString(w.b, c.Name)
	w.b = append(w.b, `,"input":`...)
	w.rawOrNull(c.Input)
	w.b = append(w.b, '}')
}

// usage writes a turn's token counts.
func (w *recordWriter) usage(u *Usage) {
	w.key("usage")
	w.b = append(w.b, `{"inputTokens":`...)
	w.b = strconv.AppendInt(w.b, u.InputTokens, 10)
	w.b = append(w.b, `,"outputTokens":`...)
	w.b = strconv.AppendInt(w.b, u.OutputTokens, 10)
	w.b = append(w.b, '}')
}

// recordWriter writes the members after "type", each with omitempty's rule.
type recordWriter struct{ b []byte }

func (w *recordWriter) key(k string) {
	w.b = append(w.b, ',', '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *recordWriter) str(k, v string) {
	if v != "" {
		w.key(k)
		w.b = jsonenc.AppendString(w.b, v)
	}
}

func (w *recordWriter) int(k string, v int) {
	if v != 0 {
		w.key(k)
		w.b = strconv.AppendInt(w.b, int64(v), 10)
	}
}

func (w *recordWriter) bool(k string, v bool) {
	if v {
		w.key(k)
		w.b = append(w.b, "true"...)
	}
}

func (w *recordWriter) raw(k string, v json.RawMessage) {
	if len(v) > 0 {
		w.key(k)
		w.b = append(w.b, v...)
	}
}

func (w *recordWriter) rawOrNull(v json.RawMessage) {
	if len(v) == 0 {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, v...)
}
