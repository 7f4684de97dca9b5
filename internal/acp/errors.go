// errors.go holds the JSON-RPC error codes acpbridge answers with and the
// helpers that build them. Every handler error leaves as a deliberate
// *jrpc2.Error: a bare Go error would go out as jrpc2's own -32098, which ACP
// clients do not know.

package acp

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/creachadair/jrpc2"
)

// ACP and JSON-RPC codes.
const (
	CodeInvalidParams    = jrpc2.InvalidParams // -32602
	CodeInternal         = jrpc2.InternalError // -32603
	CodeResourceNotFound = jrpc2.Code(-32002)  // ACP: unknown session, missing file
	CodeRequestCancelled = jrpc2.Code(-32800)  // ACP: request cancelled
	CodeAuthRequired     = jrpc2.Code(-32000)  // ACP: sign in first (the client offers its sign-in)
)

// acpbridge's own codes. They lie outside -32768..-32000 on purpose: that
// range is JSON-RPC's and ACP's, and -32000 (CodeAuthRequired, for a
// missing sign-in only) makes clients show a login screen.
const (
	CodeNotInitialized = jrpc2.Code(1000) // a session method before initialize
	CodeSessionLive    = jrpc2.Code(1001) // this process already holds a session
	CodeSessionLocked  = jrpc2.Code(1002) // another process holds the session
	CodeTurnRunning    = jrpc2.Code(1003) // a prompt while a turn runs
	CodeNoModel        = jrpc2.Code(1004) // session/prompt with no --model
	CodeModelFailed    = jrpc2.Code(1005) // the model call failed
	CodeStoreFailed    = jrpc2.Code(1006) // the session store could not be written or read
)

// Errorf builds a *jrpc2.Error with a formatted message.
func Errorf(code jrpc2.Code, format string, args ...any) *jrpc2.Error {
	return &jrpc2.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidParams names the field that is wrong.
func InvalidParams(field, format string, args ...any) *jrpc2.Error {
	return Errorf(CodeInvalidParams, "invalid params: %s: %s", field, fmt.Sprintf(format, args...)).
		WithData(map[string]string{"field": field})
}

// AsError turns any error into one fit for the wire. Errors that already
// are *jrpc2.Error (wrapped or not) keep their code, message and data.
func AsError(err error) *jrpc2.Error {
	var e *jrpc2.Error
	if errors.As(err, &e) {
		return e
	}
	return Errorf(CodeInternal, "%v", err)
}

// DescribeJSONError words a decoding error for a person.
func DescribeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Sprintf("expected a JSON object, got %s", te.Value)
		}
		return fmt.Sprintf("%s must be %s, not %s", te.Field, JSONKind(te.Type.Kind().String()), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "not valid JSON: " + se.Error()
	}
	return err.Error()
}

func JSONKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "ptr":
		return "a value of another type"
	case "int", "int64", "int32", "uint32", "uint64", "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	}
	return "an object"
}
