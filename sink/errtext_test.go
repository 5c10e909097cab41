package sink

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestErrorLoggerWritesErrorText: every error value the sink logs, at the top level, in a
// group or in With's attributes, is written as ErrorText writes it; other values are left
// alone.
func TestErrorLoggerWritesErrorText(t *testing.T) {
	pe := &pgconn.PgError{Severity: "ERROR", Code: "23505", Message: `duplicate key value violates unique constraint "t_pkey"`,
		Detail: "Key (id)=(918273645) already exists.", TableName: "t", ConstraintName: "t_pkey"}
	err := fmt.Errorf("eosink: poison record t[0]@7: %w", pe)
	for _, redact := range []bool{false, true} {
		var buf bytes.Buffer
		log := errorLogger(slog.New(slog.NewJSONHandler(&buf, nil)), redact).With("pipeline", "p", "first", err)
		log.Warn("record dead-lettered", "offset", 7, "err", err, slog.Group("g", "inner", err), "plain", errors.New("no postgres here"))
		out := buf.String()
		if got := strings.Count(out, "918273645"); redact && got != 0 || !redact && got != 3 {
			t.Errorf("redact %t: the value appears %d times:\n%s", redact, got, out)
		}
		if got := strings.Count(out, "SQLSTATE 23505"); got != 3 {
			t.Errorf("redact %t: the SQLSTATE appears %d times, want 3:\n%s", redact, got, out)
		}
		for _, want := range []string{`"pipeline":"p"`, `"offset":7`, `"plain":"no postgres here"`, "poison record t[0]@7"} {
			if !strings.Contains(out, want) {
				t.Errorf("redact %t: %s lacks %s", redact, out, want)
			}
		}
	}
}
