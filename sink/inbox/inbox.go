// Package inbox is the "inbox" sink plugin: it wraps another plugin and applies each event at
// most once by its business id, whatever offset it arrives at. Producers that retry, or
// systems that republish, send the same event again at a new offset; the exactly-once
// engine then sees a new record, and only the inbox can tell it is the same event.
//
// For every record the inbox reads an event id (a source expression such as value.event_id,
// key or header.event-id, or, with event_id_expr, a CEL expression such as
// value.payment_id + ":" + value.status) and the SHA-256 of its value, and, in the same transaction as the
// wrapped plugin's write:
//   - a new id is remembered in the inbox table and the record goes to the wrapped plugin;
//   - a known id with the same payload is skipped, and counted in the row's duplicates
//     column and as skipped (sink.Skipped), not as applied;
//   - a known id with a different payload is a poison record (ErrConflict): dead-lettered
//     or stopping the partition, by the pipeline's on_poison policy.
//
// Remembered ids are deleted after Retention. Retention must outlast the longest window in
// which a duplicate can still arrive: producer retries, republishing, and operator replays
// (`eosink offsets reset` to an earlier offset). A duplicate that arrives after its id was
// forgotten is applied again.
//
// Config file section:
//
//	sink:
//	  type: inbox
//	  event_id: value.event_id   # required: where the id is (or event_id_expr: a CEL expression)
//	  subscriber: orders-view    # defaults to the pipeline name
//	  retention: 720h            # defaults to 720h (30 days); 0s keeps ids forever
//	  schema: eosink             # the inbox table's schema; defaults to the pipeline's
//	  key_format: string         # json|string|bytes|avro|protobuf|json_schema; defaults to string
//	  value_format: json         # the same; defaults to json. avro, protobuf and json_schema
//	                             # need the pipeline's schema_registry section
//	  inner:                     # the plugin that applies the events
//	    type: upsert
//	    ...
package inbox

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/migrator"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/mapping"
	"github.com/eosink/eosink/sink/plugin"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationsTable is the golang-migrate version table of the inbox's migrations.
const MigrationsTable = "eosink_inbox_schema_migrations"

// ErrConflict: an event id arrived again with a different payload.
var ErrConflict = errors.New("inbox: event id already applied with a different payload")

// ErrNoEventID: a record has no event id.
var ErrNoEventID = errors.New("inbox: record has no event id")

// Config configures an Inbox.
type Config struct {
	// EventID is the source expression of the event id: key, key.<path>, value.<path> or
	// header.<name>. Required, unless EventIDExpr is set.
	EventID string `yaml:"event_id"`
	// EventIDExpr is a CEL expression over the record (see the table plugin's expr) whose
	// result is the event id, instead of EventID: value.payment_id + ":" + value.status for
	// an id made of several fields. Its result becomes text as a column's does; null or
	// empty text is ErrNoEventID. Defaults to "": EventID gives the id.
	EventIDExpr string `yaml:"event_id_expr"`
	// Subscriber separates the ids of different consumers of the same events. Defaults to
	// the pipeline name.
	Subscriber string `yaml:"subscriber"`
	// Retention is how long ids are remembered. Defaults to 720h; 0s keeps them forever
	// (a YAML duration needs its unit).
	Retention *time.Duration `yaml:"retention"`
	// Schema of the inbox table. Defaults to the pipeline's schema.
	Schema string `yaml:"schema"`
	// KeyFormat and ValueFormat say how to decode the key and value for EventID: json,
	// string, bytes, avro, protobuf or json_schema. Default to string and json.
	KeyFormat   string `yaml:"key_format"`
	ValueFormat string `yaml:"value_format"`
	// SchemaRegistry is where the avro, protobuf and json_schema formats find their
	// schemas; required for them. From a config file it is the pipeline's schema_registry
	// section.
	SchemaRegistry *plugin.SchemaRegistry `yaml:"-"`
}

// Inbox is the plugin.
type Inbox struct {
	inner      sink.Plugin
	subscriber string
	schema     string
	retention  time.Duration
	col        mapping.Column  // where the id is: its From or its Expr
	srcText    string          // Config.EventID, for the route summary
	m          mapping.Mapping // the formats and decoder the id is read with
	table      string          // quoted schema.inbox

	lastPrune atomic.Int64 // unix nanos
}

