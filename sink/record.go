package sink

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Header is a Kafka record header.
type Header struct {
	Key   string // not necessarily UTF-8; dead letters keep it byte for byte
	Value []byte // nil when the header has no value
}

// Record is one Kafka record. Its byte slices belong to the batch: copy them to keep them
// after the handler returns. So does the batch's Records slice, which the framework reuses
// for later batches once a batch has committed: copy the records themselves (not the slice)
// to keep them.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64     // the record's offset in its partition
	Key       []byte    // nil for a record without a key
	Value     []byte    // nil for a tombstone (a record with a null value)
	Headers   []Header  // in the order Kafka gives them; nil when there are none
	Timestamp time.Time // Kafka's timestamp (create or log-append time, by the topic); zero when it has none
}

// Batch is a run of consecutive records of one partition, in offset order. Offsets may have
// gaps (transaction markers, compaction).
type Batch struct {
	Topic     string
	Partition int32
	Records   []Record // never empty from the sink: at most MaxBatchRecords, and MaxBatchBytes unless one record is larger
}

// Handler applies a batch inside the framework's transaction. It must do all its writes
// through tx; the framework has already moved the stored offset in the same transaction and
// commits both together after Handler returns nil. To roll back, return an error: a
// transient PostgreSQL error (connection loss, serialization failure, deadlock) makes the
// framework retry the batch; a poison error (see IsPoison) is handled by Config.OnPoison;
// any other error stops the partition with a *HandlerError.
//
// Handler may be called concurrently for different partitions, never for the same one.
// A batch may be delivered again after a failed or unknown commit, but only one delivery of
// it ever commits. Effects outside the database (HTTP calls, e-mails) are not covered.
type Handler func(ctx context.Context, tx pgx.Tx, batch Batch) error

// ownedTx is the pgx.Tx given to handlers: it refuses Commit and Rollback. Begin, which
// makes a savepoint, works as usual.
type ownedTx struct{ pgx.Tx }

func (ownedTx) Commit(context.Context) error   { return ErrTxOwned }
func (ownedTx) Rollback(context.Context) error { return ErrTxOwned }
