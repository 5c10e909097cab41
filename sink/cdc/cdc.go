package cdc

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/mapping"
	"github.com/eosink/eosink/sink/internal/schemaformat"
	"github.com/eosink/eosink/sink/internal/stage"
	"github.com/eosink/eosink/sink/plugin"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationsTable is the golang-migrate version table of the cdc plugin's migrations.
const MigrationsTable = "eosink_cdc_schema_migrations"

func init() {
	plugin.RegisterConfig("cdc", func(cfg plugin.Config, c Config) (*CDC, error) {
		c.SchemaRegistry = cfg.SchemaRegistry
		if c.PositionsSchema == "" {
			c.PositionsSchema = cfg.Schema
		}
		c.PipelineSchema = cfg.Schema
		p, err := New(c)
		if err != nil {
			return nil, err
		}
		p.pipeline = cfg.Pipeline
		if cfg.Logger != nil {
			p.log = cfg.Logger
		}
		return p, nil
	})
}

// CDC is the plugin that applies Debezium change events to replica tables.
type CDC struct {
	c          Config
	rs         routes
	cf         confinement
	avro       bool
	dec        *schemaformat.Decoder
	log        *slog.Logger
	positions  string // quoted schema.cdc_positions
	marks      string // quoted schema.cdc_source_marks (rewind.go)
	marksSQL   string
	watermarks string // quoted schema.cdc_tx_watermarks (sequence.go)
	pipeline   string // the pipeline's name, the first column of marks

	mu      sync.Mutex
	targets map[string]*target // by quoted name

	stages stage.Sessions // each session's staging tables (stage.go)
	lag    *sourceLag     // the source lag gauges (sourcelag.go)

	tombstones, truncates atomic.Int64
}

// Stats counts what the plugin skipped on purpose.
type Stats struct {
	Tombstones       int64 // null values (after a delete), skipped
	TruncatesSkipped int64 // truncate events skipped because truncate is off
}

// Stats returns the plugin's counters.
func (p *CDC) Stats() Stats {
	return Stats{Tombstones: p.tombstones.Load(), TruncatesSkipped: p.truncates.Load()}
}

// New returns the cdc plugin for c. It does no I/O.
func New(c Config) (*CDC, error) {
	rs, err := c.routes()
	if err != nil {
		return nil, err
	}
	if c.PositionsSchema == "" {
		c.PositionsSchema = sink.DefaultSchema
	}
	if c.PipelineSchema == "" {
		c.PipelineSchema = sink.DefaultSchema
	}
	cf, err := newConfinement(&c, rs)
	if err != nil {
		return nil, err
	}
	p := &CDC{c: c, rs: rs, cf: cf, log: slog.Default(), targets: map[string]*target{}, lag: newSourceLag(),
		positions:  pgx.Identifier{c.PositionsSchema, "cdc_positions"}.Sanitize(),
		marks:      pgx.Identifier{c.PositionsSchema, "cdc_source_marks"}.Sanitize(),
		watermarks: pgx.Identifier{c.PositionsSchema, "cdc_tx_watermarks"}.Sanitize()}
	p.marksSQL = marksSQL(p.marks)
	switch c.Format {
	case "", "json":
	case "avro":
		if c.SchemaRegistry == nil {
			return nil, errors.New("format: avro needs the pipeline's schema_registry section (its url at least)")
		}
		if p.dec, err = mapping.NewDecoder(c.SchemaRegistry); err != nil {
			return nil, fmt.Errorf("schema_registry: %w", err)
		}
		p.avro = true
	default:
		return nil, fmt.Errorf("format: %q is not json or avro", c.Format)
	}
	switch c.DecimalHandling {
	case "", DecimalPrecise, DecimalString, DecimalDouble:
	default:
		return nil, fmt.Errorf("decimal_handling: %q is not %s, %s or %s (the connector's decimal.handling.mode)",
			c.DecimalHandling, DecimalPrecise, DecimalString, DecimalDouble)
	}
	switch c.Consistency {
	case "", ConsistencyPartition:
		if c.TransactionTopic != "" {
			return nil, fmt.Errorf("transaction_topic: read only with consistency: %s", ConsistencyTransaction)
		}
	case ConsistencyTransaction:
		if c.TransactionTopic == "" {
			return nil, fmt.Errorf("consistency: %s needs transaction_topic, the connector's <topic.prefix>.transaction "+
				"(written with provide.transaction.metadata=true)", ConsistencyTransaction)
		}
	default:
		return nil, fmt.Errorf("consistency: %q is not %s or %s", c.Consistency, ConsistencyPartition, ConsistencyTransaction)
	}
	if c.MaxHeldEvents < 0 || c.MaxHeldBytes < 0 {
		return nil, errors.New("max_held_events and max_held_bytes: must not be negative (0 takes the default)")
	}
	if c.LeaseTimeout != nil && *c.LeaseTimeout < time.Second {
		return nil, fmt.Errorf("lease_timeout: %s is below 1s", *c.LeaseTimeout)
	}
	if c.IncompleteAfter != nil && *c.IncompleteAfter < time.Second {
		return nil, fmt.Errorf("incomplete_after: %s is below 1s", *c.IncompleteAfter)
	}
	switch c.Evolve {
	case "", EvolveAddColumns:
	default:
		return nil, fmt.Errorf("evolve: %q is not %s (the only evolution; columns are never dropped or retyped)", c.Evolve, EvolveAddColumns)
	}
	return p, nil
}

