// Package sink moves records from Apache Kafka into PostgreSQL exactly once.
//
// # The guarantee
//
// Each batch of a partition is applied in one PostgreSQL transaction that also moves the
// partition's stored next offset. Either both commit or neither does, so after any crash
// the stored offset says exactly which records have been applied. On every partition
// assignment the position is read from that table, never from Kafka's committed offsets.
// A claim bumps the partition's epoch, and every commit checks the epoch and the expected
// start offset, so a zombie (a paused or partitioned former owner) can never commit after
// the new owner has claimed.
//
// The guarantee covers what the Handler writes through the transaction it is given. Side
// effects outside the database (HTTP calls, e-mails, other databases) are not covered: they
// may happen more than once when a batch is retried or replayed.
//
// # Quick start
//
//	s, err := sink.New(sink.Config{
//		Brokers:     "127.0.0.1:9092",
//		GroupID:     "points",
//		Topics:      []string{"points"},
//		DatabaseURL: os.Getenv("DATABASE_URL"),
//		AutoMigrate: true,
//		Handler: func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
//			for _, r := range b.Records {
//				if _, err := tx.Exec(ctx, "INSERT INTO events (body) VALUES ($1)", r.Value); err != nil {
//					return err
//				}
//			}
//			return nil
//		},
//	})
//	if err != nil { ... }
//	err = s.Run(ctx) // until ctx is cancelled; drains on the way out
//
// # Configuration
//
// Config's zero values take documented defaults, exported as the Default* constants. New
// applies them (Config.WithDefaults), then validates (Config.Validate), so rules between
// fields are checked against the values in effect; every error is a *ConfigError naming the
// field. New does no I/O.
//
// # Plugins
//
// A Handler is one function per batch. A Plugin (Config.Plugin) adds a lifecycle per
// claimed partition (Open, Write, Close), and optionally Preparer (checks at start) and
// Migrator (its own migrations). Package sink/plugin makes a plugin available by name to
// pipeline config files (`eosink run`); the built-in plugins are in sink/table (table,
// upsert), sink/sqlsink (sql), sink/inbox, sink/multi, sink/outboxsink (outbox) and
// sink/cdc. Package sinktest is the conformance suite every plugin should pass. See
// ExamplePlugin, package sink/plugin and docs/plugins.md.
//
// # Many topics
//
// Config.Topics takes topic names and patterns: an entry starting with ^ is a regular
// expression (^cdc\.public\..*), and the sink reads every topic it matches, including topics
// created later (found at librdkafka's metadata refresh, topic.metadata.refresh.interval.ms,
// 5 minutes unless set in Config.Kafka). A new topic is just new (topic, partition) claims.
// A plugin that writes each topic somewhere of its own implements TopicRouter; a topic it
// has no route for is refused by New (a listed name), by Run before it consumes (a
// pattern's match at start), or stops its partitions with a *NoRouteError, reason
// no_route (a topic created later). Nothing is dropped for want of a route. The table and
// upsert plugins route by topic (sink/table's Route); cdc routes by each event's source
// table. See docs/pipeline-config.md.
//
// # The offsets table
//
// The framework's migrations (package migrations, applied by Migrate, AutoMigrate or
// `eosink migrate up`) create <Schema>.offsets with one row per (pipeline, topic,
// partition): next_offset, epoch, owner, topic_id and timestamps. A partition without a row
// starts where Config.InitialPosition says: earliest, latest, error, or kafka-committed (the
// group's committed offset in Kafka, to take over an existing consumer group without
// replay).
//
// # Batches and transactions
//
// Every assigned partition has its own goroutine, which collects records into a batch of at
// most MaxBatchRecords records and MaxBatchBytes bytes, waiting at most MaxBatchWait after
// the first. For each batch it begins a transaction, runs
//
//	UPDATE offsets SET next_offset = $end WHERE <row> AND epoch = $mine AND next_offset = $start
//
// first (which takes the row lock), then the Handler or the Plugin's Write with the same
// transaction, then COMMIT. $end is the last record's offset + 1: offsets may have gaps. If the update
// matches no row, the batch rolls back and the partition stops with a *FencedError.
//
// Order is kept within a partition; partitions progress independently. Fetched records
// held in memory are bounded per partition by MaxBufferedBytes and over all partitions by
// MaxTotalBufferedBytes: past the first the partition is paused in the consumer until half
// of it has committed; at the second the sink stops taking records until commits free
// memory, and pauses the partitions over their share only when that lasts.
//
// # Errors
//
// Transient PostgreSQL errors (connection loss, SQLSTATE 08*, 40001, 40P01, 55P03, 57P*,
// 53*) are retried with backoff from the same position. A COMMIT that fails on the
// connection has an unknown outcome; the sink reads the row back and resumes from what is
// stored. Poison (a *PoisonError, or SQLSTATE class 22 or 23, or 54000) stops the partition
// by default; with OnPoison: DeadLetter the bad records are isolated in savepoints and
// written to the dead_letters table in the batch's own transaction (see docs/plugins.md);
// a record that commits fine with the rest of its batch is never dead-lettered. When more than MaxDeadLetterRatio of a partition's last DeadLetterWindow
// records would be dead letters, the batch rolls back and the partition stops with a
// *TooManyDeadLettersError (ErrTooManyDeadLetters). Any other error rolls back and stops the
// partition with a *HandlerError.
// A stored offset outside the log (records deleted by retention) or a recreated topic stops
// the partition with ErrOffsetOutOfRange or ErrTopicRecreated; the sink never jumps
// elsewhere by itself; a range check every few seconds catches a log recreated or truncated
// while the sink runs. Every stopped partition shows at once: one ERROR line with the
// remedy, the gauge eosink_partition_stopped, its offsets row (eosink status), optionally
// Healthy (Config.UnhealthyOnStoppedPartition), and Sink.PartitionErrors; Run goes on with
// the others.
//
// Run returns an error only when the sink cannot work at all: bad configuration, an
// unreachable database or broker at start, a missing offsets table, a topic matched at
// start that the plugin has no route for (ErrNoRoute), claims that keep failing, or a fatal
// librdkafka error. A broker that refuses the credentials or the TLS handshake at start
// ends Run at once, before anything is written, with ErrKafkaAuthentication or ErrKafkaTLS
// naming the cause (an untrusted CA, a certificate for another host, a refused client
// certificate); docs/security.md lists the messages.
//
// # Rebalances
//
// Partition ownership is handled by package rebalance, for eager, cooperative-sticky and
// the KIP-848 consumer protocol alike. On revoke, the revoked partitions' queued and
// in-flight batches commit (within RevokeTimeout) before the revoke is acknowledged; on
// loss they roll back without committing.
//
// # Operator resets
//
// `eosink offsets set` moves a stored position while the sink runs: it bumps the epoch
// (fencing this instance's next commit on the partition), names this instance as the fenced
// owner, and notifies the sink over LISTEN/NOTIFY. The sink claims the partition again and
// seeks to the new position without a restart. Package admin does the same from Go. See
// docs/operations.md.
//
// # Metrics and probes
//
// With Config.Registerer the sink registers Prometheus metrics named eosink_* (records,
// batches, commit latency, retries by cause, fenced and unknown commits, claims, rebalance
// events, per-partition lag and buffered bytes), and a plugin that is Instrumented adds
// its own (the cdc plugin's source lag); a CommitObserver plugin learns of each COMMIT of
// its writes. Ready and Healthy back readiness and
// liveness probes; package sink/sinkhttp serves them and the metrics over HTTP.
//
// # Kafka settings
//
// eosink sets enable.auto.commit=false and auto.offset.reset=error (a position outside the
// log must stop the partition, not reset it) and refuses other values for them;
// isolation.level defaults to read_committed. Every other librdkafka property, including
// security.protocol, ssl.* and sasl.*, passes through Config.Kafka unchanged. With
// CommitToKafka the stored offsets are also committed to Kafka after the database commit,
// for lag tools; positions never come from them (they are read back only to warn when they
// diverge from the stored ones).
package sink
