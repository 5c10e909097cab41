package offsets

// Ending the stalled sessions of a pipeline that hold a partition's offset row: the blockers
// of a claim, and the holder of a COMMIT whose outcome is unknown. A sink's sessions carry
// an application_name that names the pipeline (rebalance.SessionName, Store.TerminateStalled),
// so that a claim can tell a stalled session of the same pipeline (a zombie holding the
// offset row) from anyone else's.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// watchBlockers terminates, after half the lock timeout, the sink sessions of this pipeline
// that block the claiming backend pid. It returns a func that stops the watch; stop does
// not wait for a termination query in flight, which needs a second pooled connection.
func (s *Store) watchBlockers(ctx context.Context, pid uint32, topic string, partition int32) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(s.lockTimeout / 2)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C:
		}
		qctx, cancel := context.WithTimeout(ctx, s.lockTimeout)
		defer cancel()
		rows, err := s.pool.Query(qctx, `SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE pid = ANY (pg_blocking_pids($1)) AND application_name = $2`, int64(pid), s.TerminateStalled)
		if err = s.reportTerminated(topic, partition, rows, err); err != nil && qctx.Err() == nil {
			s.onTerminateError(topic, partition, err)
		}
	}()
	return func() { close(done) }
}

// TerminateHolder ends backend pid if it is one of this pipeline's sessions (TerminateStalled)
// and its open transaction still holds the partition's offset row (the row's xmax is that
// transaction's id): the session of a COMMIT whose connection was lost on the client side,
// which a half-open TCP connection can keep alive for hours. A pid reused by another backend
// never matches. It reports whether it ended one.
func (s *Store) TerminateHolder(ctx context.Context, topic string, partition int32, pid uint32) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(a.pid)), false)
		FROM pg_stat_activity a JOIN `+s.table+` o ON o.pipeline = $3 AND o.topic = $4 AND o.partition = $5
		WHERE a.pid = $1 AND a.application_name = $2 AND a.backend_xid = o.xmax`,
		int64(pid), s.TerminateStalled, s.pipeline, topic, partition).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("end the session holding %s[%d]: %w", topic, partition, err)
	}
	if ok {
		s.Terminated.Add(1)
		s.onTerminate(topic, partition, int64(pid), true)
	}
	return ok, nil
}

// endRowHolder ends, on conn, the session of this pipeline (TerminateStalled) whose open
// transaction holds the partition's offset row (the row's xmax is its transaction id). A claim
// calls it when its wait for the row lock timed out: that session held the row past the lock
// timeout while Kafka has given the partition to this instance, so it is a stalled zombie.
// Failures go to OnTerminateError; the claim is retried either way.
func (s *Store) endRowHolder(ctx context.Context, conn *pgxpool.Conn, topic string, partition int32) {
	qctx, cancel := context.WithTimeout(ctx, s.lockTimeout+5*time.Second)
	defer cancel()
	rows, err := conn.Query(qctx, `SELECT a.pid, pg_terminate_backend(a.pid)
		FROM pg_stat_activity a JOIN `+s.table+` o ON o.pipeline = $2 AND o.topic = $3 AND o.partition = $4
		WHERE a.application_name = $1 AND a.backend_xid = o.xmax AND a.pid <> pg_backend_pid()`,
		s.TerminateStalled, s.pipeline, topic, partition)
	if err = s.reportTerminated(topic, partition, rows, err); err != nil && ctx.Err() == nil {
		s.onTerminateError(topic, partition, err)
	}
}

// reportTerminated reads the (pid, terminated) rows of a termination query that returned
// rows and err, counts and reports each session ended, and returns the query's error: a
// missing privilege (42501) shows only once the rows are read.
func (s *Store) reportTerminated(topic string, partition int32, rows pgx.Rows, err error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var victim int64
		var ok bool
		if rows.Scan(&victim, &ok) == nil {
			s.Terminated.Add(1)
			s.onTerminate(topic, partition, victim, ok)
		}
	}
	rows.Close()
	return rows.Err()
}

// isLockTimeout reports whether err is PostgreSQL's lock_timeout firing (55P03).
func isLockTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

func (s *Store) onTerminate(topic string, partition int32, pid int64, ok bool) {
	if s.OnTerminate != nil {
		s.OnTerminate(topic, partition, pid, ok)
	}
}

func (s *Store) onTerminateError(topic string, partition int32, err error) {
	if s.OnTerminateError != nil {
		s.OnTerminateError(topic, partition, err)
	}
}
