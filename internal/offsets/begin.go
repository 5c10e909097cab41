package offsets

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Batcher sends a batch of statements in one round trip: a *pgxpool.Pool or a *pgx.Conn.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// LeaseCheck names a set's lease (CheckLease) for Begin to check.
type LeaseCheck struct {
	Name  string
	Epoch int64
}

// Begin begins a transaction on db with opts and, in the same round trip, runs the lease
// check (when lease is not nil; CheckLease's statement) and Advance's conditional updates of
// ranges, in (topic, partition) order: one pipelined batch (pgx.Batch.BeginTx) instead of
// BEGIN, then each statement after the answer to the one before. The statements, their
// conditions and their order are Advance's and CheckLease's, and so are the errors: a row
// that does not match is a *FencedError, a lease not held ErrLeaseLost. On any error the
// transaction is rolled back (the statements after a failed one are not run; those after a
// row that did not match are, and are rolled back with it) and Begin returns a nil Tx.
// Otherwise the caller owns the transaction, with the rows locked, as after BeginTx and
// Advance.
func (s *Store) Begin(ctx context.Context, db Batcher, opts pgx.TxOptions, lease *LeaseCheck, ranges ...Range) (pgx.Tx, error) {
	ranges, err := sortRanges(ranges)
	if err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	b.BeginTx(opts)
	if lease != nil {
		b.Queue(s.checkLeaseSQL(), s.pipeline, lease.Name, lease.Epoch, s.owner)
	}
	for _, r := range ranges {
		b.Queue(s.advanceSQL(), r.args(s.pipeline)...)
	}
	br := db.SendBatch(ctx, b)
	tx := br.Tx()
	err = func() error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		var first error // the first row or lease that did not match; the rest still run
		if lease != nil {
			tag, err := br.Exec()
			if err != nil {
				return leaseChecked(lease.Name, tag, err)
			}
			first = leaseChecked(lease.Name, tag, nil)
		}
		for _, r := range ranges {
			tag, err := br.Exec()
			if err != nil {
				return s.advanced(r, tag, err)
			}
			if err := s.advanced(r, tag, nil); err != nil && first == nil {
				first = err
			}
		}
		return first
	}()
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("begin: %w", cerr)
	}
	if err != nil {
		if tx != nil {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = tx.Rollback(rctx) // also releases a pool's connection
			cancel()
		}
		return nil, err
	}
	return tx, nil
}
