// arrival.go decides each message as it arrives, on the goroutine that
// reads stdin (session.go says why): the dispatch table, the admission of
// every method the loop runs, the errors on the wire, and what acts at
// once ($/cancel_request, authenticate, logout: auth.go).

package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/creachadair/jrpc2"
	"github.com/creachadair/jrpc2/handler"

	"acpbridge/internal/acp"
	"acpbridge/internal/channel"
	"acpbridge/internal/store"
)

// notAStep is the jrpc2 handler of a method arrival queues, which jrpc2
// sees only when it came as a notification: it has nobody to answer.
func (a *agent) notAStep(ctx context.Context, req *jrpc2.Request) (any, error) {
	return nil, acp.Errorf(jrpc2.InvalidRequest, "%s must be a request, not a notification", req.Method())
}

// admission is what arrival decided for a request: answer it now (result
// or err), or run a step on the loop.
type admission struct {
	result any
	err    error
	run    func() (any, error)
	cancel cancelling // what $/cancel_request does to the step, or nil
}

func refuse(err error) admission { return admission{err: err} }

func answerNow(result any) admission { return admission{result: result} }

func queue(run func() (any, error)) admission { return admission{run: run} }

// queueCancellable is queue for a step that $/cancel_request can cancel.
func queueCancellable(run func() (any, error), cancel cancelling) admission {
	return admission{run: run, cancel: cancel}
}

// handlers is the dispatch table: every ACP method acpbridge serves. The
// methods decided at arrival (arrivals) reach jrpc2 only when sent as a
// notification, which has nobody to answer.
func (a *agent) handlers() handler.Map {
	m := handler.Map{
		acp.MethodSessionList:   a.guard(a.session(handle(a.listSessions))),
		acp.MethodCancelRequest: a.guard(a.cancelRequestHandler),
	}
	for method := range a.arrivals {
		m[method] = a.guard(a.notAStep)
	}
	return m
}

// arrival is how a method decided at arrival is admitted: its params
// decoded and checked, then its admission; and whether it may come before
// initialize.
type arrival struct {
	admit      func(params json.RawMessage) admission
	beforeInit bool
}

// arrivalTable is the one table of the methods decided at arrival.
func (a *agent) arrivalTable() map[string]arrival {
	return map[string]arrival{
		acp.MethodInitialize:             {typed(a.admitInitialize), true},
		acp.MethodSessionCancel:          {typed(a.admitCancel), true},
		acp.MethodSessionNew:             {typed(signedIn(a, a.admitNew)), false},
		acp.MethodSessionLoad:            {typed(signedIn(a, a.admitOpen(true))), false},
		acp.MethodSessionResume:          {typed(signedIn(a, a.admitOpen(false))), false},
		acp.MethodSessionClose:           {typed(a.admitClose), false},
		acp.MethodSessionPrompt:          {typed(a.admitPrompt), false},
		acp.MethodSessionDelete:          {typed(a.admitDelete), false},
		acp.MethodSessionSetMode:         {typed(a.admitSetMode), false},
		acp.MethodSessionSetConfigOption: {typed(a.admitSetConfig), false},
		acp.MethodAuthenticate:           {typed(a.admitAuthenticate), false},
		acp.MethodLogout:                 {typed(a.admitLogout), false},
	}
}

// arrive decides one message, in arrival order (the wire calls it on the
// reading goroutine). It returns the response to write at once when the
// answer is decided; or it queues the request's step, whose answer the
// loop writes (taken); otherwise the request goes on to jrpc2.
// session/cancel acts here and answers nothing. A request method sent as
// a notification is not admitted: it has nobody to answer.
func (a *agent) arrive(method, id string, params json.RawMessage) (answer []byte, taken bool) {
	if method == acp.MethodCancelRequest {
		a.cancelRequest(params)
		return nil, id == "" // sent as a request, it goes on to jrpc2, which answers
	}
	if id == "" && method != acp.MethodSessionCancel {
		return nil, false
	}
	adm, ok := a.safeAdmit(method, id, params)
	if !ok || id == "" {
		return nil, false
	}
	if adm.run == nil {
		if len(params) > bigRequest {
			// Refused at arrival: the loop gives the copies its params
			// made back to the system, as after a big step.
			a.steps.push(&step{run: func() (any, error) { return nil, nil }, big: true})
		}
		return encodeResponse(id, adm.result, adm.err), true
	}
	a.steps.push(&step{reqID: id, run: adm.run, cancel: adm.cancel, big: len(params) > bigRequest})
	return nil, true
}

// safeAdmit admits a message and turns a panic into the request's error;
// ok is false for a method not decided at arrival.
func (a *agent) safeAdmit(method, id string, params json.RawMessage) (adm admission, ok bool) {
	defer func() {
		if err := a.panicked(method, recover()); err != nil {
			adm, ok = refuse(err), true
		}
	}()
	m, ok := a.arrivals[method]
	if !ok {
		return admission{}, false
	}
	if !m.beforeInit {
		a.mu.Lock()
		initialized := a.initialized
		a.mu.Unlock()
		if !initialized {
			return refuse(errNotInitialized(method)), true
		}
	}
	return m.admit(params), true
}