func init() { plugin.RegisterConfig("inbox", fromConfig) }

// section is the inbox's config section: its own keys and the inner plugin's section. It is
// an alias of an unnamed struct so that yaml's type errors name it as they always have.
type section = struct {
	Config `yaml:",inline"`
	Inner  map[string]any `yaml:"inner"`
}

// fromConfig builds the inbox and its inner plugin from the section; the subscriber and the
// schema default to the pipeline's.
func fromConfig(cfg plugin.Config, c section) (*Inbox, error) {
	innerCfg, err := cfg.Sub("inner")
	if err != nil {
		return nil, err
	}
	inner, err := plugin.Build(innerCfg)
	if err != nil {
		return nil, err
	}
	if c.Subscriber == "" {
		c.Subscriber = cfg.Pipeline
	}
	if c.Schema == "" {
		c.Schema = cfg.Schema
	}
	c.SchemaRegistry = cfg.SchemaRegistry
	return New(c.Config, inner)
}

// New returns an Inbox applying events through inner.
func New(c Config, inner sink.Plugin) (*Inbox, error) {
	if inner == nil {
		return nil, errors.New("inner: required")
	}
	col := mapping.Column{Name: "event_id", Required: true}
	switch {
	case c.EventID != "" && c.EventIDExpr != "":
		return nil, errors.New("event_id_expr: give event_id or event_id_expr, not both")
	case c.EventIDExpr != "":
		e, err := mapping.CompileExpr(c.EventIDExpr)
		if err != nil {
			return nil, fmt.Errorf("event_id_expr: %w", err)
		}
		col.Expr = e
		c.EventID = c.EventIDExpr // for the route summary
	case c.EventID == "":
		return nil, errors.New("event_id: required (for example value.event_id), or event_id_expr")
	default:
		src, err := mapping.ParseSource(c.EventID)
		if err != nil {
			return nil, fmt.Errorf("event_id: %w", err)
		}
		col.From = src
	}
	if c.Subscriber == "" {
		return nil, errors.New("subscriber: required")
	}
	if c.Schema == "" {
		c.Schema = "eosink"
	}
	if err := migrator.CheckSchemaName(c.Schema); err != nil {
		return nil, err
	}
	ib := &Inbox{inner: inner, subscriber: c.Subscriber, schema: c.Schema, col: col, srcText: c.EventID, retention: 720 * time.Hour,
		m: mapping.Mapping{Key: mapping.String, Value: mapping.JSON}, table: pgx.Identifier{c.Schema, "inbox"}.Sanitize()}
	if c.Retention != nil {
		if *c.Retention < 0 {
			return nil, errors.New("retention: must not be negative")
		}
		ib.retention = *c.Retention
	}
	var err error
	if c.KeyFormat != "" {
		if ib.m.Key, err = mapping.ParseFormat(c.KeyFormat); err != nil {
			return nil, fmt.Errorf("key_format: %w", err)
		}
	}
	if c.ValueFormat != "" {
		if ib.m.Value, err = mapping.ParseFormat(c.ValueFormat); err != nil {
			return nil, fmt.Errorf("value_format: %w", err)
		}
	}
	if err := ib.m.SetDecoder(c.SchemaRegistry, "key_format", "value_format"); err != nil {
		return nil, err
	}
	probe := ib.m
	probe.Columns = []mapping.Column{col}
	if err := probe.Validate(); err != nil {
		if col.Expr != nil {
			return nil, fmt.Errorf("event_id_expr: %w", err)
		}
		return nil, fmt.Errorf("event_id: %w", err)
	}
	return ib, nil
}

// Migrations returns the inbox table's migrations and those of the wrapped plugin.
func (ib *Inbox) Migrations() []sink.Migrations {
	sets := []sink.Migrations{{Name: "inbox", FS: mustSub(migrationFiles, "migrations"), Schema: ib.schema, Table: MigrationsTable}}
	if m, ok := ib.inner.(sink.Migrator); ok {
		sets = append(sets, m.Migrations()...)
	}
	return sets
}

