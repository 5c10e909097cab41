// Package table holds two built-in sink plugins that map record fields to the columns of a
// table, one per topic or one for all (see Routes), registered as "table" and "upsert".
//
// # table
//
// Inserts one row per record through COPY, the fastest way into PostgreSQL:
//
//	sink:
//	  type: table
//	  table: public.events          # [schema.]table; the name is quoted as given
//	  key_format: string            # json|string|bytes|avro|protobuf|json_schema; default string
//	  value_format: json            # the same; defaults to json
//	  columns:                      # column: source expression, or {from (or expr), required, cast, default}
//	    id: value.id
//	    amount: {from: value.amount, required: true}
//	    at: {from: value.ts, cast: epoch_ms}      # epoch_s|epoch_ms|epoch_us|rfc3339 -> timestamptz
//	    blob: {from: value.b64, cast: base64}     # -> bytea; json: a string holding JSON -> jsonb
//	    region: {from: value.region, default: eu} # for a missing field (a null stays NULL)
//	    payload: value              # the whole value (JSON text into json/jsonb/text)
//	    k: key
//	    src_offset: offset          # also topic, partition, timestamp, header.<name>
//	  create: false                 # true: create a missing table (below)
//	  on_conflict: error            # error (default) | nothing
//
// A tombstone (a record with a null value) is poison when a column reads the value.
//
// # Expressions
//
// A column may be computed by a CEL expression (cel.dev/cel-go; see mapping.Expr and
// docs/plugins.md, "Expressions (CEL)"), and records filtered and checked, on the section or
// per route:
//
//	where: 'value.kind != "test"'              # false: skipped (no row; the offset commits)
//	check:                                     # false: poison with the message
//	  - {expr: 'value.status in ["paid", "refunded"]', message: unknown status}
//	columns:
//	  amount: {expr: 'value.amount.replace(",", ".")', required: true}
//	  event_id: {expr: 'value.payment_id + ":" + value.status'}
//
// Expressions compile when the plugin is built; an error names the option
// (columns.amount.expr, where, check[0].expr). An evaluation that fails makes its record
// poison.
//
// With on_conflict: nothing a row that a unique key already holds (stored, or an earlier
// record of the batch: the first stays) is skipped and counted as skipped (sink.Skipped)
// instead of failing as poison; the batch is copied into a temporary table and inserted
// with one INSERT ... ON CONFLICT DO NOTHING. Other constraints still make a record poison.
//
// avro, protobuf and json_schema decode through the pipeline's schema_registry section
// (docs/formats.md): paths walk the decoded record, leaves become PostgreSQL text (decimals
// exactly, timestamps for timestamptz, bytes for bytea), records, maps and arrays JSON for
// jsonb, and an array into an array column (text[], numeric[]...) an array literal. A
// registry that does not answer makes the batch wait and retry (sink.Transient); an unknown
// schema id or bytes that do not decode make the record poison.
//
// # upsert
//
// Inserts or updates by key columns. Each batch is copied into a temporary table (one per
// session, emptied by the merge) and merged with one statement; when a key occurs more than
// once in a batch, the last record wins (with on_conflict: nothing, the first):
//
//	sink:
//	  type: upsert
//	  table: public.balances
//	  key: [account]                # columns of a primary key or unique index
//	  on_conflict: update           # update (default) | nothing
//	  delete_on_tombstone: false    # a null value deletes the key's row; key columns
//	                                # must then come from the record key
//	  columns:
//	    account: key
//	    balance: value.balance
//
// Without delete_on_tombstone, a tombstone is poison. delete_on_tombstone is refused with
// on_conflict: nothing, whose result would then depend on where batches split.
//
// # Merging upserts
//
// merge says per non-key column how a record combines with an existing row (default
// replace); only_if_newer guards the whole update:
//
//	sink:
//	  type: upsert
//	  table: inventory.stock
//	  key: [sku, warehouse]
//	  merge:
//	    qty: add                    # t.qty + new; a NULL adds nothing
//	    updated_at: max             # the greater; a NULL is ignored
//	  columns: {sku: value.sku, warehouse: value.warehouse, qty: value.delta, updated_at: value.at}
//
//	replace      the record's value, NULL included (the default; today's behaviour)
//	add          row + record; a NULL on either side counts as nothing (NULL + NULL is NULL)
//	min, max     the smaller, the greater; a NULL on either side is ignored
//	keep_first   the value the row was inserted with; later records never change it
//	coalesce     the record's value, unless it is NULL: then the row's stays
//
// A new key's row holds its first record's values, then combined with the batch's later
// records the same way. The result is always that of applying the records one by one, in
// offset order, whatever the batches: records of one key in a batch are reduced in SQL
// (the sum, the least, the greatest, the first, the last non-NULL, the last) before the one
// INSERT ... ON CONFLICT DO UPDATE, so all of them count, not only the last.
//
// only_if_newer: <column> applies a record to an existing row only when the record's value
// of that column is greater than the row's: a republished or replayed older record never
// moves the row backwards (not even while a replay runs). Equal is not newer, so a replay
// of the same record leaves the row untouched; a record whose value is NULL never updates
// an existing row, and a row whose value is NULL takes any record with a value. In a
// batch, the first record with the greatest value stands for the key, which is what one by
// one gives. With on_equal: update (default skip) a record whose value equals the row's
// updates it too, so that a replay after a fix of the mapping rewrites the rows it wrote;
// in a batch the last record with the greatest value then stands for the key (the first
// when every value is NULL). Its column must be replace (an ordered type: a timestamp, a version number);
// the other columns may be replace or keep_first only: which records of a batch pass the
// guard depends on the row, so a guarded sum, least, greatest or last non-NULL cannot be
// computed per batch, and a guarded sum would drop every delta arriving out of order.
//
// add is not idempotent, and need not be: the offset stored in the same transaction means
// each record is added exactly once, also after a crash or a rebalance. What it cannot
// tell apart is the same event published twice at two offsets: put an inbox in front
// (type: inbox, inner: ...) when producers may republish. Use only_if_newer for state that
// carries a version or timestamp (last known price, profile), add for deltas (stock
// moves, counters); to replay deltas on purpose (eosink offsets set to an earlier offset),
// rebuild the summed table from the start rather than replaying part of the log into it.
//
// merge and only_if_newer need on_conflict: update, and are refused with
// delete_on_tombstone (a tombstone has no value to add or compare). A merge on a type
// without the operation (add on text) fails Prepare, at start.
//
// PostgreSQL checks CHECK constraints on the row INSERT proposes, before the conflict makes
// it an update: with add that row holds the batch's sum of deltas, so CHECK (qty >= 0)
// refuses a batch whose deltas for a key sum below zero even when the stored sum stays
// positive. Check a merged result with a constraint trigger; foreign keys are checked on
// the final row.
//
// # Routes: many topics into many tables
//
// Both plugins write each topic to a table of its own with routes, tried in order before
// table (which then serves every other topic; without it, such a topic has no route):
//
//	sink:
//	  type: upsert
//	  key: [id]
//	  columns: {id: value.id, body: value}
//	  routes:
//	    - topic: audit                        # a topic name
//	      table: ops.audit_log
//	      columns: {id: value.event_id, who: value.user}   # default: the section's columns
//	      key: [id]                           # upsert only; default: the section's key
//	    - topic: '^cdc\.public\.(.*)$'        # a pattern (starts with ^)
//	      table: "replica.$${1}"              # ${1}..${9}: the pattern's groups
//	    - topic: '^raw\..*'
//	      table: "raw.$${topic}"              # ${topic}: the record's topic
//	  table: public.events                    # optional: every other topic
//
// ($$ keeps the config loader from expanding ${...} itself.) A rendered name longer than
// 63 bytes, or empty, is no route. The plugins implement sink.TopicRouter, so a topic
// without a route never loses a record: a listed topic is refused at load, a topic that
// kafka.topics' pattern matches at start makes the sink refuse to start, and one created
// later stops its partitions (reason no_route). Tables with fixed names are checked by
// Prepare; a table named after the topic is checked at its first batch.
//
// # Creating the table
//
// With create: true a missing table is created (CREATE TABLE IF NOT EXISTS) in the
// transaction of the first batch that writes to it, so a batch rolled back leaves no
// table; for upsert its key columns are the primary key, the table plugin's has none.
// Columns are nullable, in sorted order, typed from the registry schema of the batch's
// first record that decodes:
//
//	value.<path>, key.<path> (avro)   by the Avro schema: decimal numeric, timestamp-micros
//	                                  timestamptz, timestamp-millis timestamptz(3),
//	                                  local-timestamp-* timestamp, date, time-* time, uuid,
//	                                  boolean, int integer, long bigint, float real, double
//	                                  double precision, string and enum text, bytes and fixed
//	                                  bytea, records, maps and arrays jsonb
//	key, value (whole side)           string text, bytes bytea, json jsonb, protobuf and
//	                                  json_schema jsonb, avro by its root type
//	topic, header.<name>              text
//	partition, offset, timestamp      integer, bigint, timestamptz
//
// A path into a json, protobuf or json_schema side, or a field the schema lacks, has no
// type: the batch fails with an error that stops the partition (never poison, never a
// guessed type). Writers creating the same table at once queue on an advisory lock on its
// name and the later ones find it there. New fields do not add columns: the columns are the
// mapping's. Prepare accepts a missing table with create.
//
// # Errors
//
// A record that does not decode or lacks a required field is poison before any SQL runs. A
// value that cannot be cast is poison too, naming the column and the cast. A value
// PostgreSQL refuses (a wrong type, a constraint) fails the COPY with a data error at a line
// of the data: the record of that line is returned as poison, naming the column PostgreSQL
// names, and with on_poison: dead-letter the engine isolates it. A table or column that does not exist, or a key without a unique index, is a
// configuration error at start (Prepare), not a poison record.
package table
