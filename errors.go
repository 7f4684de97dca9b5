// errors.go holds the JSON-RPC error codes acpbridge answers with and the
// helpers that build them. Every handler error leaves as a deliberate
// *jrpc2.Error: a bare Go error would go out as jrpc2's own -32098, which ACP
// clients do not know.
package main

import (
	"errors"
	"fmt"

	"github.com/creachadair/jrpc2"
)

// ACP and JSON-RPC codes.
const (
	codeInvalidRequest   = jrpc2.InvalidRequest // -32600
	codeMethodNotFound   = jrpc2.MethodNotFound // -32601
	codeInvalidParams    = jrpc2.InvalidParams  // -32602
	codeInternal         = jrpc2.InternalError  // -32603
	codeResourceNotFound = jrpc2.Code(-32002)   // ACP: unknown session, missing file
	codeRequestCancelled = jrpc2.Code(-32800)   // ACP: request cancelled
)

// acpbridge's own codes. They lie outside -32768..-32000 on purpose: that
// range is JSON-RPC's and ACP's, and -32000 makes clients show a login screen.
const (
	codeNotInitialized = jrpc2.Code(1000) // a session method before initialize
	codeSessionLive    = jrpc2.Code(1001) // this process already holds a session
	codeSessionLocked  = jrpc2.Code(1002) // another process holds the session
	codeTurnRunning    = jrpc2.Code(1003) // a prompt while a turn runs
	codeNoModel        = jrpc2.Code(1004) // session/prompt with no --model
	codeModelFailed    = jrpc2.Code(1005) // the model call failed
	codeStoreFailed    = jrpc2.Code(1006) // the session store could not be written or read
)

// rpcError builds a *jrpc2.Error with a formatted message.
func rpcError(code jrpc2.Code, format string, args ...any) *jrpc2.Error {
	return &jrpc2.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// invalidParams names the field that is wrong.
func invalidParams(field, format string, args ...any) *jrpc2.Error {
	return rpcError(codeInvalidParams, "invalid params: %s: %s", field, fmt.Sprintf(format, args...)).
		WithData(map[string]string{"field": field})
}

// asRPCError turns any error into one fit for the wire. Errors that already
// are *jrpc2.Error (wrapped or not) keep their code, message and data.
func asRPCError(err error) *jrpc2.Error {
	var e *jrpc2.Error
	if errors.As(err, &e) {
		return e
	}
	return rpcError(codeInternal, "%v", err)
}
