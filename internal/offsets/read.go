package offsets

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Position is a stored row as read back.
type Position struct {
	NextOffset int64
	Epoch      int64
	Owner      string
}

// Peek returns the stored row of a partition without waiting for locks: the last committed
// state. found is false when there is none.
func (s *Store) Peek(ctx context.Context, topic string, partition int32) (p Position, found bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT next_offset, epoch, coalesce(owner, '') FROM `+s.table+`
		WHERE pipeline = $1 AND topic = $2 AND partition = $3`, s.pipeline, topic, partition).Scan(&p.NextOffset, &p.Epoch, &p.Owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return Position{}, false, nil
	}
	if err != nil {
		return Position{}, false, fmt.Errorf("read offset row %s[%d]: %w", topic, partition, err)
	}
	return p, true, nil
}

// Read returns the stored row of a partition; found is false when there is none.
// It is used to settle a COMMIT whose outcome is unknown, so it reads with FOR SHARE: if the
// transaction that sent that COMMIT still holds the row (its commit is being flushed, or the
// server has not yet noticed the lost connection), Read waits for it to end, at most the
// lock timeout, instead of reading the row as it was before.
func (s *Store) Read(ctx context.Context, topic string, partition int32) (p Position, found bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if s.lockTimeout > 0 {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", s.lockTimeout.Milliseconds())); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, `SELECT next_offset, epoch, coalesce(owner, '') FROM `+s.table+`
			WHERE pipeline = $1 AND topic = $2 AND partition = $3 FOR SHARE`, s.pipeline, topic, partition).Scan(&p.NextOffset, &p.Epoch, &p.Owner)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Position{}, false, nil
	}
	if err != nil {
		return Position{}, false, fmt.Errorf("read offset row %s[%d]: %w", topic, partition, err)
	}
	return p, true, nil
}
