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

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/stage"
	"github.com/eosink/eosink/sink/plugin"
)

// UpsertConfig configures the upsert plugin.
type UpsertConfig struct {
	Config `yaml:",inline"`
	// Key lists the columns of a primary key or unique index of Table. Required.
	Key []string `yaml:"key"`
	// OnConflict is "update" (a later record's values replace the row's) or "nothing" (the
	// first record of a key stays). Defaults to update.
	OnConflict string `yaml:"on_conflict"`
	// DeleteOnTombstone makes a tombstone (a null value) delete its key's row. Key columns
	// must then come from the record key. Defaults to false: a tombstone is poison.
	DeleteOnTombstone bool `yaml:"delete_on_tombstone"`
	// Merge says, per non-key column, how a record's value combines with the row's when the
	// key exists: replace, add, min, max, keep_first or coalesce (see the package doc).
	// Defaults to replace for every column. Needs on_conflict: update; not with
	// delete_on_tombstone.
	Merge map[string]string `yaml:"merge"`
	// OnlyIfNewer names a non-key column: a record updates an existing row only when its
	// value there is greater than the row's (a NULL is older than every value), so that a
	// republished or replayed older record never moves the row backwards. Its columns may
	// only be replace or keep_first. Defaults to none: every record updates.
	OnlyIfNewer string `yaml:"only_if_newer"`
	// OnEqual says what a record whose only_if_newer value equals the row's does: "skip"
	// (the row stays: replaying the same record changes nothing) or "update" (the record
	// replaces the row, as a newer one would: a replay after a fix of the mapping rewrites
	// the rows it wrote). Needs only_if_newer. Defaults to skip.
	OnEqual string `yaml:"on_equal"`
}

// The values of UpsertConfig.OnEqual.
const (
	OnEqualSkip   = "skip"
	OnEqualUpdate = "update"
)

// The merge operations of UpsertConfig.Merge.
const (
	MergeReplace   = "replace"    // the record's value, NULL included
	MergeAdd       = "add"        // the row's plus the record's; a NULL adds nothing
	MergeMin       = "min"        // the smaller; a NULL is ignored
	MergeMax       = "max"        // the greater; a NULL is ignored
	MergeKeepFirst = "keep_first" // the value the row was inserted with; never updated
	MergeCoalesce  = "coalesce"   // the record's value, unless NULL: then the row's stays
)

var mergeOps = []string{MergeReplace, MergeAdd, MergeMin, MergeMax, MergeKeepFirst, MergeCoalesce}

func init() {
	plugin.RegisterConfig("upsert", func(pc plugin.Config, c UpsertConfig) (*Upsert, error) {
		c.SchemaRegistry = pc.SchemaRegistry
		return NewUpsert(c)
	})
}

// Upsert is the insert-or-update plugin.
type Upsert struct {
	r      *router[*upsertTarget]
	c      UpsertConfig
	stages stage.Sessions // each session's staging tables, at most stage.MaxPerSession
}

// upsertTarget is one target table with its statements.
type upsertTarget struct {
	w        *writer
	key      []string
	c        UpsertConfig
	stage    string // quoted temporary table
	stageSQL string // CREATE TEMP TABLE IF NOT EXISTS
	copySQL  string // COPY into the stage
	mergeSQL string // empties the stage into the table
}

const (
	ordCol = "eosink_ord"
	delCol = "eosink_del"
)

// NewUpsert returns the upsert plugin for c.
func NewUpsert(c UpsertConfig) (*Upsert, error) {
	r, err := newRouter(c.Config, c.Key, func(r *route, table pgx.Identifier) (*upsertTarget, error) {
		rc := c
		rc.Config = c.routed(r.spec)
		return newUpsertTarget(rc, table, r.spec.Columns, r.spec.Key)
	})
	if err != nil {
		return nil, err
	}
	return &Upsert{r: r, c: c}, nil
}

// CheckTopic reports whether a route or the default table takes topic (sink.TopicRouter).
func (u *Upsert) CheckTopic(topic string) error { return u.r.CheckTopic(topic) }

