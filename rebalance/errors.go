package rebalance

import (
	"errors"
	"fmt"

	"github.com/eosink/eosink/internal/offsets"
)

// Sentinel errors. Match them with errors.Is; the typed errors below carry the details.
var (
	// ErrFenced means a commit presented an epoch or a start offset that no longer matches
	// the stored row: another claim owns the partition now. Nothing was written.
	ErrFenced = offsets.ErrFenced

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

	// ErrClaimTaken means a conditional claim (the offsets store's ClaimAt or ClaimIf) found
	// the row's epoch moved since it was read: another instance or an operator came first.
	ErrClaimTaken = offsets.ErrClaimTaken
)

// FencedError is returned by the offsets store's Advance when the conditional offset update
// matched no row. It wraps ErrFenced. Its fields: Pipeline, Topic, Partition, Epoch (the epoch
// this instance claimed) and Start (the next offset this instance expected to find).
type FencedError = offsets.FencedError

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