// The cdc plugin's batch defaults (sink.BatchDefaulter), for a pipeline that leaves
// batch.max_records and batch.max_bytes unset: a batch's cost is mostly its merge's
// statements, per target table, whatever their size, so larger batches than the sink's
// 500 records and 4 MiB apply more changes per statement (docs/benchmarks.md, "Change
// events"). With these bytes the sink's per-partition buffer defaults to twice them, 16
// MiB (sink.Config.MaxBufferedBytes): a batch in flight and the next one.
const (
	DefaultBatchRecords = 5000
	DefaultBatchBytes   = 8 << 20
)

// BatchDefaults returns DefaultBatchRecords and DefaultBatchBytes (sink.BatchDefaulter).
func (p *CDC) BatchDefaults() (records, bytes int) { return DefaultBatchRecords, DefaultBatchBytes }

// ReplayNotes (sink.ReplayNoter): the positions keep a replay from moving a row back.
func (p *CDC) ReplayNotes() []string {
	return []string{"cdc: a replay applies no change older than or as new as the row's stored position (cdc_positions): it rewrites nothing already applied"}
}

// Migrations returns the positions table's migrations.
func (p *CDC) Migrations() []sink.Migrations {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err)
	}
	return []sink.Migrations{{Name: "cdc", FS: sub, Schema: p.c.PositionsSchema, Table: MigrationsTable}}
}

// Prepare checks the positions table, and the target of every per-table override whose
// name has no variable: that it exists (unless Create is set) and has a primary key.
func (p *CDC) Prepare(ctx context.Context, db sink.DB) error {
	var ok bool
	tables := []string{p.positions, intPositions(p.positions), loadFloors(p.positions), p.marks}
	if p.sequenced() {
		tables = append(tables, p.watermarks)
	}
	for _, table := range tables {
		if err := db.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("cdc: %s does not exist: run `eosink migrate up -config FILE`, or set database.auto_migrate: true", table)
		}
	}
	for st, r := range p.rs.byST {
		id := r.tmpl.render("", "", "", "")
		if id.Sanitize() != r.tmpl.render("x", "x", "x", "x").Sanitize() {
			continue // depends on the event
		}
		if _, err := p.target(ctx, db, id, id.Sanitize(), r, nil); err != nil && !(p.c.Create && errors.Is(err, errNoTable)) {
			return fmt.Errorf("tables.%s: %w", st, err)
		}
	}
	return nil
}

// target returns the replica table id, reading its catalog on first use (see reload).
func (p *CDC) target(ctx context.Context, db sink.DB, id pgx.Identifier, name string, r route, local map[string]*target) (*target, error) {
	p.mu.Lock()
	t := p.targets[name]
	p.mu.Unlock()
	if t != nil {
		return t, nil
	}
	return p.reload(ctx, db, id, r, local)
}