// Prepare lets the wrapped plugin check the database.
func (ib *Inbox) Prepare(ctx context.Context, db sink.DB) error {
	if p, ok := ib.inner.(sink.Preparer); ok {
		return p.Prepare(ctx, db)
	}
	return nil
}

// CheckTopic asks the wrapped plugin whether it has a route for topic (sink.TopicRouter);
// nil when it does not route by topic.
func (ib *Inbox) CheckTopic(topic string) error {
	if r, ok := ib.inner.(sink.TopicRouter); ok {
		return r.CheckTopic(topic)
	}
	return nil
}

// RouteSummary is the wrapped plugin's, when it has one, each line noting the event id.
func (ib *Inbox) RouteSummary() []string {
	r, ok := ib.inner.(interface{ RouteSummary() []string })
	if !ok {
		return nil
	}
	lines := r.RouteSummary()
	for i := range lines {
		lines[i] += " (once per event id " + ib.srcText + ")"
	}
	return lines
}

// ReplayNotes (sink.ReplayNoter): the inbox skips every event it recorded, so a replay of
// them reaches no inner plugin.
func (ib *Inbox) ReplayNotes() []string {
	return []string{"inbox (event id " + ib.srcText + "): a replay skips every event the inbox has recorded, so it rewrites no row; " +
		"delete their rows from " + ib.table + " (subscriber " + ib.subscriber + ") to apply them again"}
}

// Open opens the wrapped plugin for p.
func (ib *Inbox) Open(ctx context.Context, p sink.Partition) error { return ib.inner.Open(ctx, p) }

// Close closes the wrapped plugin for p.
func (ib *Inbox) Close(ctx context.Context, p sink.Partition) error { return ib.inner.Close(ctx, p) }

type event struct {
	id      string
	hash    []byte
	idx     int // index in the batch
	repeats int // later records of the batch with the same id and payload
}

// Write remembers new event ids, skips known ones, and passes the new events on.
func (ib *Inbox) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	if len(b.Records) == 0 {
		return ib.inner.Write(ctx, tx, b)
	}
	// Ids and hashes; the first of equal ids in the batch decides, later ones are duplicates
	// of it (or conflicts).
	first := map[string]*event{}
	var events []*event
	for i := range b.Records {
		r := &b.Records[i]
		v, err := ib.m.ExtractColumn(r, ib.col)
		if err != nil {
			if perr := mapping.RecordError(r, err); !errors.Is(perr, sink.ErrPoison) {
				return perr // the schema registry: transient, or misconfigured
			}
			return sink.Poison(r, fmt.Errorf("%w: %v", ErrNoEventID, err))
		}
		id, ok := idString(v)
		if !ok {
			return sink.Poison(r, fmt.Errorf("%w at %s", ErrNoEventID, ib.srcText))
		}
		sum := sha256.Sum256(r.Value)
		if prev, seen := first[id]; seen {
			if !slices.Equal(prev.hash, sum[:]) {
				return sink.Poison(r, fmt.Errorf("%w: id %q first at offset %d in this batch", ErrConflict, id, b.Records[prev.idx].Offset))
			}
			prev.repeats++
			continue
		}
		e := &event{id: id, hash: sum[:], idx: i}
		first[id] = e
		events = append(events, e)
	}

	// Remember the new ids. Sorted, so that two partitions inserting overlapping ids lock
	// them in the same order and do not deadlock.
	sorted := slices.Clone(events)
	slices.SortFunc(sorted, func(a, b *event) int { return strings.Compare(a.id, b.id) })
	ids := make([]string, len(sorted))
	hashes := make([][]byte, len(sorted))
	offsets := make([]int64, len(sorted))
	for i, e := range sorted {
		ids[i], hashes[i], offsets[i] = e.id, e.hash, b.Records[e.idx].Offset
	}
	// One statement, so that no id can vanish between reading and writing: a new id is
	// inserted; a known one is locked and counted as a duplicate, and its stored hash comes
	// back. A conflict then rolls the whole write back, its count included.
	rows, err := tx.Query(ctx, `INSERT INTO `+ib.table+` AS i (subscriber, event_id, payload_hash, topic, partition, "offset")
SELECT $1, u.id, u.hash, $2, $3, u.off FROM unnest($4::text[], $5::bytea[], $6::bigint[]) AS u(id, hash, off)
ON CONFLICT (subscriber, event_id) DO UPDATE SET duplicates = i.duplicates + 1, last_duplicate_at = now()
RETURNING event_id, payload_hash, topic, partition, "offset", (xmax = 0) AS inserted`,
		ib.subscriber, b.Topic, b.Partition, ids, hashes, offsets)
	if err != nil {
		return fmt.Errorf("inbox: remember ids: %w", err)
	}
	type stored struct {
		hash      []byte
		topic     string
		partition int32
		offset    int64
		inserted  bool
	}
	got := make(map[string]stored, len(events))
	var id string
	var st stored
	if _, err := pgx.ForEachRow(rows, []any{&id, &st.hash, &st.topic, &st.partition, &st.offset, &st.inserted}, func() error {
		got[id] = st
		return nil
	}); err != nil {
		return fmt.Errorf("inbox: remember ids: %w", err)
	}
	fresh := make([]sink.Record, 0, len(events))
	for _, e := range events { // in offset order
		st := got[e.id]
		switch {
		case st.inserted:
			fresh = append(fresh, b.Records[e.idx])
		case !slices.Equal(st.hash, e.hash):
			return sink.Poison(&b.Records[e.idx], fmt.Errorf("%w: id %q first applied at %s[%d]@%d", ErrConflict, e.id, st.topic, st.partition, st.offset))
		}
	}
	// In-batch repeats; repeats of stored ids were counted by the insert above.
	var dupIDs []string
	var counts []int32
	for _, e := range events {
		if e.repeats > 0 {
			dupIDs = append(dupIDs, e.id)
			counts = append(counts, int32(e.repeats))
		}
	}
	if len(dupIDs) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE `+ib.table+` AS i SET duplicates = i.duplicates + u.n, last_duplicate_at = now()
