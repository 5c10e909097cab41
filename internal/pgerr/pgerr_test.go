package pgerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Class
	}{
		{&pgconn.PgError{Code: "40001"}, Transient},
		{&pgconn.PgError{Code: "40P01"}, Transient},
		{&pgconn.PgError{Code: "57P01"}, Transient},
		{&pgconn.PgError{Code: "08006"}, Transient},
		{&pgconn.PgError{Code: "53300"}, Transient},
		{&pgconn.PgError{Code: "55P03"}, Transient},
		{&pgconn.PgError{Code: "23505"}, Data},
		{&pgconn.PgError{Code: "22P02"}, Data},
		{&pgconn.PgError{Code: "42P01"}, Fatal},
		{fmt.Errorf("write: %w", io.ErrUnexpectedEOF), Transient},
		{context.Canceled, Fatal},
		{errors.New("handler said no"), Fatal},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestIsConnectionError(t *testing.T) {
	if !IsConnectionError(fmt.Errorf("commit: %w", io.EOF)) {
		t.Error("io.EOF should be a connection error")
	}
	if IsConnectionError(&pgconn.PgError{Code: "23505"}) {
		t.Error("unique violation is not a connection error")
	}
	if IsConnectionError(nil) {
		t.Error("nil is not a connection error")
	}
}
