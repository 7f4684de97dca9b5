// Package events gives tests (and anyone watching a run) a window on what
// acpbridge does that the protocol does not show: a thread's process
// evicted or ended, a child's line dropped, a command started. A log record
// that carries an event name (Of) is also written, as one JSON line, to
// the file or FIFO that ACPBRIDGE_EVENTS names, by every acpbridge process
// that inherits the variable (a router's children too), whatever the log
// level. Event names are stable; a log message's wording is not.
package events

import (
	"context"
	"io"
	"log/slog"
	"os"
)

// Var names the file events are written to ("": none).
const Var = "ACPBRIDGE_EVENTS"

// key is the attribute that names an event.
const key = "event"

// Of is the attribute that makes a log record the event name.
func Of(name Name) slog.Attr { return slog.String(key, string(name)) }

// Open wraps h so that events also go to the file that ACPBRIDGE_EVENTS
// names, opened for appending; h itself when it names none or cannot be
// opened (said on h).
func Open(h slog.Handler) slog.Handler {
	path := os.Getenv(Var)
	if path == "" {
		return h
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		slog.New(h).Warn("cannot write events", "var", Var, "err", err)
		return h
	}
	return Wrap(h, f)
}

// Wrap is h that also writes every record carrying an event to w: its
// event, this process's pid and its attributes, as a JSON line (one write).
func Wrap(h slog.Handler, w io.Writer) slog.Handler {
	ev := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
			return slog.Attr{}
		}
		return a
	}}).WithAttrs([]slog.Attr{slog.Int("pid", os.Getpid())})
	return &handler{log: h, events: ev}
}

type handler struct {
	log, events slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return true // a debug event is written even when the log shows only info
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	isEvent := false
	r.Attrs(func(a slog.Attr) bool {
		isEvent = a.Key == key
		return !isEvent
	})
	if isEvent {
		h.events.Handle(ctx, r)
	}
	if h.log.Enabled(ctx, r.Level) {
		return h.log.Handle(ctx, r)
	}
	return nil
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &handler{log: h.log.WithAttrs(as), events: h.events.WithAttrs(as)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{log: h.log.WithGroup(name), events: h.events.WithGroup(name)}
}