// RouteSummary lists the routes, one "topic -> table" line each, in the order they are tried,
// with the merge operations and the guard when set.
func (u *Upsert) RouteSummary() []string {
	lines := u.r.summary()
	var notes []string
	for _, col := range slices.Sorted(maps.Keys(u.c.Merge)) {
		notes = append(notes, col+" "+u.c.Merge[col])
	}
	note := ""
	if len(notes) > 0 {
		note = " (merge " + strings.Join(notes, ", ") + ")"
	}
	if u.c.OnlyIfNewer != "" {
		or := ""
		if u.c.OnEqual == OnEqualUpdate {
			or = " or equal"
		}
		note += " (only if newer" + or + " " + u.c.OnlyIfNewer + ")"
	}
	for i := range lines {
		lines[i] += note
	}
	return lines
}

// ReplayNotes says what a replay does with the tables' rows (sink.ReplayNoter): nothing to
// note when every replayed record replaces its row.
func (u *Upsert) ReplayNotes() []string {
	var what []string
	switch {
	case u.c.OnConflict == "nothing":
		what = append(what, "a replay keeps the rows it brings again (on_conflict: nothing): it repairs none of them")
	case u.c.OnlyIfNewer != "" && u.c.OnEqual != OnEqualUpdate:
		what = append(what, fmt.Sprintf("a replay skips the records whose %[1]s equals the row's (only_if_newer: %[1]s, on_equal: skip): "+
			"it repairs none of the rows they wrote; set on_equal: update for a replay that rewrites them", u.c.OnlyIfNewer))
	}
	for _, col := range slices.Sorted(maps.Keys(u.c.Merge)) {
		if u.c.Merge[col] == MergeAdd {
			what = append(what, fmt.Sprintf("merge %s: add adds the replayed records again (rebuild a summed table from the start instead)", col))
		}
	}
	var notes []string
	for _, l := range u.r.summary() {
		for _, w := range what {
			notes = append(notes, "upsert "+l+": "+w)
		}
	}
	return notes
}

// newUpsertTarget builds the statements of one target table with its columns and key.
func newUpsertTarget(c UpsertConfig, table pgx.Identifier, columns map[string]Column, key []string) (*upsertTarget, error) {
	w, err := newWriter(c.Config, table, columns, []string{ordCol, delCol})
	if err != nil {
		return nil, err
	}
	c.Key, c.Columns = key, columns
	if len(c.Key) == 0 {
		return nil, errors.New("key: at least one key column is required")
	}
	for _, k := range c.Key {
		if _, ok := c.Columns[k]; !ok {
			return nil, fmt.Errorf("key: column %q is not in columns", k)
		}
		if c.DeleteOnTombstone {
			if src := w.m.Columns[slices.Index(w.cols, k)].From; src.Side() != "key" {
				return nil, fmt.Errorf("key: column %q comes from %s; with delete_on_tombstone key columns must come from the record key", k, src)
			}
		}
	}
	for i := range w.m.Columns {
		if slices.Contains(c.Key, w.m.Columns[i].Name) {
			w.m.Columns[i].Required = true // a row without its key cannot be merged
		}
	}
	switch c.OnConflict {
	case "":
		c.OnConflict = "update"
	case "update", "nothing":
	default:
		return nil, fmt.Errorf("on_conflict: %q is not update or nothing", c.OnConflict)
	}
	if c.OnConflict == "nothing" && c.DeleteOnTombstone {
		// The first record of a key in a batch wins under "nothing", so a tombstone and a
		// later value in one batch would give another result than in two batches.
		return nil, errors.New("on_conflict: nothing cannot be combined with delete_on_tombstone")
	}
	merging, err := checkMerge(&c, w.cols)
	if err != nil {
		return nil, err
	}
	w.key = key
	u := &upsertTarget{w: w, key: key, c: c}
	h := fnv.New64a()
	h.Write([]byte(w.table.Sanitize()))
	h.Write([]byte(" " + strings.Join(w.cols, ","))) // two targets of one table may map other columns
	u.stage = pgx.Identifier{fmt.Sprintf("eosink_stage_%x", h.Sum64())}.Sanitize()
	cols := quoteAll(w.cols)
	u.stageSQL = fmt.Sprintf("CREATE TEMP TABLE IF NOT EXISTS %s AS SELECT %s, 0::bigint AS %s, false AS %s FROM %s WITH NO DATA",
		u.stage, cols, ordCol, delCol, w.table.Sanitize())
	u.copySQL = fmt.Sprintf("COPY %s (%s, %s, %s) FROM STDIN", u.stage, cols, ordCol, delCol)

	keys := quoteAll(c.Key)
	order := "DESC" // the last record of a key wins
	if c.OnConflict == "nothing" {
		order = "ASC"
	}
	var join []string
	for _, k := range c.Key {
		q := pgx.Identifier{k}.Sanitize()
		join = append(join, fmt.Sprintf("t.%s = l.%s", q, q))
	}
	var set []string
	for _, col := range w.cols {
		if !slices.Contains(c.Key, col) {
			q := pgx.Identifier{col}.Sanitize()
			set = append(set, fmt.Sprintf("%s = EXCLUDED.%s", q, q))
		}
	}
	conflict := "DO NOTHING"
	if c.OnConflict == "update" && len(set) > 0 {
		conflict = "DO UPDATE SET " + strings.Join(set, ", ")
	}
	if merging {
		u.mergeSQL = mergeSQL(u.stage, w.table.Sanitize(), w.cols, c)
		return u, nil
	}
	u.mergeSQL = fmt.Sprintf(`WITH staged AS (DELETE FROM %[1]s RETURNING *),
last AS (SELECT DISTINCT ON (%[2]s) * FROM staged ORDER BY %[2]s, %[3]s %[4]s),
deleted AS (DELETE FROM %[5]s t USING last l WHERE l.%[6]s AND %[7]s)
INSERT INTO %[5]s AS t (%[8]s) SELECT %[8]s FROM last WHERE NOT %[6]s
ON CONFLICT (%[2]s) %[9]s`, u.stage, keys, ordCol, order, w.table.Sanitize(), delCol, strings.Join(join, " AND "), cols, conflict)
	return u, nil
}

