package table

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/mapping"
)

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
	errs := compileFilter(&m, c.Where, c.Check)
	for _, name := range cols {
		col, problems := columns[name].spec().Column(name, "columns."+name)
		for _, p := range problems {
			errs = append(errs, p)
		}
		if len(problems) == 0 {
			m.Columns = append(m.Columns, col)
		}
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

// compileFilter compiles where and check into m's Where and Checks; the errors name the
// option ("where: ...", "check[1].expr: ...").
func compileFilter(m *mapping.Mapping, where string, check []Check) []error {
	var errs []error
	if where != "" {
		e, err := mapping.CompileCondition(where)
		if err != nil {
			errs = append(errs, fmt.Errorf("where: %w", err))
		}
		m.Where = e
	}
	for i, c := range check {
		path := fmt.Sprintf("check[%d]", i)
		for _, p := range c.problems {
			field := path
			if p.Key != "" {
				field += "." + p.Key
			}
			errs = append(errs, fmt.Errorf("%s: %s", field, p.Reason))
		}
		if len(c.problems) > 0 {
			continue
		}
		e, err := mapping.CompileCondition(c.Expr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.expr: %w", path, err))
			continue
		}
		m.Checks = append(m.Checks, mapping.Check{Expr: e, Message: c.Message})
	}
	return errs
}

func quoteAll(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = pgx.Identifier{c}.Sanitize()
	}
	return strings.Join(q, ", ")
}

// readsValue reports whether some column, the where or a check reads the record's value.
func (w *writer) readsValue() bool { return w.m.ReadsValue() }

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
