package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Shard claims (<schema>.outbox_shard_claims). Kafka fences an older producer of a
// transactional.id when a newer one initialises, but "newer" is whoever initialises last: a
// relay stalled in InitTransactions that wakes up after its successor started takes the shard
// back. The claim, made in the database when a relay starts a shard, decides instead: the
// relay with the current epoch goes on (it initialises again when a stale one fenced it);
// any other stops the shard with ErrFenced.

// claim takes shard for this relay instance and returns the epoch it holds. Database errors
// are retried until ctx ends; a missing table (not migrated) is returned at once.
func (r *Relay) claim(ctx context.Context, shard int) (int64, error) {
	backoff := r.c.PollInterval
	for {
		var epoch int64
		err := r.pool.QueryRow(ctx, `INSERT INTO `+r.claims+` AS c (relay, shard, epoch, owner) VALUES ($1, $2, 1, $3)
ON CONFLICT (relay, shard) DO UPDATE SET epoch = c.epoch + 1, owner = EXCLUDED.owner, claimed_at = now()
RETURNING epoch`, r.c.Name, shard, r.c.InstanceID).Scan(&epoch)
		if err == nil {
			return epoch, nil
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42P01" {
			return 0, fmt.Errorf("relay: claim shard %d: %w (migrate the outbox: `eosink relay -migrate` or outbox.Migrate)", shard, err)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		r.c.Logger.Warn("claiming the shard failed; retrying", "shard", shard, "err", err, "backoff", backoff)
		sleep(ctx, backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
}

// owns reports whether epoch is still shard's current claim.
func (r *Relay) owns(ctx context.Context, shard int, epoch int64) (bool, error) {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var current int64
	err := r.pool.QueryRow(c, `SELECT epoch FROM `+r.claims+` WHERE relay = $1 AND shard = $2`, r.c.Name, shard).Scan(&current)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("relay: read the claim of shard %d: %w", shard, err)
	}
	return current == epoch, nil
}

// checkClaim returns ErrFenced when another relay claimed shard after epoch.
func (r *Relay) checkClaim(ctx context.Context, shard int, epoch int64) error {
	ok, err := r.owns(ctx, shard, epoch)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w (another relay claimed shard %d after this one's claim %d)", ErrFenced, shard, epoch)
	}
	return nil
}