// row maps a record to its staging row: the mapped columns, the offset, and whether it
// deletes. A tombstone's row holds only its key columns.
func (u *upsertTarget) row(r *sink.Record, row []any) ([]any, error) {
	if r.Value != nil {
		row, err := u.w.m.Row(r, row)
		if err != nil {
			return nil, err
		}
		return append(row, strconv.FormatInt(r.Offset, 10), "f"), nil
	}
	if err := u.w.m.Filter(r); err != nil { // a where may drop tombstones (value != null)
		return nil, err
	}
	if !u.c.DeleteOnTombstone {
		return nil, errors.New("tombstone (null value) and delete_on_tombstone is off")
	}
	for _, c := range u.w.m.Columns {
		if !slices.Contains(u.c.Key, c.Name) {
			row = append(row, nil)
			continue
		}
		v, err := u.w.m.ExtractColumn(r, c)
		if err != nil {
			return nil, err
		}
		if v == nil {
			return nil, fmt.Errorf("tombstone without key column %q (%s)", c.Name, c.From)
		}
		row = append(row, v)
	}
	return append(row, strconv.FormatInt(r.Offset, 10), "t"), nil
}

// Prepare checks the tables whose names have no variable, their columns, and that their
// merge statements plan: a key without a unique index fails here, at start, rather than on
// the first batch. With Create, a missing table is created by its first batch, its key as
// primary key. A table named after the topic is checked when its first batch is written.
func (u *Upsert) Prepare(ctx context.Context, db sink.DB) error {
	return prepareAll(ctx, u.r, func(ctx context.Context, t *upsertTarget) error { return t.prepare(ctx, db) })
}

func (u *upsertTarget) prepare(ctx context.Context, db sink.DB) error {
	if exists, err := u.w.prepare(ctx, db); err != nil || !exists {
		return err
	}
	beginner, ok := db.(interface {
		Begin(context.Context) (pgx.Tx, error)
	})
	if !ok {
		return nil
	}
	tx, err := beginner.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, u.stageSQL); err != nil {
		return fmt.Errorf("upsert %s: staging table: %w", u.w.name, err)
	}
	if _, err := tx.Exec(ctx, "EXPLAIN "+u.mergeSQL); err != nil {
		return fmt.Errorf("upsert %s: key %v: %w", u.w.name, u.c.Key, err)
	}
	return nil
}

