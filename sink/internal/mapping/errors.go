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
// column. It names the column and the source expression; it has no column when the key
// or value as a whole is not JSON (Source is then "key" or "value"), or from Extract. It
// never shows the record's content, except that a *CastError quotes the start of the value
// it could not cast, as PostgreSQL's own errors do. The record is poison: wrap it with sink.Poison.
type FieldError struct {
	Column string // column name; "" when the error comes from Extract
	Source string // source expression
	Err    error  // wraps ErrInvalidJSON, ErrMissing, ErrInvalidText, ErrTimestampRange or ErrCast (a *CastError)
}

// Error returns "mapping: column \"<name>\" (<source>): <reason>", or, when the key or
// value as a whole is not JSON, "mapping: value is not JSON: <why>".
func (e *FieldError) Error() string {
	var de *detailError
	if e.Column == "" && (e.Source == "key" || e.Source == "value") && errors.As(e.Err, &de) && de.kind == ErrInvalidJSON {
		return "mapping: " + e.Source + " is not JSON: " + de.detail
	}
	if e.Column == "" {
		return "mapping: " + e.Source + ": " + e.Err.Error()
	}
	return "mapping: column " + strconv.Quote(e.Column) + " (" + e.Source + "): " + e.Err.Error()
}

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// sideError returns the error of Row when err says that side ("key" or "value"), which a
// column reads with the json format, is not valid JSON (or not UTF-8): a *FieldError without
// a column, since the record as a whole is bad rather than one column's value; err itself
// when it is a *FieldError already (a side an expression reads). Else nil.
func sideError(side string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) { // an expression's side, already named
		return err
	}
	if (side == "key" || side == "value") && errors.Is(err, ErrInvalidJSON) {
		return &FieldError{Source: side, Err: err}
	}
	return nil
}

// detailError is a sentinel error with a detail that says which case it is.
type detailError struct {
	kind   error
	detail string
}

func (e *detailError) Error() string { return e.kind.Error() + ": " + e.detail }
func (e *detailError) Unwrap() error { return e.kind }
