// auth.go holds signing in: which model, endpoint and key this process
// uses (flags and the environment over the stored sign-in), whether a
// session must wait for a sign-in, and authenticate and logout.

package main

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
	"acpbridge/internal/proc"
	"acpbridge/internal/signin"
)

// signIn is what the command line, the environment and the stored sign-in
// decide together.
type signIn struct {
	spec    string // the model spec: --model's, else openai:<stored model>; "" for none
	baseURL string // --base-url's, else the stored endpoint, else OpenAI's
	key     string // OPENAI_API_KEY, else the key stored for baseURL; "" for none
	stored  bool   // key is the stored sign-in's
	missing string // why a session must wait for a sign-in, or "" when it need not
}

// resolveSignIn decides the model, endpoint and key. A stored key is sent
// only to the endpoint it was stored for; the environment's goes wherever
// the command line points. With no key, a model on another machine, or
// none configured at all, needs a sign-in first.
func resolveSignIn(cfg config, envKey, path string, stored signin.Stored) signIn {
	s := signIn{spec: cfg.modelSpec, baseURL: cfg.baseURL, key: envKey}
	if s.spec == "" && stored.Model != "" {
		s.spec = "openai:" + stored.Model
	}
	if s.baseURL == "" {
		s.baseURL = cmp.Or(stored.Endpoint, signin.DefaultEndpoint)
	}
	if s.key == "" && stored.Key != "" && signin.SameEndpoint(stored.Endpoint, s.baseURL) {
		s.key, s.stored = stored.Key, true
	}
	how := fmt.Sprintf("sign in (the editor's sign-in, or acpbridge setup in a terminal, which stores it in %s)", path)
	switch {
	case s.spec == "":
		s.missing = "acpbridge has no model yet: " + how + ", or start it with --model openai:MODEL (an OpenAI-compatible endpoint, with OPENAI_API_KEY; --base-url for Ollama and other servers) or --model replay:FIXTURE.jsonl"
	case strings.HasPrefix(s.spec, "openai:") && s.key == "" && !signin.Local(s.baseURL):
		// A URL that is none is the model's error to tell (--base-url),
		// not a sign-in's.
		if shown, err := model.ShownEndpoint(s.baseURL); err == nil {
			s.missing = fmt.Sprintf("acpbridge has no key for %s: %s, or set OPENAI_API_KEY in the agent's environment; an endpoint on this machine (--base-url http://localhost:11434/v1 for Ollama) needs none", shown, how)
		}
	}
	return s
}

// keyring is the provider's key in use, shared by the model, which asks
// for it at each request, and logout. A key from the stored sign-in
// follows the file: when the file changes (setup run again, a sign-out
// here or in another process, the router's other children included), the
// next request takes the key stored for the same endpoint now, or none.
type keyring struct {
	mu       sync.Mutex
	key      string
	stored   bool      // key is the stored sign-in's
	path     string    // the stored sign-in, when stored
	endpoint string    // where the key is sent
	stamp    fileStamp // the file as key was read from it
	held     string    // the last key held, redacted from what tools return after a sign-out too
}

// fileStamp tells a file's versions apart: its size and modification time.
type fileStamp struct {
	size int64
	mod  time.Time
}

func (s fileStamp) same(o fileStamp) bool { return s.size == o.size && s.mod.Equal(o.mod) }

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi.Size(), fi.ModTime()}
}

func (k *keyring) get() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stored {
		if now := stampOf(k.path); !now.same(k.stamp) {
			k.stamp = now
			stored, err := signin.Load(k.path)
			k.key = ""
			if err == nil && signin.SameEndpoint(stored.Endpoint, k.endpoint) {
				k.key = stored.Key
			}
			k.remember()
		}
	}
	return k.key
}

// use takes the key s decided on, sent to s's endpoint.
func (k *keyring) use(s signIn, path string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.key, k.stored, k.endpoint = s.key, s.stored, s.baseURL
	if s.stored {
		k.path, k.stamp = path, stampOf(path)
	}
	k.remember()
}

func (k *keyring) remember() {
	if k.key != "" {
		k.held = k.key
	}
}

// secret is what tools' output is redacted of.
func (k *keyring) secret() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.held
}

// signOut drops a key that came from the stored sign-in; whether it did.
func (k *keyring) signOut() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.stored || k.key == "" {
		return false
	}
	k.key = ""
	return true
}

