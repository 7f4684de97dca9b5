// modes.go holds a session's settings (its box: mode, model, always-rules)
// and the methods that change them at arrival: session/set_mode and
// session/set_config_option.

package main

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"

	"acpbridge/internal/acp"
	"acpbridge/internal/store"
)

// box is a session's settings: the running turn reads them at each
// decision, and set_mode and set_config_option change them at arrival.
type box struct {
	mu      sync.Mutex
	mode    acp.Mode        // "" until the session's opening sets it
	model   string          // the model its turns call; "" until set
	rules   map[string]bool // tool name → allow (true) or reject (false) always
	file    *store.File     // where a change is persisted, once the session is open
	unsaved []store.Record  // changes made before it was
}

func newBox(mode acp.Mode, model string) *box {
	return &box{mode: mode, model: model, rules: map[string]bool{}}
}

// settings returns the mode and the model.
func (b *box) settings() (acp.Mode, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mode, b.model
}

// rule returns the mode and the "always" rule for a tool, if there is one.
func (b *box) rule(tool string) (mode acp.Mode, allow, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	allow, ok = b.rules[tool]
	return b.mode, allow, ok
}

// change applies a setting (rec's mode, model or rule) and persists it, now
// or once the session is open; it returns the settings after it.
func (b *box) change(rec store.Record) (acp.Mode, string, error) {
	b.mu.Lock()
	switch {
	case rec.Type == store.RecRule:
		b.rules[rec.Tool] = *rec.Allow
	case rec.Mode != "":
		b.mode = acp.Mode(rec.Mode)
	default:
		b.model = rec.Model
	}
	mode, model, f := b.mode, b.model, b.file
	if f == nil {
		b.unsaved = append(b.unsaved, rec)
	}
	b.mu.Unlock()
	if f == nil {
		return mode, model, nil
	}
	if rec.Type == store.RecRule {
		return mode, model, f.Append(rec)
	}
	return mode, model, f.AppendNow(rec)
}

// attach gives the box the open session's file and writes what changed
// before it was open.
func (b *box) attach(f *store.File) error {
	b.mu.Lock()
	b.file = f
	unsaved := b.unsaved
	b.unsaved = nil
	b.mu.Unlock()
	var err error
	for _, rec := range unsaved {
		err = errors.Join(err, f.Append(rec))
	}
	return err
}

var sessionModes = []acp.SessionMode{
	{ID: acp.ModeAsk, Name: "Ask", Description: "Ask before every edit, command and MCP tool that changes things"},
	{ID: acp.ModeAcceptEdits, Name: "Accept edits", Description: "Edit files without asking; ask before commands and MCP tools"},
	{ID: acp.ModeReadOnly, Name: "Read only", Description: "Refuse edits, commands and MCP tools that change things"},
	{ID: acp.ModeBypass, Name: "Bypass", Description: "Never ask"},
}

func modeStateOf(mode acp.Mode) *acp.ModeState {
	return &acp.ModeState{CurrentModeID: mode, AvailableModes: sessionModes}
}

// defaultModel is the model a new session starts on: --model's.
func (a *agent) defaultModel() string {
	if a.model == nil {
		return ""
	}
	return a.model.DefaultName()
}

// configOptions lists the session's config options with current values.
// The model list may be asked of the server.
func (a *agent) configOptions(mode acp.Mode, model string) []acp.ConfigOption {
	modes := make([]acp.SelectOption, len(sessionModes))
	for i, m := range sessionModes {
		modes[i] = acp.SelectOption{Value: string(m.ID), Name: m.Name, Description: m.Description}
	}
	opts := []acp.ConfigOption{{
		ID: "mode", Name: "Mode", Category: "mode", Type: "select",
		Description: "When acpbridge asks before using a tool", CurrentValue: string(mode), Options: modes,
	}}
	if a.model != nil {
		var models []acp.SelectOption
		for _, m := range a.model.Models() {
			models = append(models, acp.SelectOption{Value: m, Name: m})
		}
		opts = append(opts, acp.ConfigOption{
			ID: "model", Name: "Model", Category: "model", Type: "select",
			CurrentValue: model, Options: models,
		})
	}
	return opts
}

// setting is one change of a session's settings: a mode or a model.
type setting struct {
	field string // the params member that gave it, for errors
	mode  acp.Mode
	model string
}

func (a *agent) admitSetMode(id string, p *acp.SetModeParams) admission {
	mode, err := required("modeId", p.ModeID)
	if err != nil {
		return refuse(err)
	}
	if _, err := a.change(id, setting{field: "modeId", mode: acp.Mode(mode)}); err != nil {
		return refuse(err)
	}
	return answerNow(struct{}{})
}

func (a *agent) admitSetConfig(id string, p *acp.SetConfigParams) admission {
	cid, err := required("configId", p.ConfigID)
	if err != nil {
		return refuse(err)
	}
	var value string
	if err := json.Unmarshal(p.Value, &value); err != nil {
		return refuse(acp.InvalidParams("value", "required: a string value id"))
	}
	var set setting
	switch cid {
	case "mode":
		set = setting{field: "value", mode: acp.Mode(value)}
	case "model":
		set = setting{field: "value", model: value}
	default:
		return refuse(acp.InvalidParams("configId", "unknown config option %q; the options are mode and model", cid))
	}
	opts, err := a.change(id, set)
	if err != nil {
		return refuse(err)
	}
	return answerNow(acp.ConfigOptionsResult{ConfigOptions: opts})
}

// change sets the session's mode or model at arrival, so that the running
// turn's next decision and a prompt behind it use it; it is announced and
// persisted (once the session is open, if it is still opening). It
// returns the config options after the change.
func (a *agent) change(id string, set setting) ([]acp.ConfigOption, error) {
	a.mu.Lock()
	b, err := a.requireLocked(id)
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	rec := store.Record{Type: store.RecConfig}
	if set.mode != "" {
		if !slices.ContainsFunc(sessionModes, func(m acp.SessionMode) bool { return m.ID == set.mode }) {
			return nil, acp.InvalidParams(set.field, "unknown mode %q; the modes are ask, accept_edits, read_only and bypass", set.mode)
		}
		rec.Mode = string(set.mode)
	} else {
		var names []string
		if a.model != nil {
			names = a.model.Models()
		}
		if !slices.Contains(names, set.model) {
			return nil, acp.InvalidParams(set.field, "unknown model %q; the models are %s", set.model, strings.Join(names, ", "))
		}
		rec.Model = set.model
	}
	mode, model, err := b.change(rec)
	opts := a.configOptions(mode, model)
	var sent error
	if set.mode != "" {
		sent = a.out.NotifyJSON(id, acp.CurrentMode(mode))
	}
	sent = errors.Join(sent, a.out.NotifyJSON(id, acp.ConfigOptionsChanged(opts)))
	if sent != nil {
		// The setting holds: the answer says so. A notification fails only
		// when the client stopped reading, and then no answer reaches it.
		a.log.Warn("the client was not told of the changed setting", "session", id, "err", sent)
	}
	return opts, err // the setting holds in this process; the log failed
}