// encodeResponse is the response to request id, as jrpc2 would write it.
func encodeResponse(id string, result any, err error) []byte {
	if err != nil {
		return channel.EncodeResponse(id, nil, wireError(err))
	}
	return channel.EncodeResponse(id, result, nil)
}

// guard turns a panic into an internal error and every error into a
// *jrpc2.Error, so that no handler can end the process or leak jrpc2's codes.
func (a *agent) guard(h jrpc2.Handler) jrpc2.Handler {
	return func(ctx context.Context, req *jrpc2.Request) (res any, err error) {
		defer func() {
			if e := a.panicked(req.Method(), recover()); e != nil {
				res, err = nil, e
			}
		}()
		res, err = h(ctx, req)
		if err != nil {
			err = wireError(err)
		}
		return res, err
	}
}

// session requires initialize first.
func (a *agent) session(h jrpc2.Handler) jrpc2.Handler {
	return func(ctx context.Context, req *jrpc2.Request) (any, error) {
		a.mu.Lock()
		ok := a.initialized
		a.mu.Unlock()
		if !ok {
			return nil, errNotInitialized(req.Method())
		}
		return h(ctx, req)
	}
}

// withSession is params that name a session: its sessionId is required.
type withSession interface{ Session() *string }

// typed is admit for raw params: they are decoded into a P (a wrong field
// is named) and, when P names a session, its sessionId is required; then
// they are admitted.
func typed[P any](admit func(sessionID string, p *P) admission) func(raw json.RawMessage) admission {
	return func(raw json.RawMessage) admission {
		p, sid, err := decodeTyped[P](raw)
		if err != nil {
			return refuse(err)
		}
		return admit(sid, p)
	}
}

// handle decodes params as typed does, for the methods jrpc2 runs as they
// come (list).
func handle[P any](h func(ctx context.Context, sessionID string, p *P) (any, error)) jrpc2.Handler {
	return func(ctx context.Context, req *jrpc2.Request) (any, error) {
		var raw json.RawMessage
		if req.HasParams() {
			if err := req.UnmarshalParams(&raw); err != nil {
				return nil, acp.Errorf(acp.CodeInvalidParams, "invalid params: %v", err)
			}
		}
		p, sid, err := decodeTyped[P](raw)
		if err != nil {
			return nil, err
		}
		return h(ctx, sid, p)
	}
}

func decodeTyped[P any](raw json.RawMessage) (*P, string, error) {
	p := new(P)
	if err := decodeRaw(raw, p); err != nil {
		return nil, "", err
	}
	if ws, ok := any(p).(withSession); ok {
		id, err := required("sessionId", ws.Session())
		return p, id, err
	}
	return p, "", nil
}

func (a *agent) admitInitialize(_ string, p *acp.InitializeParams) admission {
	a.mu.Lock()
	a.initialized = true
	a.client = p.ClientCapabilities
	a.mu.Unlock()
	return answerNow(acp.AgentInitializeResult(version, p.ClientCapabilities))
}

func answerOf(result any, err error) admission { return admission{result: result, err: err} }

// cancelRequest is $/cancel_request {requestId} at arrival: a running
// prompt ends cancelled, a running load or resume fails -32800; a queued
// prompt, session/new, load or resume is answered -32800 and never runs.
// Every other request is answered at arrival or cannot be withdrawn (a
// close acts at arrival); an answered or unknown id changes nothing.
func (a *agent) cancelRequest(params json.RawMessage) {
	if id := acp.CancelledRequest(params); id != nil {
		a.steps.cancelRequest(string(id))
	}
}

// cancelRequestHandler answers a $/cancel_request sent as a request: it is
// a notification, and has acted at arrival.
func (a *agent) cancelRequestHandler(ctx context.Context, req *jrpc2.Request) (any, error) {
	return nil, nil
}

// decodeRaw decodes params into v and names the field on failure.
func decodeRaw(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	if raw[0] == '[' {
		return acp.InvalidParams("params", "must be an object, not an array")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return acp.InvalidParams(te.Field, "must be %s, not %s", acp.JSONKind(te.Type.Kind().String()), te.Value)
		}
		return acp.Errorf(acp.CodeInvalidParams, "invalid params: %s", acp.DescribeJSONError(err))
	}
	return nil
}

// required returns *p or an error naming field.
func required(field string, p *string) (string, error) {
	if p == nil {
		return "", acp.InvalidParams(field, "required")
	}
	return *p, nil
}

// wireError is err as the client gets it: the store's errors get their
// codes, an error that already has one keeps it, any other is internal.
func wireError(err error) *jrpc2.Error {
	var (
		notFound *store.NotFoundError
		locked   *store.LockedError
		failed   *store.Error
	)
	switch {
	case errors.As(err, &notFound):
		return acp.Errorf(acp.CodeResourceNotFound, "%v", notFound).WithData(map[string]string{"sessionId": notFound.ID})
	case errors.As(err, &locked):
		return acp.Errorf(acp.CodeSessionLocked, "%v", locked).WithData(map[string]any{"sessionId": locked.ID, "pid": locked.PID})
	case errors.As(err, &failed):
		return acp.Errorf(acp.CodeStoreFailed, "%v", failed)
	case errors.Is(err, store.ErrBadCursor):
		return acp.InvalidParams("cursor", "%v", store.ErrBadCursor)
	}
	return acp.AsError(err)
}
