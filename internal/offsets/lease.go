package offsets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The leases table (migration 8): a set of partitions owned together by one instance at a
// time, outside any consumer group. An instance takes the lease (TakeLease, which bumps its
// epoch), claims every partition of the set and assigns them by hand; it renews the lease
// while it holds it (RenewLease) and releases it at a clean shutdown (ReleaseLease). Every
// commit checks the lease's epoch in its own transaction (CheckLease): once another
// instance took the lease, the old holder's commits fail, whatever its clock or its
// connection did.

// ErrLeaseLost means the lease is no longer held under the epoch presented: another
// instance took it (after this one's renewals stopped for the lease's timeout) or an
// operator moved it. Nothing was written.
var ErrLeaseLost = errors.New("eosink: the lease was taken by another instance")

// Lease is one row of the leases table.
type Lease struct {
	Pipeline  string        `json:"pipeline"`
	Name      string        `json:"name"`
	Epoch     int64         `json:"epoch"`
	Holder    string        `json:"holder"`         // empty when released
	RenewedAt time.Time     `json:"renewed_at"`     // zero when never renewed
	Age       time.Duration `json:"renewed_ago_ns"` // since RenewedAt, by the server's clock
}

// TakeLease takes the lease name for this store's instance when it is free: released,
// never taken, not renewed for timeout (by the server's clock), or held by this same
// instance (a restart under the same instance id). It returns the lease with its new epoch
// and true, or the current holder's lease and false.
//
// Whether it is free is read first without a lock, from what is committed. Only then does
// the take lock the row, where it may wait for a commit of the holder in flight (each
// commit's CheckLease locks the row): a holder that has renewed nothing for timeout yet
// holds the row is stalled (a paused process, a half-sent COPY), and as with a claim its
// session is ended after half the lock timeout when it is one of the pipeline's
// (TerminateStalled); its commit rolls back.
func (s *Store) TakeLease(ctx context.Context, name string, timeout time.Duration) (Lease, bool, error) {
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.leases+` (pipeline, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		s.pipeline, name); err != nil {
		return Lease{}, false, fmt.Errorf("lease %q: %w", name, err)
	}
	cur, err := s.ReadLease(ctx, name)
	if err != nil {
		return Lease{}, false, err
	}
	if cur.Holder != "" && cur.Holder != s.owner && !cur.RenewedAt.IsZero() && cur.Age < timeout {
		return cur, false, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return Lease{}, false, fmt.Errorf("lease %q: take: %w", name, err)
	}
	defer conn.Release()
	if s.TerminateStalled != "" && s.lockTimeout > 0 {
		stop := s.watchBlockers(ctx, conn.Conn().PgConn().PID(), "lease "+name, -1)
		defer stop()
	}
	l := Lease{Pipeline: s.pipeline, Name: name}
	taken := false
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if s.lockTimeout > 0 {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", s.lockTimeout.Milliseconds())); err != nil {
				return err
			}
		}
		err := tx.QueryRow(ctx, `UPDATE `+s.leases+` SET epoch = epoch + 1, holder = $3, taken_at = now(), renewed_at = now()
			WHERE pipeline = $1 AND name = $2
			  AND (holder IS NULL OR holder = $3 OR renewed_at IS NULL OR renewed_at < now() - make_interval(secs => $4))
			RETURNING epoch, holder, renewed_at`, s.pipeline, name, s.owner, timeout.Seconds()).Scan(&l.Epoch, &l.Holder, &l.RenewedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // renewed meanwhile
		}
		taken = err == nil
		return err
	})
	if err != nil {
		return Lease{}, false, fmt.Errorf("lease %q: take: %w", name, err)
	}
	if taken {
		return l, true, nil
	}
	cur, err = s.ReadLease(ctx, name)
	return cur, false, err
}

// ReadLease returns the lease name as stored.
func (s *Store) ReadLease(ctx context.Context, name string) (Lease, error) {
	l := Lease{Pipeline: s.pipeline, Name: name}
	var holder *string
	var renewed *time.Time
	var age *float64
	err := s.pool.QueryRow(ctx, `SELECT epoch, holder, renewed_at, extract(epoch FROM now() - renewed_at)::float8
		FROM `+s.leases+` WHERE pipeline = $1 AND name = $2`, s.pipeline, name).Scan(&l.Epoch, &holder, &renewed, &age)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, nil
	}
	if err != nil {
		return Lease{}, fmt.Errorf("lease %q: read: %w", name, err)
	}
	if holder != nil {
		l.Holder = *holder
	}
	if renewed != nil {
		l.RenewedAt = *renewed
	}
	if age != nil {
		l.Age = time.Duration(*age * float64(time.Second))
	}
	return l, nil
}

// RenewLease records that this instance still holds the lease under epoch. It returns
// ErrLeaseLost when the lease has another epoch or holder.
func (s *Store) RenewLease(ctx context.Context, name string, epoch int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.leases+` SET renewed_at = now()
		WHERE pipeline = $1 AND name = $2 AND epoch = $3 AND holder = $4`, s.pipeline, name, epoch, s.owner)
	if err != nil {
		return fmt.Errorf("lease %q: renew: %w", name, err)
	}
	if tag.RowsAffected() != 1 {
		return ErrLeaseLost
	}
	return nil
}

// CheckLease is RenewLease inside tx, the first statement of every commit of the set: it
// locks the lease row until tx ends, so no one takes the lease while the commit is in
// flight, and fails with ErrLeaseLost when another instance holds it.
func (s *Store) CheckLease(ctx context.Context, tx pgx.Tx, name string, epoch int64) error {
	tag, err := tx.Exec(ctx, s.checkLeaseSQL(), s.pipeline, name, epoch, s.owner)
	return leaseChecked(name, tag, err)
}

// checkLeaseSQL is CheckLease's statement: the pipeline, the lease's name and epoch, this
// instance.
func (s *Store) checkLeaseSQL() string {
	return `UPDATE ` + s.leases + ` SET renewed_at = now()
		WHERE pipeline = $1 AND name = $2 AND epoch = $3 AND holder = $4`
}

// leaseChecked turns the check's outcome into CheckLease's error.
func leaseChecked(name string, tag pgconn.CommandTag, err error) error {
	if err != nil {
		return fmt.Errorf("lease %q: check: %w", name, err)
	}
	if tag.RowsAffected() != 1 {
		return ErrLeaseLost
	}
	return nil
}

// ReleaseLease gives the lease up, when it is still held under epoch, so that a standby
// takes it at once instead of after the timeout.
func (s *Store) ReleaseLease(ctx context.Context, name string, epoch int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE `+s.leases+` SET holder = NULL
		WHERE pipeline = $1 AND name = $2 AND epoch = $3 AND holder = $4`, s.pipeline, name, epoch, s.owner)
	if err != nil {
		return fmt.Errorf("lease %q: release: %w", name, err)
	}
	return nil
}

// Leases returns the leases of pipeline (every pipeline's when empty), by pipeline and
// name; none when the schema predates the leases table (migration 8).
func (o *Operator) Leases(ctx context.Context, pipeline string) ([]Lease, error) {
	rows, err := o.pool.Query(ctx, `SELECT pipeline, name, epoch, coalesce(holder, ''), renewed_at,
		coalesce(extract(epoch FROM now() - renewed_at)::float8, 0)
		FROM `+pgx.Identifier{o.schema, "leases"}.Sanitize()+` WHERE $1 = '' OR pipeline = $1 ORDER BY pipeline, name`, pipeline)
	if err != nil {
		if isUndefinedTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("leases: %w", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		var renewed *time.Time
		var age float64
		if err := rows.Scan(&l.Pipeline, &l.Name, &l.Epoch, &l.Holder, &renewed, &age); err != nil {
			return nil, fmt.Errorf("leases: %w", err)
		}
		if renewed != nil {
			l.RenewedAt = *renewed
		}
		l.Age = time.Duration(age * float64(time.Second))
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		if isUndefinedTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("leases: %w", err)
	}
	return out, nil
}

func isUndefinedTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}
