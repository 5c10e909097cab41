package table

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/mapping"
)

// Config configures the table plugin.
type Config struct {
	// Table is the target, "table" or "schema.table", of every topic no route takes.
	// ${topic} in it is replaced by the record's topic (in a pipeline config file write
	// $${topic}). Required unless Routes is set; without it, a topic no route takes has no
	// route, which the sink refuses (sink.TopicRouter).
	Table string `yaml:"table"`
	// Columns maps each column to a source expression (see package doc). Required, unless
	// every route has its own.
	Columns map[string]Column `yaml:"columns"`
	// Routes send topics to tables of their own, tried in order before Table. Defaults to
	// none: every topic goes to Table.
	Routes []Route `yaml:"routes"`
	// KeyFormat and ValueFormat say how key and value decode: json, string, bytes, avro,
	// protobuf or json_schema. Default to string and json.
	KeyFormat   string `yaml:"key_format"`
	ValueFormat string `yaml:"value_format"`
	// SchemaRegistry is where the avro, protobuf and json_schema formats find their
	// schemas; required for them. From a config file it is the pipeline's schema_registry
	// section (sink.PluginConfig.SchemaRegistry).
	SchemaRegistry *sink.SchemaRegistry `yaml:"-"`
	// Create creates a missing table, in the transaction of the first batch that writes to
	// it, with the mapped columns typed from the registry schema of the batch's first
	// record that decodes (paths into avro keys and values; see mapping.ColumnTypes), and
	// for upsert its key as primary key. Defaults to false: a missing table fails Prepare.
	Create bool `yaml:"create"`
	// OnConflict is for the table plugin: "error", a row breaking a unique key is a data
	// error (poison), or "nothing", such a row is skipped (the first record of a key in a
	// batch is inserted) and counted as skipped (sink.Skipped), for example when records
	// are replayed into a table with a unique key. With nothing the batch is copied into a
	// temporary table and inserted with one INSERT ... ON CONFLICT DO NOTHING. Defaults to
	// error. In a config file it is the table section's on_conflict; the upsert plugin has
	// its own (UpsertConfig.OnConflict).
	OnConflict string `yaml:"-"`
}

// Column is one column's source. In a config file it is a string (the source expression) or
// a map {from: EXPR, required: BOOL, cast: NAME, default: TEXT}.
type Column struct {
	From     string `yaml:"from"`
	Required bool   `yaml:"required"`
	// Cast converts the value: epoch_s, epoch_ms, epoch_us or rfc3339 to timestamptz,
	// base64 to bytea, json (a string holding JSON) to jsonb; see mapping.Cast. Defaults to
	// none: the value as it is.
	Cast string `yaml:"cast"`
	// Default is the value when the source finds nothing (an absent field or header, a null
	// key or value); an explicit null stays NULL. It goes through Cast. Not with Required.
	// Defaults to nil: NULL.
	Default *string `yaml:"default"`

	problems []problem // what UnmarshalYAML refused, reported by New with the column's path
}

// problem is a key of a column's map ("" for the column itself) and why it was refused.
type problem struct{ key, reason string }

// UnmarshalYAML accepts "value.x" or {from: value.x, required: true, cast: epoch_ms,
// default: "0"}. It refuses nothing itself: each problem is kept and reported by New,
// with the column's path, together with every other problem of the section.
func (c *Column) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err == nil {
		c.From = s
		return nil
	}
	var m map[string]any
	if err := unmarshal(&m); err != nil {
		c.problems = append(c.problems, problem{"", "a column is a source expression or {from: EXPR, required: BOOL, cast: NAME, default: TEXT}"})
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "from":
			s, ok := v.(string)
			if !ok {
				c.problems = append(c.problems, problem{k, "want a source expression"})
			}
			c.From = s
		case "required":
			b, ok := v.(bool)
			if !ok {
				c.problems = append(c.problems, problem{k, "want true or false"})
			}
			c.Required = b
		case "cast":
			s, ok := v.(string)
			if !ok {
				c.problems = append(c.problems, problem{k, "want one of epoch_s, epoch_ms, epoch_us, rfc3339, base64, json"})
			}
			c.Cast = s
		case "default":
			switch v := v.(type) {
			case string:
				c.Default = &v
			case bool, int, int64, uint64, float64:
				d := fmt.Sprint(v)
				c.Default = &d
			case nil:
				c.problems = append(c.problems, problem{k, "null is no default (a missing value is NULL without one); leave it out"})
			default:
				c.problems = append(c.problems, problem{k, "want a scalar, the value in the column's text form"})
			}
		default:
			c.problems = append(c.problems, problem{k, "unknown key in a column (want from, required, cast, default)"})
		}
	}
	return nil
}

