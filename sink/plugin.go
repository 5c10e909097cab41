package sink

import (
	"context"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Plugin writes records to PostgreSQL. The framework drives its lifecycle and owns the
// transaction; a plugin only writes through it. The built-in plugins are table and upsert
// (package sink/table), sql (sink/sqlsink), inbox (sink/inbox), multi (sink/multi) and cdc
// (sink/cdc), with outbox (sink/outboxsink) wrapping any of them to emit events into the
// transactional outbox; a Handler is the one-method form of a Plugin.
//
// For one partition the calls are: Open, then any number of Write, then Close, all on the
// partition's own goroutine. A partition that is revoked and assigned again gets a new Open.
// Different partitions call the same Plugin concurrently, so a Plugin keeps per-partition
// state keyed by Partition and guards shared state itself.
type Plugin interface {
	// Open is called when a partition has been claimed, before its first Write, with the
	// claim's epoch and stored next offset. An error stops the partition on this instance
	// (a *PartitionError); Close is still called.
	Open(ctx context.Context, p Partition) error

	// Write applies batch inside tx, which already holds the partition's offset update. The
	// framework commits both after Write returns nil. Write must do all its database work
	// through tx and must not keep tx after returning.
	//
	// Write may be called again with the same records, or with a part of them, after a
	// rollback: a transient error, an unknown commit outcome, or poison isolation, which
	// writes parts of a batch in savepoints of one transaction. Only one call per record
	// ever commits. Records arrive in offset order; within one transaction the parts of a
	// batch also arrive in offset order.
	//
	// Errors decide what happens to the batch:
	//   - a transient PostgreSQL error (connection loss, SQLSTATE 08 and 53, 40001
	//     serialization failure, 40P01 deadlock, 55P03 lock timeout, 57P01-57P03, 57014)
	//     retries the batch;
	//   - a *PoisonError (see Poison) names one bad record; a data error (SQLSTATE class 22
	//     or 23, or 54000) names none. Both are poison: with OnPoison DeadLetter the framework
	//     isolates the bad records and dead-letters them in the same transaction, otherwise
	//     the partition stops;
	//   - any other error stops the partition with a *HandlerError.
	Write(ctx context.Context, tx pgx.Tx, batch Batch) error

	// Close is called once after the partition's last Write: when it is revoked or lost,
	// when it stops on an error, and when the sink shuts down. ctx is not the sink's (which
	// may be cancelled) and carries a short deadline. An error is logged.
	Close(ctx context.Context, p Partition) error
}

// Partition names a claimed partition.
type Partition struct {
	Topic      string
	Partition  int32
	Epoch      int64 // the claim's epoch
	NextOffset int64 // the stored position at the claim
}

// DB is the part of *pgxpool.Pool, *pgx.Conn and pgx.Tx that a Preparer needs.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Preparer is implemented by plugins that check the database before the sink consumes,
// for example that their table and columns exist. Run calls Prepare once, after the
// database is reachable and before joining the consumer group; an error stops Run, so a
// mistake in configuration fails at start rather than at the first record.
type Preparer interface {
	Prepare(ctx context.Context, db DB) error
}

// BatchDefaulter is implemented by plugins whose batches are best at another size than
// DefaultMaxBatchRecords and DefaultMaxBatchBytes: WithDefaults (and so New) takes its
// values for MaxBatchRecords and MaxBatchBytes where Config leaves them unset (zero), and
// the Default* constants only where it returns 0. The cdc plugin does (cdc.DefaultBatchRecords).
type BatchDefaulter interface {
	BatchDefaults() (records, bytes int)
}

// ReplayNoter is implemented by plugins that do not simply write again what a replay brings
// again: records applied once and read again after `eosink offsets set` moved a position
// back (a repair after a bug fix, say). ReplayNotes says, one line each, what such a replay
// does with the plugin's rows, for the operator who moves the position: `offsets set -config`
// prints the lines, so that a replay meant to repair rows does not silently keep them.
// Plugins that wrap others (multi, inbox, outbox) include their inner plugins' notes.
type ReplayNoter interface {
	ReplayNotes() []string
}

// ReplayNotes is p's ReplayNotes, or none when p is not a ReplayNoter.
func ReplayNotes(p Plugin) []string {
	if r, ok := p.(ReplayNoter); ok {
		return r.ReplayNotes()
	}
	return nil
}

// Migrations is a plugin's own golang-migrate set: numbered NNNN_name.up.sql and
// NNNN_name.down.sql files at the root of FS, applied to Schema with their version kept in
// Table (which must differ from every other set's Table in the same schema).
type Migrations struct {
	Name   string // for messages, for example "inbox"
	FS     fs.FS  // the NNNN_name.up.sql and .down.sql files, at its root
	Schema string // the schema the set is applied to
	Table  string // golang-migrate's version table of the set, in Schema
}

// Migrator is implemented by plugins that ship migrations. With Config.AutoMigrate the sink
// applies them on start; `eosink migrate up --config` applies them too. Without either, Run
// refuses to start unless the schema is at exactly the set's latest version: behind it
// needs a migration, ahead of it was written by a newer plugin than this binary knows.
type Migrator interface {
	Migrations() []Migrations
}

// handlerPlugin adapts a Handler to a Plugin.
type handlerPlugin Handler

func (handlerPlugin) Open(context.Context, Partition) error { return nil }
func (h handlerPlugin) Write(ctx context.Context, tx pgx.Tx, b Batch) error {
	return h(ctx, tx, b)
}
func (handlerPlugin) Close(context.Context, Partition) error { return nil }
