package cdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file is the online drift check (eosink cdc verify): Verify compares each source table
// with its replica while both run. verifychunk.go reads and compares the chunks and
// re-checks the keys that differ.

// Verify defaults.
const (
	DefaultVerifyChunkSize = 1000
	DefaultVerifyWait      = 30 * time.Second
)

// Begin starts a transaction: a *pgxpool.Pool or a *pgx.Conn. Verify reads each chunk in a
// transaction of its own, with the session settings that fix the text of values pinned in it
// (TimeZone UTC, DateStyle ISO, IntervalStyle postgres, extra_float_digits 1, bytea_output
// hex, lc_monetary C), so the two databases' settings never show as differences.
type Begin interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Tables are the source tables to check, as "schema.table". Defaults to the tables of
	// the source's publications (Debezium's pgoutput publication) and the keys of
	// Config.Tables.
	Tables []string
	// ChunkSize is how many keys of the source one chunk holds. Defaults to 1000
	// (DefaultVerifyChunkSize).
	ChunkSize int
	// Wait bounds the re-check of the keys that differ: how long to wait for the replica to
	// apply the source's changes up to the source's LSN at the time of reading. A difference
	// still there, stable on the source, after the replica passed that LSN or after Wait, is
	// reported. Defaults to 30s (DefaultVerifyWait).
	Wait time.Duration
	// TopicPrefix is Debezium's topic.prefix, needed only when a table template uses
	// ${topic} (the topic is TopicPrefix.schema.table).
	TopicPrefix string
	// Progress, when set, is called after every ProgressEvery chunks of a table, and once at
	// its end.
	Progress      func(table string, chunks, rows int64)
	ProgressEvery int // Defaults to 100.
}

// DiffKind says how a replica row differs from its source row.
type DiffKind string

// The kinds of difference.
const (
	Missing   DiffKind = "missing"   // in the source, not in the replica
	Extra     DiffKind = "extra"     // in the replica, not in the source
	Different DiffKind = "different" // in both, with other values in a replicated column
)

// Difference is one row of a replica that differs from its source.
type Difference struct {
	Table  string   // the source table, schema.table
	Target string   // the replica table, quoted
	Key    []string // the primary key's values as text, in the key's order
	Kind   DiffKind
	// Unsettled is set when the replica did not pass the source's LSN within Wait: the row
	// still differed and the source's row did not change meanwhile, but the replica may be
	// behind (or the source quiet).
	Unsettled bool
}

// TableReport is the result for one table.
type TableReport struct {
	Table, Target string
	KeyColumns    []string // the primary key's columns, in order
	Columns       []string // the columns compared (the replicated ones)
	SourceRows    int64
	ReplicaRows   int64
	Missing       int
	Extra         int
	Different     int
	// Rechecked counts the keys that differed in a chunk and were in flight: equal on a
	// re-check.
	Rechecked int
	// Err is why the table could not be compared (no primary key, no replica table, a
	// replicated column missing in the replica); it counts as a difference.
	Err error
}

// Differences returns the count of rows that differ, 1 more for a table that could not be
// compared.
func (r TableReport) Differences() int {
	n := r.Missing + r.Extra + r.Different
	if r.Err != nil {
		n++
	}
	return n
}

// VerifyReport is the result of Verify.
type VerifyReport struct {
	Tables      []TableReport
	Differences []Difference // in table order, then key order of the chunks
}

// Count returns the differences of every table (TableReport.Differences summed).
func (r *VerifyReport) Count() int {
	n := 0
	for _, t := range r.Tables {
		n += t.Differences()
	}
	return n
}

// ErrVerifyNoTables is returned by Verify when it has no table to check.
var ErrVerifyNoTables = errors.New("cdc verify: no tables to check: the source has no publication and the config no tables section; name them with -table schema.table")

// Verify compares the replica of each source table with the source, in chunks of
// ChunkSize keys in the source's key order: the source chunk's rows (an md5 of each
// replicated column's text) against the replica's rows in the same key range. A key that
// differs is re-checked after the replica has applied the source's changes up to the
// source's LSN at the time of reading (the largest lsn of the target's cdc_positions rows
// and load floor reaching it), so changes in flight are not reported. source is the source database,
// replica the pipeline's (where the replica tables and cdc_positions are). Only the
// replicated columns (include and exclude of the table's route) are compared; the target
// comes from the plugin's table template and tables overrides.
//
// The error is for what stops the whole check (a connection lost, no tables); a table that
// cannot be compared has its TableReport.Err. The report holds every difference found.
func (p *CDC) Verify(ctx context.Context, source, replica Begin, o VerifyOptions) (*VerifyReport, error) {
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultVerifyChunkSize
	}
	if o.Wait <= 0 {
		o.Wait = DefaultVerifyWait
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 100
	}
	tables := o.Tables
	var db string
	err := inTx(ctx, source, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
			return err
		}
		if len(tables) > 0 {
			return nil
		}
		rows, err := tx.Query(ctx, "SELECT DISTINCT schemaname || '.' || tablename FROM pg_publication_tables")
		if err != nil {
			return err
		}
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cdc verify: source: %w", err)
	}
	if len(o.Tables) == 0 {
		for st := range p.c.Tables {
			tables = append(tables, st)
		}
	}
	slices.Sort(tables)
	tables = slices.Compact(tables)
	if len(tables) == 0 {
		return nil, ErrVerifyNoTables
	}
	rep := &VerifyReport{}
	for _, st := range tables {
		v := &tableVerify{p: p, src: source, dst: replica, o: o, rep: TableReport{Table: st}}
		if err := v.run(ctx, db); err != nil {
			if ctx.Err() != nil || !errors.Is(err, errTable) {
				return rep, fmt.Errorf("cdc verify: %s: %w", st, err)
			}
			v.rep.Err = errors.Unwrap(err)
		}
		rep.Tables = append(rep.Tables, v.rep)
		rep.Differences = append(rep.Differences, v.diffs...)
	}
	return rep, nil
}

