package offsets

import (
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store reads and writes one pipeline's rows in the offsets table, and its instance's row
// in the instances table. It is the only code that touches those tables on the hot path.
// Safe for concurrent use.
type Store struct {
	pool        *pgxpool.Pool
	table       string // sanitized schema.offsets
	instances   string // sanitized schema.instances
	leases      string // sanitized schema.leases (lease.go)
	pipeline    string
	owner       string
	lockTimeout time.Duration

	// TerminateStalled, when not empty, is the application_name of this pipeline's sink
	// sessions as the server shows it in pg_stat_activity (see rebalance.SessionName). A claim
	// blocked for half of the lock timeout by such a session terminates it (pg_terminate_backend),
	// and so does a claim whose lock wait timed out (on its own connection, when the pool
	// had none free for the watch): a session that holds the offset row while Kafka has given the
	// partition to someone else is a stalled zombie (paused process, or a COPY left half
	// sent, which idle_in_transaction_session_timeout does not end). Its transaction rolls
	// back and its commit fails. This needs the same role or pg_signal_backend; without it
	// the claim falls back to waiting for the server's timeouts.
	TerminateStalled string
	// OnTerminate, when set, is told of each stalled session a claim terminated.
	OnTerminate func(topic string, partition int32, pid int64, ok bool)
	// OnTerminateError, when set, is told why looking for or ending a stalled session
	// failed (a missing privilege is SQLSTATE 42501).
	OnTerminateError func(topic string, partition int32, err error)
	// Terminated counts the stalled sessions terminated.
	Terminated atomic.Int64
}

// NewStore returns a Store for pipeline's rows in schema.offsets. owner is written on every
// claim for operators; it never takes part in fencing. It is also the instance whose stops
// (MarkStopped) and heartbeats (Heartbeat) the store records. lockTimeout bounds how long a
// claim waits for a row lock held by a stalled previous owner.
func NewStore(pool *pgxpool.Pool, schema, pipeline, owner string, lockTimeout time.Duration) *Store {
	return &Store{
		pool:        pool,
		table:       pgx.Identifier{schema, "offsets"}.Sanitize(),
		instances:   pgx.Identifier{schema, "instances"}.Sanitize(),
		leases:      pgx.Identifier{schema, "leases"}.Sanitize(),
		pipeline:    pipeline,
		owner:       owner,
		lockTimeout: lockTimeout,
	}
}

// Pipeline returns the pipeline name the store was made for.
func (s *Store) Pipeline() string { return s.pipeline }

// Owner returns the owner the store writes on every claim (the sink's instance id).
func (s *Store) Owner() string { return s.owner }