// reload reads the table's catalog again. A target without the DDL of db's open
// transaction replaces the cached one, for every partition; one with it (an earlier Write
// of the same transaction, in a savepoint, made it) goes to local, the Write's own (nil in
// Prepare), and is never cached: the transaction may still roll back.
func (p *CDC) reload(ctx context.Context, db sink.DB, id pgx.Identifier, r route, local map[string]*target) (*target, error) {
	t, mine, err := loadTarget(ctx, db, id, r, p.positions)
	if err != nil {
		return nil, err
	}
	for _, c := range t.cols {
		if strings.HasPrefix(c, reservedColumnPrefix) {
			return nil, fmt.Errorf("cdc: target table %s: column %q begins with %s, which eosink's staging columns use: rename it or exclude it", t.name, c, reservedColumnPrefix)
		}
	}
	p.mu.Lock()
	if mine {
		delete(p.targets, t.name)
	} else {
		p.targets[t.name] = t
	}
	p.mu.Unlock()
	if mine && local != nil {
		local[t.name] = t
	}
	return t, nil
}

// resolve returns the target of ev (table id), for a Write: the one whose DDL this
// Write's transaction ran, else the cached one, else the catalog's; with Create, a
// missing table is created. For an event with an after image, a replicated field without
// a column makes it read the catalog again (another partition, or an operator, may have
// added it) and then, with Evolve, add the column.
func (p *CDC) resolve(ctx context.Context, tx pgx.Tx, ro *routed, ev *event, local map[string]*target) (*target, error) {
	id, name, r := ro.id, ro.name, ro.rt
	t := local[name]
	if t == nil {
		var err error
		t, err = p.target(ctx, tx, id, name, r, local)
		if errors.Is(err, errNoTable) && p.c.Create {
			if ev.op == "t" {
				return nil, fmt.Errorf("cdc: truncate of %s, which does not exist: create: true creates a table from a change event with a key, not from a truncate", name)
			}
			if t, err = p.create(ctx, tx, id, r, ev); err != nil {
				return nil, err
			}
			local[name] = t
		}
		if err != nil {
			return nil, err
		}
	}
	missing := t.missing(ev.after)
	if len(missing) == 0 {
		return t, nil
	}
	if local[name] == nil {
		fresh, err := p.reload(ctx, tx, id, r, local)
		if err != nil {
			return nil, err
		}
		t, missing = fresh, fresh.missing(ev.after)
	}
	if len(missing) == 0 || p.c.Evolve != EvolveAddColumns {
		return t, nil // a field left without a column is poison (stagedTable.add)
	}
	t, err := p.addColumns(ctx, tx, id, t, ev, missing)
	if err != nil {
		return nil, err
	}
	local[name] = t
	return t, nil
}

// Open does nothing: the plugin's per-partition state (the source lag, sourcelag.go)
// begins at the partition's first commit.
func (p *CDC) Open(context.Context, sink.Partition) error { return nil }

// Close drops the partition's source lag gauges: it has left this instance.
func (p *CDC) Close(_ context.Context, part sink.Partition) error {
	p.lag.forget(sink.Partition{Topic: part.Topic, Partition: part.Partition})
	return nil
}

// Write applies the batch's change events: grouped by target table, staged with COPY and
// merged with one statement per table. A truncate (when enabled) first applies the changes
// before it.
func (p *CDC) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	if p.sequenced() {
		return errNotSequenced
	}
	return p.write(ctx, tx, b, nil)
}