// loadSignIn reads the stored sign-in and decides with the command line.
func (a *agent) loadSignIn() signIn {
	stored, err := signin.Load(a.signinPath)
	if err != nil {
		a.log.Warn("the stored sign-in is not usable; sign in again", "err", err)
	}
	return resolveSignIn(a.cfg, a.envKey, a.signinPath, stored)
}

// useSignIn makes the model s names, or says why a session waits for a
// sign-in (a.signInNeeded). It runs at start, and again at a session's
// opening while the sign-in is missing: the user may have signed in
// meanwhile (the editor runs acpbridge setup beside this process). A model
// made already is kept, and only given the new key: the next process
// takes a new endpoint or model.
func (a *agent) useSignIn(s signIn) {
	a.keys.use(s, a.signinPath)
	a.signInNeeded = s.missing
	if s.missing != "" || a.model != nil {
		return
	}
	m, err := newModel(s.spec, s.baseURL, a.cfg.models, a.keys.get, a.log)
	if err != nil {
		// A model it cannot use can wait: the process serves, and the
		// first prompt is answered with why (a client shows errors of
		// requests, not the stderr of an agent that exited before
		// initialize).
		a.modelErr = fmt.Errorf("--model %s: %v", s.spec, err)
		if strings.HasPrefix(err.Error(), "--base-url") {
			a.modelErr = err // the model is fine; the endpoint is not
		}
		a.log.Error("the model is not usable; prompts will be answered with this error", "err", a.modelErr)
		return
	}
	a.model = m
}

// requireSignIn is nil when a session can open; else the -32000 that makes
// the client offer its sign-in. Before it refuses, it reads the stored
// sign-in again. It runs at arrival, where no session is open while a
// sign-in is missing, so no turn reads the model it makes.
func (a *agent) requireSignIn() error {
	if a.signInNeeded == "" {
		return nil
	}
	if s := a.loadSignIn(); s.missing == "" {
		shown, _ := model.ShownEndpoint(s.baseURL)
		a.log.Info("signed in", "endpoint", shown, "stored", s.stored)
		a.useSignIn(s)
		return nil
	}
	return acp.Errorf(acp.CodeAuthRequired, "%s", a.signInNeeded)
}

// signedIn admits an opening (new, load, resume) only once the sign-in is
// there; its params are checked first.
func signedIn[P any](a *agent, admit func(string, *P) admission) func(string, *P) admission {
	return func(id string, p *P) admission {
		if err := a.requireSignIn(); err != nil {
			return refuse(err)
		}
		return admit(id, p)
	}
}

// admitAuthenticate is authenticate with the agent method: {} when
// acpbridge has what its model needs (a key, or an endpoint or model that
// needs none), else -32000 saying how to sign in. The terminal method is
// the client's to run, never passed here.
func (a *agent) admitAuthenticate(_ string, p *acp.AuthenticateParams) admission {
	switch p.MethodID {
	case acp.AuthMethodKey:
	case acp.AuthMethodSetup:
		return refuse(acp.InvalidParams("methodId", "%q is a terminal sign-in: the client runs `acpbridge setup` in a terminal and does not pass it to authenticate", p.MethodID))
	default:
		return refuse(acp.InvalidParams("methodId", "%q is not one of acpbridge's sign-in methods (%s, %s)", p.MethodID, acp.AuthMethodKey, acp.AuthMethodSetup))
	}
	if a.signInNeeded == "" {
		return answerNow(struct{}{})
	}
	if s := a.loadSignIn(); s.missing != "" {
		return refuse(acp.Errorf(acp.CodeAuthRequired, "%s", s.missing))
	}
	return answerNow(struct{}{})
}

// admitLogout removes the stored key; a key from the stored sign-in this
// process holds is dropped too, so that the model is sent none from now
// on. A key in the environment is the environment's: the editor's
// settings set it.
func (a *agent) admitLogout(_ string, _ *struct{}) admission {
	had, err := signin.ForgetKey(a.signinPath)
	if err != nil {
		return refuse(acp.Errorf(acp.CodeInternal, "cannot sign out: %v", err))
	}
	if a.keys.signOut() || had {
		a.log.Info("signed out: the stored key is removed", "file", a.signinPath)
	}
	if s := a.loadSignIn(); s.missing != "" {
		a.signInNeeded = s.missing // the next session asks the client to sign in
	}
	if a.envKey != "" {
		a.log.Warn("signed out of the stored key; " + proc.KeyVar + " in the agent's environment still applies (remove it from the editor's settings)")
	}
	return answerNow(struct{}{})
}
