package mapping

import (
	"errors"
	"strconv"
)

// Errors wrapped by *FieldError, to match with errors.Is.
var (
	// ErrInvalidJSON: a side read with the json format is not valid JSON (or not UTF-8).
	ErrInvalidJSON = errors.New("not valid JSON")
	// ErrMissing: a required column's value is nil.
	ErrMissing = errors.New("required value is missing")
	// ErrInvalidText: a text value is not valid UTF-8 or holds a NUL byte, which PostgreSQL
	// text cannot store.
	ErrInvalidText = errors.New("text PostgreSQL cannot store")
	// ErrTimestampRange: the record's timestamp is outside the years 1 to 9999.
	ErrTimestampRange = errors.New("timestamp out of range")
)

// FieldError is the error of Row and Extract: the record cannot give the value of one
// column. It names the column (empty from Extract) and the source expression, never the
// record's content. The record is poison: wrap it with sink.Poison.
type FieldError struct {
	Column string // column name; "" when the error comes from Extract
	Source string // source expression
	Err    error  // wraps ErrInvalidJSON, ErrMissing, ErrInvalidText or ErrTimestampRange
}

// Error returns "mapping: column \"<name>\" (<source>): <reason>".
func (e *FieldError) Error() string {
	if e.Column == "" {
		return "mapping: " + e.Source + ": " + e.Err.Error()
	}
	return "mapping: column " + strconv.Quote(e.Column) + " (" + e.Source + "): " + e.Err.Error()
}

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// detailError is a sentinel error with a detail that says which case it is.
type detailError struct {
	kind   error
	detail string
}

func (e *detailError) Error() string { return e.kind.Error() + ": " + e.detail }
func (e *detailError) Unwrap() error { return e.kind }