// write is Write, with the batch's events decoded already when evs is not nil (evs[i] is
// b.Records[i]'s). The records may be of several partitions (a group of source
// transactions, sequence.go), each partition's in offset order: the rewind check keeps a
// watch per partition.
func (p *CDC) write(ctx context.Context, tx pgx.Tx, b sink.Batch, evs []*event) error {
	local := map[string]*target{} // targets with this transaction's DDL (create, evolve)
	ws := watches{}               // the source rewind check (rewind.go), per partition
	rs := routings{}              // where each source table's events go
	pending := map[string]*stagedTable{}
	var order []string
	var marks *riderMarks // the source marks, when they travel with the first merge
	flush := func() error {
		if len(order) == 0 {
			return nil
		}
		reads, err := ws.resnapshot(ctx, tx, p)
		if err != nil {
			return err
		}
		for _, name := range order {
			if err := pending[name].apply(ctx, tx, reads, marks); err != nil {
				if ue := (*errUnavailable)(nil); errors.As(err, &ue) && ue.ord/2 < len(b.Records) {
					return sink.Poison(&b.Records[ue.ord/2], ue)
				}
				if sd := (*errSnapshotDiffers)(nil); errors.As(err, &sd) && sd.ord/2 < len(b.Records) {
					r := &b.Records[sd.ord/2]
					s := ws.of(r).at(r.Offset)
					return sd.rewoundAt(r, s.lsn, s.ts)
				}
				return err
			}
		}
		clear(pending)
		order = order[:0]
		return nil
	}
	for i := range b.Records {
		r := &b.Records[i]
		if r.Value == nil {
			p.tombstones.Add(1)
			continue
		}
		var ev *event
		if evs != nil {
			ev = evs[i]
		} else {
			var err error
			if ev, err = p.decode(r); err != nil {
				return err
			}
		}
		ro := rs.of(p, ev, r.Topic)
		if ro.err != nil {
			return sink.Poison(r, ro.err) // before w.see: a refused event moves no source mark
		}
		ws.of(r).see(r, ev)
		switch ev.op {
		case "t":
			if !p.c.Truncate {
				p.truncates.Add(1)
				p.log.Info("cdc: truncate event skipped (truncate: false)", "source", ev.schema+"."+ev.table,
					"topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
				continue
			}
			if err := flush(); err != nil {
				return err
			}
			t, err := p.resolve(ctx, tx, ro, ev, local)
			if err != nil {
				return poisonIfRefused(r, err)
			}
			if err := t.truncate(ctx, tx, ev); err != nil {
				return err
			}
			continue
		case "c", "r", "u", "d":
		default:
			return sink.Poison(r, fmt.Errorf("cdc: unknown op %q", ev.op))
		}
		if r.Key == nil {
			return sink.Poison(r, fmt.Errorf("cdc: source table %s.%s has no primary key (the change event's key is null); "+
				"the cdc plugin applies changes by primary key: give the table one, or set Debezium's message.key.columns", ev.schema, ev.table))
		}
		t, err := p.resolve(ctx, tx, ro, ev, local)
		if err != nil {
			return poisonIfRefused(r, err)
		}
		st := pending[t.name]
		if st != nil && st.t != t {
			// The table changed (a column added): apply what was staged with its old shape.
			if err := flush(); err != nil {
				return err
			}
			st = nil
		}
		if st == nil {
			st = &stagedTable{t: t, stages: &p.stages}
			pending[t.name] = st
			order = append(order, t.name)
		}
		if err := st.add(ev, i); err != nil {
			if amb := (*AmbiguousDecimalError)(nil); errors.As(err, &amb) {
				return fmt.Errorf("%s[%d]@%d: %w", r.Topic, r.Partition, r.Offset, err) // stops the partition
			}
			return sink.Poison(r, err)
		}
	}
	// The marks are recorded and checked before the merges (check), or, in a batch without
	// snapshot reads, in the first merge's round trip (riding); if no merge sent them (the
	// batch loaded, or staged nothing), after.
	if len(order) > 0 && ws.riding() {
		marks = &riderMarks{ws: &ws, p: p}
	} else if err := ws.check(ctx, tx, p); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	if marks != nil && !marks.sent {
		if err := ws.check(ctx, tx, p); err != nil {
			return err
		}
	}
	p.noteWritten(&ws) // the source lag, made the applied one at COMMIT (sourcelag.go)
	return nil
}

// decode decodes a record's key and value. Its errors sort as mapping.RecordError says: a
// registry that cannot be reached is transient (the engine rolls the batch back and retries
// it: nothing is skipped), a registry's refusal stops the partition, anything else about
// the record (an unknown schema id, bytes that do not decode) makes it poison.
func (p *CDC) decode(r *sink.Record) (*event, error) {
	ev, err := p.decodeOnce(r)
	if err != nil {
		return nil, mapping.RecordError(r, fmt.Errorf("cdc: %w", err))
	}
	return ev, nil
}

func (p *CDC) decodeOnce(r *sink.Record) (*event, error) {
	var ev *event
	if p.avro {
		msg, err := p.dec.Decode(schemaformat.Avro, r.Value)
		if err != nil {
			return nil, err
		}
		if ev, err = decodeAvroValue(&msg); err != nil {
			return nil, err
		}
		if r.Key != nil {
			km, err := p.dec.Decode(schemaformat.Avro, r.Key)
			if err != nil {
				return nil, fmt.Errorf("key: %w", err)
			}
			if ev.key, err = avroImage(&km, km.Value, ""); err != nil {
				return nil, err
			}
			ev.keyMsg = &km
		}
		return ev, nil
	}
	ev, err := decodeJSONValue(r.Value)
	if err != nil {
		return nil, err
	}
	if r.Key != nil {
		if ev.key, ev.keySchema, err = decodeJSONKey(r.Key); err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
	}
	return ev, nil
}
