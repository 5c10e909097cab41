package rebalance

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is; the typed errors below carry the details.
var (
	// ErrFenced means a commit presented an epoch or a start offset that no longer matches
	// the stored row: another claim owns the partition now. Nothing was written.
	ErrFenced = errors.New("eosink: fenced: the partition is owned by a newer claim")

	// ErrOffsetOutOfRange means the stored next offset is outside the partition's log
	// (records deleted by retention, or the log was truncated). The partition is stopped;
	// eosink never jumps to another offset by itself.
	ErrOffsetOutOfRange = errors.New("eosink: stored offset is out of the log's range")

	// ErrTopicRecreated means the topic's id differs from the one stored at the first
	// claim: the topic was deleted and created again. The partition is stopped.
	ErrTopicRecreated = errors.New("eosink: topic was deleted and recreated")

	// ErrNoStoredPosition means the partition has no stored row and the initial position
	// policy is "error".
	ErrNoStoredPosition = errors.New("eosink: no stored position and initial position policy is error")

	// ErrClaimTaken means a conditional claim (Store.ClaimIf) found the row's epoch moved
	// since it was read: another instance or an operator came first.
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

// PartitionError says why one partition was stopped. Err wraps one of the sentinels above
// or the cause from the database or the broker.
type PartitionError struct {
	Topic     string
	Partition int32
	Err       error
}

func (e *PartitionError) Error() string {
	return fmt.Sprintf("%s[%d]: %v", e.Topic, e.Partition, e.Err)
}

func (e *PartitionError) Unwrap() error { return e.Err }
