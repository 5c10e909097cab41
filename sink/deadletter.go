package sink

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eosink/eosink/internal/pgerr"
)

// Poisoned is one record that could not be applied, as written to the dead_letters table.
type Poisoned struct {
	Record Record
	Err    error
}

// insertDeadLetters writes dead letters. A record dead-lettered again (after an operator
// replays its range) updates its row: the latest error and one more failure, and the row is
// open again if it was resolved (replayed, discarded or applied since); an edit an operator
// stored beside it stays (eosink dlq edit), and so do its id and first failure. Header keys are
// stored as bytes, exactly; the error text as ErrorText writes it (opts.RedactErrorValues),
// with its invalid UTF-8 and NULs escaped (pgerr.SafeText), since text refuses them.
func insertDeadLetters(ctx context.Context, tx pgx.Tx, opts writeOptions, dead []Poisoned) error {
	q := fmt.Sprintf(`INSERT INTO %s AS d (pipeline, topic, partition, "offset", key, value, header_keys, header_values, "timestamp", error)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (pipeline, topic, partition, "offset") DO UPDATE
SET error = EXCLUDED.error, failures = d.failures + 1, last_failed_at = now(),
    resolved_at = NULL, resolved_how = NULL, resolved_by = NULL`, pgx.Identifier{opts.Schema, "dead_letters"}.Sanitize())
	b := &pgx.Batch{}
	for _, d := range dead {
		r := &d.Record
		keys := make([][]byte, len(r.Headers))
		vals := make([][]byte, len(r.Headers))
		for i, h := range r.Headers {
			keys[i], vals[i] = []byte(h.Key), h.Value
		}
		ts := pgtype.Timestamptz{Time: r.Timestamp, Valid: !r.Timestamp.IsZero()}
		b.Queue(q, opts.Pipeline, r.Topic, r.Partition, r.Offset, r.Key, r.Value, keys, vals, ts,
			pgerr.SafeText(ErrorText(d.Err, opts.RedactErrorValues)))
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write dead letters: %w", err)
	}
	return nil
}
