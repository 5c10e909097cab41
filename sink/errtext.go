package sink

import (
	"context"
	"log/slog"

	"github.com/eosink/eosink/internal/pgerr"
)

// ErrorText returns err's text as the sink writes it to dead_letters.error, stopped_error,
// its logs and its spans (see Config.RedactErrorValues): with redact false, each PostgreSQL
// error with its DETAIL; with redact true, without the record data PostgreSQL quotes (the
// SQLSTATE, the message with its values replaced by "…", and the schema, table, column,
// type and constraint names). The rest of the text, the record's topic, partition and offset
// among it, is err.Error()'s.
//
// The errors Run and PartitionErrors return are the errors themselves, record data
// included: a program that logs or shows them under Config.RedactErrorValues formats them
// with ErrorText(err, true), as the sink does.
func ErrorText(err error, redact bool) string {
	return pgerr.Describe(err, redact)
}

// errorTextHandler writes every error value of a log record (an attribute whose value is an
// error) as ErrorText does, so that no log line of the sink carries more of a record than
// Config.RedactErrorValues allows.
type errorTextHandler struct {
	slog.Handler
	redact bool
}

func (h errorTextHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h errorTextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	mapped := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		mapped[i] = h.attr(a)
	}
	return errorTextHandler{h.Handler.WithAttrs(mapped), h.redact}
}

func (h errorTextHandler) WithGroup(name string) slog.Handler {
	return errorTextHandler{h.Handler.WithGroup(name), h.redact}
}

func (h errorTextHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindAny:
		if err, ok := v.Any().(error); ok && err != nil {
			return slog.String(a.Key, ErrorText(err, h.redact))
		}
	case slog.KindGroup:
		g := v.Group()
		mapped := make([]slog.Attr, len(g))
		for i, x := range g {
			mapped[i] = h.attr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(mapped...)}
	}
	return a
}

// errorLogger returns l writing error values as ErrorText does.
func errorLogger(l *slog.Logger, redact bool) *slog.Logger {
	return slog.New(errorTextHandler{l.Handler(), redact})
}
