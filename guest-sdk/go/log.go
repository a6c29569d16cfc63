package kubewasm

import (
	"context"
	"fmt"
	"log/slog"
)

// Level is a log record's severity, as the contract names them.
type Level string

// The levels.
const (
	LevelTrace Level = "trace"
	LevelDebug Level = "debug"
	LevelInfo  Level = "info"
	LevelWarn  Level = "warn"
	LevelError Level = "error"
)

// handler is the slog.Handler of Context.Logger: each record to the host,
// its attributes as fields (groups joined with dots).
type handler struct {
	host   backend
	attrs  [][2]string
	prefix string
}

func (h handler) Enabled(context.Context, slog.Level) bool { return true }

func (h handler) Handle(_ context.Context, r slog.Record) error {
	fields := append([][2]string(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		fields = appendAttr(fields, h.prefix, a)
		return true
	})
	h.host.log(levelOf(r.Level), r.Message, fields)
	return nil
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	next := h
	next.attrs = append([][2]string(nil), h.attrs...)
	for _, a := range attrs {
		next.attrs = appendAttr(next.attrs, h.prefix, a)
	}
	return next
}

func (h handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	next := h
	next.prefix = h.prefix + name + "."
	return next
}

func appendAttr(fields [][2]string, prefix string, a slog.Attr) [][2]string {
	a.Value = a.Value.Resolve()
	if a.Value.Kind() == slog.KindGroup {
		for _, inner := range a.Value.Group() {
			fields = appendAttr(fields, prefix+a.Key+".", inner)
		}
		return fields
	}
	return append(fields, [2]string{prefix + a.Key, fmt.Sprint(a.Value.Any())})
}

func levelOf(l slog.Level) Level {
	switch {
	case l < slog.LevelDebug:
		return LevelTrace
	case l < slog.LevelInfo:
		return LevelDebug
	case l < slog.LevelWarn:
		return LevelInfo
	case l < slog.LevelError:
		return LevelWarn
	default:
		return LevelError
	}
}