// tableSection is the table plugin's config section: Config and on_conflict.
type tableSection struct {
	Config     `yaml:",inline"`
	OnConflict string `yaml:"on_conflict"`
}

func init() {
	sink.RegisterConfig("table", func(pc sink.PluginConfig, c tableSection) (*Table, error) {
		c.Config.SchemaRegistry = pc.SchemaRegistry
		c.Config.OnConflict = c.OnConflict
		return New(c.Config)
	})
}

// Table is the insert plugin.
type Table struct {
	r          *router[*tableTarget]
	onConflict string
}

// tableTarget is one target table with its row mapping.
type tableTarget struct {
	w   *writer
	row rowFunc // nil for a plain insert: the writer encodes with mapping.AppendCopy

	// With on_conflict: nothing, the batch goes through a staging table.
	stage, stageSQL, copySQL, insertSQL string
}

// New returns the table plugin for c.
func New(c Config) (*Table, error) {
	for i, r := range c.Routes {
		if len(r.Key) > 0 {
			return nil, fmt.Errorf("routes[%d].key: only the upsert plugin has key columns", i)
		}
	}
	switch c.OnConflict {
	case "":
		c.OnConflict = "error"
	case "error", "nothing":
	default:
		return nil, fmt.Errorf("on_conflict: %q is not error or nothing", c.OnConflict)
	}
	r, err := newRouter(c, nil, func(r *route, table pgx.Identifier) (*tableTarget, error) {
		if c.OnConflict == "nothing" {
			return newSkipTarget(c, table, r.spec.Columns)
		}
		w, err := newWriter(c, table, r.spec.Columns, nil)
		if err != nil {
			return nil, err
		}
		return &tableTarget{w: w}, nil // row nil: encode's AppendCopy path
	})
	if err != nil {
		return nil, err
	}
	return &Table{r: r, onConflict: c.OnConflict}, nil
}

// CheckTopic reports whether a route or the default table takes topic (sink.TopicRouter).
func (t *Table) CheckTopic(topic string) error { return t.r.CheckTopic(topic) }

// RouteSummary lists the routes, one "topic -> table" line each, in the order they are tried,
// noting on_conflict: nothing.
func (t *Table) RouteSummary() []string {
	lines := t.r.summary()
	if t.onConflict == "nothing" {
		for i := range lines {
			lines[i] += " (on conflict: nothing)"
		}
	}
	return lines
}

// Prepare checks that the tables whose names have no variable, and their columns, exist
// (with Create, a missing table is created by its first batch). A table named after the
// topic is checked when its first batch is written.
func (t *Table) Prepare(ctx context.Context, db sink.DB) error {
	return prepareAll(ctx, t.r, func(ctx context.Context, tt *tableTarget) error {
		_, err := tt.w.prepare(ctx, db)
		return err
	})
}

// Open does nothing: the plugin keeps no per-partition state.
func (t *Table) Open(context.Context, sink.Partition) error { return nil }

// Close does nothing.
func (t *Table) Close(context.Context, sink.Partition) error { return nil }

// Write copies one row per record into the batch's topic's table.
func (t *Table) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	tt, err := t.r.target(b.Topic)
	if err != nil {
		return err
	}
	buf, err := tt.w.rows(ctx, tx, b.Records, tt.row)
	if err != nil || buf == nil {
		return err
	}
	if tt.stage == "" {
		return tt.w.copyIn(ctx, tx, buf, tt.w.copySQL, b.Records)
	}
	if _, err := tx.Exec(ctx, tt.stageSQL); err != nil {
		return fmt.Errorf("table: staging table: %w", err)
	}
	if err := tt.w.copyIn(ctx, tx, buf, tt.copySQL, b.Records); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, tt.insertSQL)
	if err != nil {
		return err
	}
	sink.Skipped(ctx, len(b.Records)-int(tag.RowsAffected()))
	return nil
}

