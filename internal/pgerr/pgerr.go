// Package pgerr classifies PostgreSQL and connection errors for the commit loop.
package pgerr

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Class says what the engine does with an error.
type Class int

const (
	// Fatal errors are neither retried nor poison: the partition stops.
	Fatal Class = iota
	// Transient errors are retried with backoff; the offset does not advance.
	Transient
	// Data errors come from the records themselves (SQLSTATE 22*, 23*, and 54000, for
	// example an index row too large): poison.
	Data
)

func (c Class) String() string {
	switch c {
	case Transient:
		return "transient"
	case Data:
		return "data"
	default:
		return "fatal"
	}
}

// Classify returns the class of err. Context cancellation is Fatal: the caller decides
// whether it is shutting down.
func Classify(err error) Class {
	if err == nil {
		return Fatal
	}
	if errors.Is(err, context.Canceled) {
		return Fatal
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return classifyCode(pgErr.Code)
	}
	if IsConnectionError(err) {
		return Transient
	}
	return Fatal
}

func classifyCode(code string) Class {
	switch {
	case strings.HasPrefix(code, "08"), // connection exception
		code == "40001",                // serialization_failure
		code == "40P01",                // deadlock_detected
		code == "55P03",                // lock_not_available (lock_timeout)
		code == "25P03",                // idle_in_transaction_session_timeout
		strings.HasPrefix(code, "57P"), // operator intervention: admin shutdown, crash shutdown, cannot connect now
		code == "57014",                // query_canceled (statement_timeout)
		strings.HasPrefix(code, "53"):  // insufficient resources
		return Transient
	case strings.HasPrefix(code, "22"), strings.HasPrefix(code, "23"), code == "54000":
		return Data
	}
	return Fatal
}

// IsConnectionError reports whether err means the connection to the server failed, so that
// the outcome of a statement in flight (COMMIT in particular) is unknown.
func IsConnectionError(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P")
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	switch {
	case errors.As(err, &connectErr),
		errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE),
		pgconn.Timeout(err):
		return true
	}
	// pgx reports a dead connection in several wrapped shapes; these are its words.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "unexpected EOF") ||
		strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "failed to connect")
}
