package pgerr

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestDescribe(t *testing.T) {
	unique := &pgconn.PgError{Severity: "ERROR", Code: "23505", Message: `duplicate key value violates unique constraint "t_pkey"`,
		Detail: "Key (id)=(42) already exists.", SchemaName: "public", TableName: "t", ConstraintName: "t_pkey"}
	check := &pgconn.PgError{Severity: "ERROR", Code: "23514", Message: `new row for relation "t" violates check constraint "t_qty_check"`,
		Detail: "Failing row contains (7, secret-qty).", SchemaName: "public", TableName: "t", ConstraintName: "t_qty_check"}
	syntax := &pgconn.PgError{Severity: "ERROR", Code: "22P02", Message: `invalid input syntax for type integer: "4"2 "t" zq"`,
		Where: `COPY t, line 1, column qty: "4"2 "t" zq"`}
	encoding := &pgconn.PgError{Severity: "ERROR", Code: "22021", Message: `invalid byte sequence for encoding "UTF8": 0xe2 0x28 0xa1`}
	unpaired := &pgconn.PgError{Severity: "ERROR", Code: "22P02", Message: `invalid input syntax for type json: "abc`}
	for _, tc := range []struct {
		name              string
		err               error
		off, on, notOnOff []string
		notOn             []string
	}{
		{"unique", fmt.Errorf("eosink: poison record t[0]@5: %w", unique),
			[]string{"Key (id)=(42) already exists.", "poison record t[0]@5", "(SQLSTATE 23505)"},
			[]string{"poison record t[0]@5", `violates unique constraint "t_pkey"`, "SQLSTATE 23505", "table t", "constraint t_pkey", "values redacted"},
			nil, []string{"42", "DETAIL"}},
		{"check", fmt.Errorf("column qty: %w", check),
			[]string{"Failing row contains (7, secret-qty)."},
			[]string{`new row for relation "t" violates check constraint "t_qty_check"`, "SQLSTATE 23514", "column qty: "},
			nil, []string{"secret-qty", "Failing row"}},
		{"syntax", syntax, []string{`"4"2 "t" zq"`}, []string{`invalid input syntax for type integer: "…"`, "SQLSTATE 22P02"},
			[]string{"COPY t, line"}, []string{"4", "zq"}},
		{"encoding", errors.Join(errors.New("write"), encoding), []string{"0xe2 0x28 0xa1"},
			[]string{`invalid byte sequence for encoding "…": 0x…`}, nil, []string{"0xe2", "0xa1"}},
		{"unpaired", unpaired, []string{`"abc`}, []string{`type json: "…`}, nil, []string{"abc"}},
		{"not postgres", errors.New(`decode: "secret"`), []string{`decode: "secret"`}, []string{`decode: "secret"`}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off, on := Describe(tc.err, false), Describe(tc.err, true)
			for _, want := range tc.off {
				if !strings.Contains(off, want) {
					t.Errorf("redact off: %q lacks %q", off, want)
				}
			}
			for _, want := range tc.on {
				if !strings.Contains(on, want) {
					t.Errorf("redact on: %q lacks %q", on, want)
				}
			}
			for _, not := range tc.notOnOff {
				if strings.Contains(off, not) || strings.Contains(on, not) {
					t.Errorf("%q or %q holds %q", off, on, not)
				}
			}
			for _, not := range tc.notOn {
				if strings.Contains(strings.ReplaceAll(on, "SQLSTATE "+codeOf(tc.err), ""), not) {
					t.Errorf("redact on: %q holds %q", on, not)
				}
			}
		})
	}
	if Describe(nil, true) != "" {
		t.Error("Describe(nil) is not empty")
	}
}

func codeOf(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