FROM unnest($2::text[], $3::int[]) AS u(id, n) WHERE i.subscriber = $1 AND i.event_id = u.id`, ib.subscriber, dupIDs, counts); err != nil {
			return fmt.Errorf("inbox: count duplicates: %w", err)
		}
	}

	// The new events, in offset order, go to the wrapped plugin; the others are not applied.
	sink.Skipped(ctx, len(b.Records)-len(fresh))
	if len(fresh) > 0 {
		if err := ib.inner.Write(ctx, tx, sink.Batch{Topic: b.Topic, Partition: b.Partition, Records: fresh}); err != nil {
			return err
		}
	}
	return ib.prune(ctx, tx)
}

// pruneLimit bounds the ids one batch forgets.
const pruneLimit = 10000

// prune forgets ids older than the retention, inside the batch's transaction: up to
// pruneLimit at a time, once a minute, or with every batch while a backlog remains.
func (ib *Inbox) prune(ctx context.Context, tx pgx.Tx) error {
	if ib.retention == 0 {
		return nil
	}
	now := time.Now().UnixNano()
	last := ib.lastPrune.Load()
	if now-last < int64(time.Minute) || !ib.lastPrune.CompareAndSwap(last, now) {
		return nil
	}
	tag, err := tx.Exec(ctx, `DELETE FROM `+ib.table+` WHERE ctid = ANY (ARRAY(SELECT ctid FROM `+ib.table+
		` WHERE subscriber = $1 AND processed_at < now() - $2 * interval '1 second' LIMIT $3))`, ib.subscriber, ib.retention.Seconds(), pruneLimit)
	if err != nil {
		return fmt.Errorf("inbox: forget ids older than %s: %w", ib.retention, err)
	}
	if tag.RowsAffected() == pruneLimit {
		ib.lastPrune.Store(0) // more to forget: again with the next batch, not in a minute
	}
	return nil
}

// idString turns an extracted value into an id; nil and empty are no id.
func idString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, x != ""
	case []byte:
		return hex.EncodeToString(x), len(x) > 0
	}
	return "", false
}