// Open does nothing: the plugin keeps no per-partition state.
func (u *Upsert) Open(context.Context, sink.Partition) error { return nil }

// Close does nothing.
func (u *Upsert) Close(context.Context, sink.Partition) error { return nil }

// Write stages the batch with COPY and merges it into the batch's topic's table.
func (p *Upsert) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	u, err := p.r.target(b.Topic)
	if err != nil {
		return err
	}
	buf, recs, err := u.w.rows(ctx, tx, b.Records, u.row)
	if err != nil {
		return err
	}
	sink.Skipped(ctx, len(b.Records)-len(recs)) // filtered out by a where
	if buf == nil {
		return nil
	}
	if err := p.stages.Ready(ctx, tx, u.stage, u.stageSQL, len(buf)); err != nil {
		return fmt.Errorf("upsert: %w", err)
	}
	if err := u.w.copyIn(ctx, tx, buf, u.copySQL, recs); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, u.mergeSQL)
	return err
}

// checkMerge checks c.Merge and c.OnlyIfNewer against the mapped columns and the other
// options; merging reports whether the merge statement needs mergeSQL (some column not
// replaced, or a guard).
func checkMerge(c *UpsertConfig, cols []string) (merging bool, err error) {
	for _, col := range slices.Sorted(maps.Keys(c.Merge)) {
		op := c.Merge[col]
		switch {
		case !slices.Contains(mergeOps, op):
			return false, fmt.Errorf("merge.%s: %q is not %s", col, op, strings.Join(mergeOps, ", "))
		case !slices.Contains(cols, col):
			return false, fmt.Errorf("merge.%s: not a column of columns", col)
		case slices.Contains(c.Key, col):
			return false, fmt.Errorf("merge.%s: a key column identifies the row; it is not merged", col)
		case op == MergeReplace:
			continue
		case c.OnConflict == "nothing":
			return false, fmt.Errorf("merge.%s: %s needs on_conflict: update (with nothing, a row is never updated)", col, op)
		case c.DeleteOnTombstone:
			return false, fmt.Errorf("merge.%s: %s cannot be combined with delete_on_tombstone", col, op)
		case c.OnlyIfNewer != "" && op != MergeKeepFirst:
			// Which records of a batch pass the guard depends on the row, so the batch's
			// sum (min, max, last non-NULL) would not be the passing records'. And a guarded
			// sum drops every delta that arrives out of order.
			return false, fmt.Errorf("merge.%s: %s cannot be combined with only_if_newer (only replace and keep_first can)", col, op)
		}
		merging = true
	}
	switch c.OnEqual {
	case "":
		if c.OnlyIfNewer != "" {
			c.OnEqual = OnEqualSkip
		}
	case OnEqualSkip, OnEqualUpdate:
		if c.OnlyIfNewer == "" {
			return false, fmt.Errorf("on_equal: %s needs only_if_newer (it says what a record whose only_if_newer value equals the row's does)", c.OnEqual)
		}
	default:
		return false, fmt.Errorf("on_equal: %q is not %s or %s", c.OnEqual, OnEqualSkip, OnEqualUpdate)
	}
	if g := c.OnlyIfNewer; g != "" {
		switch {
		case !slices.Contains(cols, g):
			return false, fmt.Errorf("only_if_newer: %q is not a column of columns", g)
		case slices.Contains(c.Key, g):
			return false, fmt.Errorf("only_if_newer: %q is a key column; the guard compares a non-key column", g)
		case c.Merge[g] != "" && c.Merge[g] != MergeReplace:
			return false, fmt.Errorf("only_if_newer: %q is merged with %s; the guard's column must be replace", g, c.Merge[g])
		case c.OnConflict == "nothing":
			return false, errors.New("only_if_newer: needs on_conflict: update (with nothing, a row is never updated)")
		case c.DeleteOnTombstone:
			return false, errors.New("only_if_newer: cannot be combined with delete_on_tombstone (a tombstone has no value to compare: an old one would delete a newer row)")
		}
		merging = true
	}
	return merging, nil
}