// errTable wraps what makes one table impossible to compare (tableErr).
var errTable = errors.New("table")

func tableErr(format string, args ...any) error {
	return fmt.Errorf("%w: %w", errTable, fmt.Errorf(format, args...))
}

// sessionSettings pins, for one transaction, the settings that change the text of values.
const sessionSettings = `SELECT set_config('TimeZone', 'UTC', true), set_config('DateStyle', 'ISO, YMD', true),
 set_config('IntervalStyle', 'postgres', true), set_config('extra_float_digits', '1', true),
 set_config('bytea_output', 'hex', true), set_config('lc_monetary', 'C', true)`

// inTx runs f in a read-only transaction with sessionSettings.
func inTx(ctx context.Context, db Begin, f func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "SET TRANSACTION READ ONLY"); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sessionSettings); err != nil {
		return err
	}
	return f(tx)
}

// vcolumn is a column's name and its type as format_type prints it.
type vcolumn struct{ name, typ string }

// resolve reads the source table's key and columns and the replica's, and fills v's.
func (v *tableVerify) resolve(ctx context.Context, db string) error {
	schema, table, ok := strings.Cut(v.rep.Table, ".")
	if !ok || schema == "" || table == "" {
		return tableErr("%q is not schema.table", v.rep.Table)
	}
	r := v.p.rs.lookup(schema, table)
	topic := v.o.TopicPrefix + "." + schema + "." + table
	if v.o.TopicPrefix == "" && slices.ContainsFunc(r.tmpl.parts, func(s string) bool { return strings.Contains(s, "${topic}") }) {
		return tableErr("the table template uses ${topic}: give Debezium's topic prefix (-topic-prefix)")
	}
	target := r.tmpl.render(db, schema, table, topic)
	v.srcName, v.dstName = pgx.Identifier{schema, table}, target
	v.rep.Target = target.Sanitize()
	var srcCols, dstCols []vcolumn
	var key []string
	err := inTx(ctx, v.src, func(tx pgx.Tx) error {
		var err error
		if srcCols, err = columns(ctx, tx, v.srcName.Sanitize()); err != nil {
			return err
		}
		key, err = primaryKey(ctx, tx, v.srcName.Sanitize())
		return err
	})
	if err != nil {
		return err
	}
	if srcCols == nil {
		return tableErr("no such source table")
	}
	if len(key) == 0 {
		return tableErr("the source table has no primary key")
	}
	if err := inTx(ctx, v.dst, func(tx pgx.Tx) (err error) {
		dstCols, err = columns(ctx, tx, v.rep.Target)
		return err
	}); err != nil {
		return err
	}
	if dstCols == nil {
		return tableErr("no replica table %s", v.rep.Target)
	}
	dstType := map[string]string{}
	for _, c := range dstCols {
		dstType[c.name] = c.typ
	}
	var lacking []string
	for _, c := range srcCols {
		if !r.replicated(c.name) && !slices.Contains(key, c.name) {
			continue
		}
		if _, ok := dstType[c.name]; !ok {
			lacking = append(lacking, c.name)
			continue
		}
		v.rep.Columns = append(v.rep.Columns, c.name)
		v.srcCmp = append(v.srcCmp, c)
		v.dstCmp = append(v.dstCmp, vcolumn{c.name, dstType[c.name]})
	}
	if len(lacking) > 0 {
		return tableErr("the replica %s lacks replicated column(s) %s", v.rep.Target, strings.Join(lacking, ", "))
	}
	for _, k := range key {
		for _, c := range srcCols {
			if c.name == k {
				v.srcKey = append(v.srcKey, c)
			}
		}
		v.dstKey = append(v.dstKey, vcolumn{k, dstType[k]})
	}
	v.rep.KeyColumns = key
	return nil
}

// columns returns a table's columns in order (not dropped, not generated: Debezium does not
// send generated columns), or nil when there is no such table.
func columns(ctx context.Context, tx pgx.Tx, quoted string) ([]vcolumn, error) {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", quoted).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum`, quoted)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (vcolumn, error) {
		var c vcolumn
		err := r.Scan(&c.name, &c.typ)
		return c, err
	})
}

// primaryKey returns the primary key's columns in the key's order.
func primaryKey(ctx context.Context, tx pgx.Tx, quoted string) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT a.attname FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = to_regclass($1) AND i.indisprimary ORDER BY k.n`, quoted)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