// newSkipTarget is a target of on_conflict: nothing: each batch is copied into a temporary
// table (one per session and column set, emptied at commit) and inserted from there in
// offset order with ON CONFLICT DO NOTHING, so that a row breaking a unique key (a stored
// one, or an earlier record of the batch) is skipped.
func newSkipTarget(c Config, table pgx.Identifier, columns map[string]Column) (*tableTarget, error) {
	w, err := newWriter(c, table, columns, []string{ordCol})
	if err != nil {
		return nil, err
	}
	insert := w.insertRow(w.readsValue())
	tt := &tableTarget{w: w, row: func(r *sink.Record, row []any) ([]any, error) {
		row, err := insert(r, row)
		if err != nil {
			return nil, err
		}
		return append(row, strconv.FormatInt(r.Offset, 10)), nil
	}}
	h := fnv.New64a()
	h.Write([]byte(w.table.Sanitize() + " " + strings.Join(w.cols, ",")))
	tt.stage = pgx.Identifier{fmt.Sprintf("eosink_tstage_%x", h.Sum64())}.Sanitize()
	cols, ord := quoteAll(w.cols), pgx.Identifier{ordCol}.Sanitize()
	tt.stageSQL = fmt.Sprintf("CREATE TEMP TABLE IF NOT EXISTS %s ON COMMIT DELETE ROWS AS SELECT %s, 0::bigint AS %s FROM %s WITH NO DATA",
		tt.stage, cols, ord, w.table.Sanitize())
	tt.copySQL = fmt.Sprintf("COPY %s (%s, %s) FROM STDIN", tt.stage, cols, ord)
	tt.insertSQL = fmt.Sprintf(`WITH staged AS (DELETE FROM %s RETURNING *)
INSERT INTO %s (%s) SELECT %s FROM staged ORDER BY %s ON CONFLICT DO NOTHING`, tt.stage, w.table.Sanitize(), cols, cols, ord)
	return tt, nil
}

// writer is what table and upsert share: the mapping, the column types and COPY encoding.
type writer struct {
	name    string // as configured, for messages
	table   pgx.Identifier
	m       mapping.Mapping
	cols    []string // mapped columns, sorted
	extra   []string // upsert's staging columns, appended to each row
	copySQL string   // COPY ... FROM STDIN into table (table plugin)

	create bool     // Config.Create
	key    []string // primary key of a created table (upsert's key)

	mu     sync.Mutex
	loaded bool
	bytea  []bool // per column of cols+extra
	types  map[string]string
}

// errNoTable: the table does not exist.
var errNoTable = errors.New("does not exist")

// newWriter returns the writer of table with columns, in c's formats.
func newWriter(c Config, table pgx.Identifier, columns map[string]Column, extra []string) (*writer, error) {
	if len(columns) == 0 {
		return nil, errors.New("columns: at least one column is required")
	}
	var err error
	m := mapping.Mapping{Key: mapping.String, Value: mapping.JSON}
	if c.KeyFormat != "" {
		if m.Key, err = mapping.ParseFormat(c.KeyFormat); err != nil {
			return nil, fmt.Errorf("key_format: %w", err)
		}
	}
	if c.ValueFormat != "" {
		if m.Value, err = mapping.ParseFormat(c.ValueFormat); err != nil {
			return nil, fmt.Errorf("value_format: %w", err)
		}
	}
	if err := m.SetDecoder(c.SchemaRegistry, "key_format", "value_format"); err != nil {
		return nil, err
	}
	cols := slices.Sorted(maps.Keys(columns))
	var errs []error
	for _, name := range cols {
		spec := columns[name]
		bad := len(errs)
		refused := map[string]bool{}
		for _, p := range spec.problems {
			refused[p.key] = true
			path := "columns." + name
			if p.key != "" {
				path += "." + p.key
			}
			errs = append(errs, fmt.Errorf("%s: %s", path, p.reason))
		}
		src, err := mapping.ParseSource(spec.From)
		if err != nil && !refused[""] && !refused["from"] {
			errs = append(errs, fmt.Errorf("columns.%s.from: %w", name, err))
		}
		cast, err := mapping.ParseCast(spec.Cast)
		if err != nil && !refused["cast"] {
			errs = append(errs, fmt.Errorf("columns.%s.cast: %w", name, err))
		}
		if d := spec.Default; d != nil && !refused["default"] {
			if spec.Required {
				errs = append(errs, fmt.Errorf("columns.%s.default: a default and required: true exclude each other (required refuses what the default fills in)", name))
			} else if err == nil {
				if err := cast.Check(*d); err != nil {
					errs = append(errs, fmt.Errorf("columns.%s.default: %w", name, err))
				}
			}
		}
		if len(errs) > bad {
			continue
		}
		m.Columns = append(m.Columns, mapping.Column{Name: name, From: src, Required: spec.Required, Cast: cast, Default: spec.Default})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	w := &writer{name: strings.Join(table, "."), table: table, m: m, cols: cols, extra: extra, create: c.Create}
	w.copySQL = fmt.Sprintf("COPY %s (%s) FROM STDIN", table.Sanitize(), quoteAll(cols))
	return w, nil
}

func quoteAll(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = pgx.Identifier{c}.Sanitize()
	}
	return strings.Join(q, ", ")
}