// mergeSQL is the merge statement with merge operations or a guard. The batch's records of
// a key are reduced to one row that gives the same result as applying them one by one:
// per column, the last record's value (replace), the sum (add), the least or greatest
// (min, max), the first record's value (keep_first) or the last non-NULL value (coalesce);
// with only_if_newer, the replaced columns come from the first record with the greatest
// guard value (NULLs last), which is the one a row-by-row application keeps; with on_equal:
// update from the last of them, unless every value is NULL (then the first: a NULL never
// updates a row). Window
// functions, not array_agg, so that every column type works (arrays included).
func mergeSQL(stage, table string, cols []string, c UpsertConfig) string {
	keys := quoteAll(c.Key)
	ord := pgx.Identifier{ordCol}.Sanitize()
	var sel, set []string
	for _, col := range cols {
		q := pgx.Identifier{col}.Sanitize()
		if slices.Contains(c.Key, col) {
			sel = append(sel, q)
			continue
		}
		over := "OVER (PARTITION BY " + keys
		var agg string
		switch op := c.Merge[col]; op {
		case MergeAdd:
			agg = fmt.Sprintf("sum(%s) %s)", q, over)
			set = append(set, fmt.Sprintf("%[1]s = COALESCE(t.%[1]s + EXCLUDED.%[1]s, t.%[1]s, EXCLUDED.%[1]s)", q))
		case MergeMin, MergeMax:
			agg = fmt.Sprintf("%s(%s) %s)", op, q, over)
			set = append(set, fmt.Sprintf("%[1]s = %[2]s(t.%[1]s, EXCLUDED.%[1]s)", q, map[string]string{MergeMin: "LEAST", MergeMax: "GREATEST"}[op]))
		case MergeKeepFirst:
			agg = fmt.Sprintf("first_value(%s) %s ORDER BY %s)", q, over, ord)
		case MergeCoalesce:
			agg = fmt.Sprintf("first_value(%[1]s) %[2]s ORDER BY %[1]s IS NULL, %[3]s DESC)", q, over, ord)
			set = append(set, fmt.Sprintf("%[1]s = COALESCE(EXCLUDED.%[1]s, t.%[1]s)", q))
		default: // replace
			order := ord + " DESC"
			g := pgx.Identifier{c.OnlyIfNewer}.Sanitize()
			switch {
			case c.OnlyIfNewer != "" && c.OnEqual == OnEqualUpdate:
				order = fmt.Sprintf("%[1]s DESC NULLS LAST, CASE WHEN %[1]s IS NULL THEN %[2]s ELSE -%[2]s END", g, ord)
			case c.OnlyIfNewer != "":
				order = g + " DESC NULLS LAST, " + ord
			}
			agg = fmt.Sprintf("first_value(%s) %s ORDER BY %s)", q, over, order)
			set = append(set, fmt.Sprintf("%[1]s = EXCLUDED.%[1]s", q))
		}
		sel = append(sel, agg+" AS "+q)
	}
	conflict := "DO NOTHING"
	if len(set) > 0 {
		conflict = "DO UPDATE SET " + strings.Join(set, ", ")
		if g := c.OnlyIfNewer; g != "" {
			q := pgx.Identifier{g}.Sanitize()
			cmp := ">"
			if c.OnEqual == OnEqualUpdate {
				cmp = ">="
			}
			conflict += fmt.Sprintf(" WHERE EXCLUDED.%[1]s IS NOT NULL AND (t.%[1]s IS NULL OR EXCLUDED.%[1]s %[2]s t.%[1]s)", q, cmp)
		}
	}
	return fmt.Sprintf(`WITH staged AS (DELETE FROM %[1]s RETURNING *),
reduced AS (SELECT DISTINCT ON (%[2]s) * FROM (SELECT %[3]s FROM staged) w)
INSERT INTO %[4]s AS t (%[5]s) SELECT %[5]s FROM reduced
ON CONFLICT (%[2]s) %[6]s`, stage, keys, strings.Join(sel, ", "), table, quoteAll(cols), conflict)
}
