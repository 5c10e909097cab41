package table

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
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
}

func init() {
	sink.RegisterConfig("upsert", func(pc sink.PluginConfig, c UpsertConfig) (*Upsert, error) {
		c.SchemaRegistry = pc.SchemaRegistry
		return NewUpsert(c)
	})
}

// Upsert is the insert-or-update plugin.
type Upsert struct {
	r *router[*upsertTarget]
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
		return newUpsertTarget(c, table, r.spec.Columns, r.spec.Key)
	})
	if err != nil {
		return nil, err
	}
	return &Upsert{r: r}, nil
}

// CheckTopic reports whether a route or the default table takes topic (sink.TopicRouter).
func (u *Upsert) CheckTopic(topic string) error { return u.r.CheckTopic(topic) }

// RouteSummary lists the routes, one "topic -> table" line each, in the order they are tried.
func (u *Upsert) RouteSummary() []string { return u.r.summary() }

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
	w.key = key
	u := &upsertTarget{w: w, key: key, c: c}
	h := fnv.New64a()
	h.Write([]byte(w.table.Sanitize()))
	h.Write([]byte(" " + strings.Join(w.cols, ","))) // two targets of one table may map other columns
	u.stage = pgx.Identifier{fmt.Sprintf("eosink_stage_%x", h.Sum64())}.Sanitize()
	cols := quoteAll(w.cols)
	u.stageSQL = fmt.Sprintf("CREATE TEMP TABLE IF NOT EXISTS %s ON COMMIT DELETE ROWS AS SELECT %s, 0::bigint AS %s, false AS %s FROM %s WITH NO DATA",
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
	if !u.c.DeleteOnTombstone {
		return nil, errors.New("tombstone (null value) and delete_on_tombstone is off")
	}
	for _, c := range u.w.m.Columns {
		if !slices.Contains(u.c.Key, c.Name) {
			row = append(row, nil)
			continue
		}
		v, err := u.w.m.Extract(r, c.From)
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
	buf, err := u.w.rows(ctx, tx, b.Records, u.row)
	if err != nil || buf == nil {
		return err
	}
	if _, err := tx.Exec(ctx, u.stageSQL); err != nil {
		return fmt.Errorf("upsert: staging table: %w", err)
	}
	if err := copyIn(ctx, tx, buf, u.copySQL); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, u.mergeSQL)
	return err
}
