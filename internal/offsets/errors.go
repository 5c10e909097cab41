package offsets

import (
	"errors"
	"fmt"
)

// Sentinel errors of the fence, re-exported by package rebalance (and sink). Match them with
// errors.Is.
var (
	// ErrFenced means a commit presented an epoch or a start offset that no longer matches
	// the stored row: another claim owns the partition now. Nothing was written.
	ErrFenced = errors.New("eosink: fenced: the partition is owned by a newer claim")

	// ErrClaimTaken means a conditional claim (Store.ClaimAt, Store.ClaimIf) found the row's
	// epoch moved since it was read: another instance or an operator came first.
	ErrClaimTaken = errors.New("eosink: the partition was claimed or moved by someone else first")
)

// FencedError is returned by Store.Advance when the conditional offset update matched no row.
// It wraps ErrFenced.
type FencedError struct {
	Pipeline  string
	Topic     string
	Partition int32
	Epoch     int64 // the epoch this instance claimed
	Start     int64 // the next offset this instance expected to find
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("eosink: fenced: pipeline %q %s[%d]: stored row no longer has epoch %d and next offset %d",
		e.Pipeline, e.Topic, e.Partition, e.Epoch, e.Start)
}

// Unwrap returns ErrFenced.
func (e *FencedError) Unwrap() error { return ErrFenced }
