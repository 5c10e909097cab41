// Package txn assembles whole source transactions from Debezium's transaction metadata
// (provide.transaction.metadata=true): the BEGIN and END markers of the
// <topic.prefix>.transaction topic and the transaction block of each change event. It is
// the core of the cdc plugin's consistency: transaction.
//
// # Decoding
//
// DecodeMarker and DecodeChange read a record's payload already decoded into a tree: the
// cdc plugin's JSON payload (JsonConverter, with or without schemas) or an Avro value of
// sink/internal/schemaformat (longs as int64, unions unwrapped; testdata/debezium-avro is
// the real connector's Avro), so the plugin decodes each record once, with its own
// decoders. DecodeMarkerJSON and DecodeChangeJSON take a
// JsonConverter record's bytes (tests, tools). Every field is checked against what Debezium
// writes: a wrong type, a missing field, a count below 0 or above MaxEventCount, an order
// of 0, an id longer than MaxIDLen or not "<xid>:<lsn>", data_collections that do not add
// up to event_count is a *DecodeError (ErrMalformed), never a panic. A streamed change
// without a transaction block is ErrNoMetadata, which names the connector setting; a
// snapshot read (op r) has none and is no error.
//
// # Identity: the xid, not the id
//
// Debezium's PostgreSQL id is "<xid>:<lsn>", and the real connector (3.6.1, the fixtures
// in testdata) writes each record's own LSN there: the BEGIN, every change and the END of
// one transaction carry the same xid and different LSNs. A transaction is therefore keyed
// by its xid. The END's LSN is the transaction's commit LSN, and the next transaction's
// changes carry it as source.sequence[0] (Meta.PrevCommit: the commit LSN of the
// transaction streamed before theirs; null, read as 0, for the first one a connector
// streams). An xid repeats only after 2³² transactions; two transactions with one xid
// inside the assembler's window are not told apart.
//
// # Order and completeness
//
// Source commit order is the order of the ENDs' commit LSNs, which is the END order of the
// transaction topic. That topic must have exactly one partition: Debezium keys its markers
// by id, so on several partitions a transaction's BEGIN and END and the ENDs of consecutive
// transactions land on different partitions and their order is lost (the fixtures'
// capture creates it with topic.creation.<group>.partitions=1). Next returns transactions
// in that order only: a complete transaction waits behind an earlier incomplete one.
//
// A transaction is complete when its END was read and it holds event_count changes. The
// assembler takes a change only with a total_order in [1, event_count], a data collection
// the END lists and a data_collection_order in [1, that collection's event_count], and
// holds one change per total_order and per (collection, data_collection_order); so
// event_count changes are every total_order and, per data collection, its event_count. A
// change that contradicts the END, or takes an order another change has with another
// collection, is a *ConflictError (ErrInconsistent). An empty transaction (event_count 0,
// no data_collections) is complete at its END. BEGINs are not needed: the END and the
// changes say everything; a BEGIN only tells that a connector restarted mid-transaction
// (Stats.Interrupted). A complete transaction's changes come out by total_order, the order
// in which the source made them.
//
// # Re-sent and superseded events: the watermark
//
// Debezium is at-least-once: a connector that restarts sends again what it sent after its
// last flushed offsets, markers and changes alike, with the same ids, orders and
// source.sequence (testdata/debezium-restart: everything re-sent, then the next
// transaction as if nothing had happened). The assembler keeps a watermark W, the commit
// LSN of the last transaction emitted (Config.Watermark at start: the one the replica
// applied last), and recognises without remembering any id:
//
//   - an END with a commit LSN at or below W: re-sent, skipped (Stats.Resent);
//   - a change with PrevCommit below W: PostgreSQL streams transactions whole in commit
//     order, so the transaction after a commit below W commits at or before W: it was
//     emitted; skipped. A change with PrevCommit equal to W is of the next transaction;
//   - a second copy of a change (same xid and total_order, same collection and order) or
//     of an END, while its transaction is held: a duplicate, skipped (Stats.Duplicates);
//     a copy that differs is a *ConflictError;
//   - a transaction held without its END whose PrevCommit falls below W once a later
//     transaction is emitted: a partial copy of a transaction emitted before (its END was
//     before where the transaction topic was read from), dropped (Stats.Superseded).
//
// # Positions
//
// Each Tx carries the next offsets that committing it advances to, for every partition
// (the transaction topic's included) whose safe offset moved. A partition's safe next
// offset is its smallest offset still held by a transaction not yet emitted, else the one
// after its last record read: a later transaction's changes read before an earlier one's
// on the same partition keep the partition's position at them when the earlier one is
// emitted. ENDs are held; BEGINs, duplicates, re-sent records and what the caller Passes
// (snapshot reads, tombstones, which belong to no transaction and which the caller has
// dealt with) hold nothing. Records of emitted transactions past a held offset are read
// again after a restart from these positions; the watermark, stored with them, skips them.
//
// # Memory and streams
//
// Config.MaxEvents and MaxBytes bound what is held, all transactions together (changes and
// ENDs not emitted count as events). The transactions that do not commit next may hold
// half of it; the one that commits next (the oldest END not emitted is its, or its
// changes' PrevCommit is the watermark) is held in the rest, and a change or an END of it
// that would pass the bound is taken anyway: that transaction then streams (stream.go). Its changes
// held so far and every later one are handed out as they are read (TakeStreamed), and Next
// returns a Tx marked Streamed at its END; a stream keeps a few numbers per partition and
// data collection, not its changes. A record of another transaction that would pass its
// share is not taken and is a *LimitError (ErrTooLarge when its transaction alone passes the bound,
// ErrFull when the transactions held together do); an error leaves the assembler as it
// was, and the caller gives the same record again later, reading the partition no further
// meanwhile. A refused record's partition carries only transactions after the one that
// commits next, so that one always completes or streams, and reading never deadlocks
// (TestAssemblerRandomStreamsBounded). Streamed changes come out in arrival order per
// partition, not total_order: the same for keyed upserts (one key's changes share a
// partition, in order) and for deferrable foreign keys, not for non-deferrable ones.
//
// # Used by
//
// The cdc plugin's consistency: transaction (sink/cdc/sequence.go) feeds it every record
// of the set and applies what Next returns; docs/design.md ("Sets: partitions owned
// together") says how the partitions are owned, committed and fenced, and docs/cdc.md
// ("Transaction consistency") what a reader sees. The watermark rule relies on
// source.sequence[0] being the previous streamed commit across connector restarts (seen
// in the fixtures) and on transactions streamed whole in commit order (pgoutput without
// streaming of in-progress transactions).
package txn
