package pgerr

import (
	"errors"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Describe returns err's text for logs and the dead-letter table, with each PostgreSQL
// error (*pgconn.PgError) in it written in one of two ways:
//
//   - redact false: as pgx writes it ("ERROR: message (SQLSTATE code)"), followed by
//     PostgreSQL's DETAIL, which often quotes the record ("Key (id)=(42) already exists.",
//     "Failing row contains (...)");
//   - redact true: without record data: the SQLSTATE, the message with each quoted value and
//     byte sequence replaced by "…" (the names of the schema, table, column, data type and
//     constraint PostgreSQL reports stay), those names, and no DETAIL, HINT or context.
//
// The rest of err's text (eosink's and the plugins' wording, the record's topic, partition
// and offset) is left as it is.
func Describe(err error, redact bool) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	for _, pe := range pgErrors(err) {
		orig := pe.Error()
		var repl string
		if redact {
			repl = redacted(pe)
		} else {
			repl = orig
			if d := strings.TrimSpace(pe.Detail); d != "" {
				repl += " DETAIL: " + d
			}
		}
		msg = strings.Replace(msg, orig, repl, 1)
	}
	return msg
}

// pgErrors returns the distinct PostgreSQL errors in err's tree, in the order errors.As
// visits them.
func pgErrors(err error) []*pgconn.PgError {
	var out []*pgconn.PgError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if pe, ok := e.(*pgconn.PgError); ok {
			for _, seen := range out {
				if seen == pe {
					return
				}
			}
			out = append(out, pe)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	if len(out) == 0 { // a wrapper that only answers errors.As
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			out = append(out, pe)
		}
	}
	return out
}

// byteSeq matches the bytes PostgreSQL quotes unquoted in encoding errors
// ("invalid byte sequence for encoding "UTF8": 0xe2 0x28").
var byteSeq = regexp.MustCompile(`0x[0-9a-fA-F]{2}(?: 0x[0-9a-fA-F]{2})*`)

// Redacted is the text redact true gives a PostgreSQL error (see Describe).
const Redacted = "…"

// redacted writes pe without record data.
func redacted(pe *pgconn.PgError) string {
	names := []struct{ label, v string }{
		{"schema", pe.SchemaName}, {"table", pe.TableName}, {"column", pe.ColumnName},
		{"type", pe.DataTypeName}, {"constraint", pe.ConstraintName},
	}
	var b strings.Builder
	b.WriteString(pe.Severity + ": " + redactMessage(pe.Message, names) + " (SQLSTATE " + pe.Code)
	for _, n := range names {
		if n.v != "" {
			b.WriteString("; " + n.label + " " + n.v)
		}
	}
	b.WriteString("; values redacted)")
	return b.String()
}

// redactMessage replaces what PostgreSQL's message quotes that is none of the reported names
// by Redacted: from the first such quote to the last quote of the message (a value may hold
// quotes itself, so nothing between is trusted), and byte sequences.
func redactMessage(msg string, names []struct{ label, v string }) string {
	var b strings.Builder
	rest := msg
	for {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		if n := quotedName(rest, names); n > 0 {
			b.WriteString(rest[:n])
			rest = rest[n:]
			continue
		}
		last := strings.LastIndexByte(rest, '"')
		if last == 0 { // an unpaired quote: the rest may be a value
			b.WriteString(`"` + Redacted)
			break
		}
		b.WriteString(`"` + Redacted + `"`)
		rest = rest[last+1:]
	}
	return byteSeq.ReplaceAllString(b.String(), "0x"+Redacted)
}

// quotedName returns the length of the quoted reported name s starts with, followed by the
// end of the message or a space, comma, colon or closing parenthesis; 0 when none.
func quotedName(s string, names []struct{ label, v string }) int {
	for _, n := range names {
		if n.v == "" {
			continue
		}
		q := `"` + n.v + `"`
		if !strings.HasPrefix(s, q) {
			continue
		}
		if len(s) == len(q) || strings.ContainsRune(" ,:)", rune(s[len(q)])) {
			return len(q)
		}
	}
	return 0
}
