package sink

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sequencer is implemented by a plugin that applies records in an order of its own across
// the partitions of its topics instead of per partition: the cdc plugin with
// consistency: transaction, which applies each source transaction whole, in commit order.
// When Sequenced reports true, the sink does not join a consumer group. It owns every
// partition of its topics and of SequenceOptions.Topics together, under a lease in the
// database (one instance at a time; the others stand by and take over when the holder's
// renewals stop), assigns them by hand at their stored positions, gives every record to
// the plugin's Sequence, and commits the Units the Sequence returns: each commit holds one
// or more Units, their writes, the next offsets they name and the lease's epoch check, in
// one transaction (docs/design.md, "Sets: partitions owned together").
type Sequencer interface {
	Plugin
	// Sequenced returns the set's options, and false when the plugin applies per
	// partition (the sink then runs as usual).
	Sequenced() (SequenceOptions, bool)
	// NewSequence starts a Sequence for one ownership of the set, reading what it needs of
	// its start state (for the cdc plugin, the watermark) from db. A new ownership (after a
	// restart, a takeover, an error) gets a new Sequence, fed from the stored positions.
	NewSequence(ctx context.Context, db DB) (Sequence, error)
}

// SequenceOptions describes a Sequencer's set.
type SequenceOptions struct {
	// Name names the set's lease (the cdc plugin: its transaction topic).
	Name string
	// Topics are read besides Config.Topics (the cdc plugin: the transaction topic).
	Topics []string
	// SinglePartition lists the topics that must have exactly one partition.
	SinglePartition []string
	// LeaseTimeout is how long a holder's lease lasts without a renewal before a standby
	// takes it. Renewals run every third of it.
	LeaseTimeout time.Duration
	// IncompleteAfter is how long the Sequence may wait for the same unit, with every
	// partition of the set read to its end, before the set stops on ErrSetIncomplete; the
	// set's periodic check runs every quarter of it (at most every 15s, at least every
	// 250ms). 0 takes DefaultIncompleteAfter.
	IncompleteAfter time.Duration
}

// ErrSequenceFull is an error of Sequence.Add (wrapped or not) that did not take the record
// because holding it would pass the sequence's memory bound: the sink pauses the record's
// partition and gives the same record again later (after a unit is handed out, when reads
// are idle, or after more records were taken), then resumes the partition.
var ErrSequenceFull = errors.New("eosink: the sequence cannot hold the record yet")

// Sequence orders the records of one ownership of a set. The sink calls it from one
// goroutine.
type Sequence interface {
	// Add takes the next record of one of the set's partitions; each partition's records
	// come in offset order. ErrSequenceFull leaves the record to be given again; an error
	// that IsRetryable makes the sink start the ownership again from the stored positions
	// after a backoff; any other error stops the set.
	Add(ctx context.Context, r *Record) error
	// Next returns the next Unit ready to apply, in the order they must commit.
	Next() (Unit, bool)
	// Apply writes units, in order, inside tx. The sink has already checked the lease and
	// moved the stored offsets to the last Unit's positions in tx, and commits after Apply
	// returns nil. Apply may be called again with the same units after a rollback.
	//
	// When the last of units is Continued, the sink keeps tx open and calls Apply again in
	// it with the units that follow, until the last of a call's units is not continued;
	// then it checks the lease, moves the stored offsets of every unit since the first
	// call and commits. An error in such a transaction rolls it back and starts the
	// ownership again (it is not retried in place).
	Apply(ctx context.Context, tx pgx.Tx, units []Unit) error
	// Waiting says what the Sequence waits for, "" when it waits for nothing.
	Waiting() string
}

// Unit is what a Sequence applies as one piece: never split across commits.
type Unit interface {
	// Positions are the next offsets that committing the unit (and every unit before it)
	// stores: each partition whose position moved since the unit before.
	Positions() []Offset
	// Size is the unit's records and bytes, for the group-commit bounds and the metrics.
	Size() (records, bytes int)
	// Continued reports that the units after it continue it: it is a piece of a unit too
	// large to hold (a source transaction streamed). The sink commits nothing until a unit
	// that is not continued, so the pieces, and every unit handed out between them,
	// commit in one transaction.
	Continued() bool
}

// Offset is a partition's next offset.
type Offset struct {
	Topic     string
	Partition int32
	Next      int64
}
