package txn

import (
	"errors"
	"fmt"
)

// ErrMalformed matches every *DecodeError: a marker or a change event's transaction block
// that is not what Debezium writes (a wrong type, a missing field, a count out of range).
var ErrMalformed = errors.New("txn: malformed transaction metadata")

// ErrNoMetadata is a streamed change event without a transaction block: the connector does
// not provide transaction metadata.
var ErrNoMetadata = errors.New("txn: change event without transaction metadata: " +
	"set provide.transaction.metadata=true on the Debezium connector")

// ErrInconsistent matches every *ConflictError: metadata that contradicts what was read
// before for the same transaction.
var ErrInconsistent = errors.New("txn: inconsistent transaction metadata")

// ErrTooLarge matches a *LimitError whose transaction alone passes the memory bound.
var ErrTooLarge = errors.New("txn: transaction too large to hold")

// ErrFull matches a *LimitError where the transactions held together pass the bound,
// none of them alone.
var ErrFull = errors.New("txn: assembler full")

// ErrOrder is a record at or below an offset already read on its partition.
var ErrOrder = errors.New("txn: record out of offset order")

// DecodeError names the field of the metadata that is wrong and why.
type DecodeError struct {
	Field  string // the field's path: "status", "data_collections[2].event_count", "transaction.id"
	Reason string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("txn: malformed transaction metadata: %s: %s", e.Field, e.Reason)
}

func (e *DecodeError) Is(target error) bool { return target == ErrMalformed }

func malformed(field, format string, args ...any) error {
	return &DecodeError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ConflictError is metadata of transaction XID that contradicts what the assembler holds:
// a re-sent marker with other counts, a change whose order is out of its END's range, two
// changes with one order.
type ConflictError struct {
	XID    uint64
	Reason string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("txn: inconsistent transaction metadata for transaction %d: %s", e.XID, e.Reason)
}

func (e *ConflictError) Is(target error) bool { return target == ErrInconsistent }

func conflict(xid uint64, format string, args ...any) error {
	return &ConflictError{XID: xid, Reason: fmt.Sprintf(format, args...)}
}

// LimitError says a record was not taken because holding it would pass the assembler's
// bound. Alone is true when transaction XID alone passes it (ErrTooLarge: it must be
// streamed, not held); else the transactions held together do (ErrFull: emit first).
// Events and Bytes are what XID would hold with the record, or its END's event_count.
type LimitError struct {
	XID           uint64
	Events, Bytes int64
	MaxEvents     int
	MaxBytes      int64
	Alone         bool
}

func (e *LimitError) Error() string {
	what := "the transactions held together pass"
	if e.Alone {
		what = "it alone passes"
	}
	return fmt.Sprintf("txn: transaction %d (%d events, %d bytes): %s the bound of %d events, %d bytes",
		e.XID, e.Events, e.Bytes, what, e.MaxEvents, e.MaxBytes)
}

func (e *LimitError) Is(target error) bool {
	return (e.Alone && target == ErrTooLarge) || (!e.Alone && target == ErrFull)
}