// readsValue reports whether some column reads the record's value.
func (w *writer) readsValue() bool {
	for _, c := range w.m.Columns {
		if c.From.Side() == "value" {
			return true
		}
	}
	return false
}

// load reads the table's column types once, and checks the mapped columns exist; it
// returns the bytea flag of each column of cols+extra. A table that holds DDL of db's open
// transaction (create: the transaction holds its ACCESS EXCLUSIVE lock) is read for this
// call only, never kept: the transaction may still roll back.
func (w *writer) load(ctx context.Context, db sink.DB) ([]bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.loaded {
		return w.bytea, nil
	}
	var exists, mine bool
	if err := db.QueryRow(ctx, `SELECT c IS NOT NULL, c IS NOT NULL AND EXISTS (SELECT 1 FROM pg_locks
  WHERE pid = pg_backend_pid() AND locktype = 'relation' AND relation = c AND mode = 'AccessExclusiveLock' AND granted)
FROM to_regclass($1) c`, w.table.Sanitize()).Scan(&exists, &mine); err != nil {
		return nil, fmt.Errorf("table %s: %w", w.name, err)
	}
	if !exists {
		return nil, fmt.Errorf("table %s %w", w.name, errNoTable)
	}
	rows, err := db.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped`, w.table.Sanitize())
	if err != nil {
		return nil, fmt.Errorf("table %s: read columns: %w", w.name, err)
	}
	types := map[string]string{}
	var name, typ string
	if _, err := pgx.ForEachRow(rows, []any{&name, &typ}, func() error { types[name] = typ; return nil }); err != nil {
		return nil, fmt.Errorf("table %s: read columns: %w", w.name, err)
	}
	var missing []string
	bytea := make([]bool, 0, len(w.cols)+len(w.extra))
	for i, c := range w.cols {
		t, ok := types[c]
		if !ok {
			missing = append(missing, c)
		}
		bytea = append(bytea, t == "bytea")
		// An array from a schema'd format goes to an array column as an array literal.
		// (Written only when it changes: a created table has no array column.)
		if array := strings.HasSuffix(t, "[]"); w.m.Columns[i].Array != array {
			w.m.Columns[i].Array = array
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("table %s has no column %s", w.name, strings.Join(missing, ", "))
	}
	for range w.extra {
		bytea = append(bytea, false)
	}
	if !mine {
		w.types, w.bytea, w.loaded = types, bytea, true
	}
	return bytea, nil
}

// prepare is load for Prepare: with create, a missing table is fine (created later).
func (w *writer) prepare(ctx context.Context, db sink.DB) (exists bool, err error) {
	if _, err := w.load(ctx, db); err != nil {
		if w.create && errors.Is(err, errNoTable) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// createTable creates the table in tx with the mapped columns, typed from the first record
// of recs whose schema gives them all (mapping.ColumnTypes), and w.key as primary key,
// after an advisory lock on the table's name held to the end of tx: writers creating the
// same table queue, and the later ones find it there (IF NOT EXISTS). A column without a
// type in the schema (a path into a json side, a field the schema lacks) stops the
// partition: types are never guessed. A registry that cannot be reached is transient.
func (w *writer) createTable(ctx context.Context, tx pgx.Tx, recs []sink.Record) error {
	var types []string
	var first error
	for i := range recs {
		t, err := w.m.ColumnTypes(&recs[i])
		if err == nil {
			types = t
			break
		}
		var rc *mapping.RegistryConfigError
		if rerr := mapping.RecordError(&recs[i], err); errors.Is(rerr, sink.ErrTransient) || errors.As(rerr, &rc) {
			return rerr
		}
		if errors.Is(err, mapping.ErrUntyped) {
			return fmt.Errorf("create table %s: %w", w.name, err)
		}
		if first == nil {
			first = err
		}
	}
	if types == nil {
		return fmt.Errorf("create table %s: no record of the batch decodes: %w", w.name, first)
	}
	defs := make([]string, 0, len(w.cols)+1)
	for i, c := range w.cols {
		defs = append(defs, pgx.Identifier{c}.Sanitize()+" "+types[i])
	}
	if len(w.key) > 0 {
		defs = append(defs, "PRIMARY KEY ("+quoteAll(w.key)+")")
	}
	name := w.table.Sanitize()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "eosink.table.ddl "+name); err != nil {
		return fmt.Errorf("create table %s: lock: %w", w.name, err)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", name, strings.Join(defs, ", "))); err != nil {
		return fmt.Errorf("create table %s: %w", w.name, err)
	}
	return nil
}
