package table

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/stage"
	"github.com/eosink/eosink/sink/plugin"
)

func init() {
	plugin.RegisterConfig("table", func(pc plugin.Config, c tableSection) (*Table, error) {
		c.Config.SchemaRegistry = pc.SchemaRegistry
		c.Config.OnConflict = c.OnConflict
		return New(c.Config)
	})
}

// Table is the insert plugin.
type Table struct {
	r          *router[*tableTarget]
	onConflict string
	stages     stage.Sessions // each session's staging tables (on_conflict: nothing)
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
			return newSkipTarget(c.routed(r.spec), table, r.spec.Columns)
		}
		w, err := newWriter(c.routed(r.spec), table, r.spec.Columns, nil)
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

// ReplayNotes says what a replay does with the tables' rows (sink.ReplayNoter).
func (t *Table) ReplayNotes() []string {
	what := "a replay inserts the replayed records again: duplicate rows, or poison where a unique key refuses them"
	if t.onConflict == "nothing" {
		what = "a replay keeps the rows it brings again as they are (on_conflict: nothing): it repairs none of them"
	}
	what += "; for a replay that rewrites them, write the table with upsert keyed on the record's coordinates (key columns from topic, partition and offset)"
	var notes []string
	for _, l := range t.r.summary() {
		notes = append(notes, "table "+l+": "+what)
	}
	return notes
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
	buf, recs, err := tt.w.rows(ctx, tx, b.Records, tt.row)
	if err != nil {
		return err
	}
	if buf == nil || tt.stage == "" {
		sink.Skipped(ctx, len(b.Records)-len(recs)) // filtered out by a where
	}
	if buf == nil {
		return nil
	}
	if tt.stage == "" {
		return tt.w.copyIn(ctx, tx, buf, tt.w.copySQL, recs)
	}
	if err := t.stages.Ready(ctx, tx, tt.stage, tt.stageSQL, len(buf)); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	if err := tt.w.copyIn(ctx, tx, buf, tt.copySQL, recs); err != nil {
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
// table (one per session and column set; see package stage) and inserted from there in
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
	tt.stageSQL = fmt.Sprintf("CREATE TEMP TABLE IF NOT EXISTS %s AS SELECT %s, 0::bigint AS %s FROM %s WITH NO DATA",
		tt.stage, cols, ord, w.table.Sanitize())
	tt.copySQL = fmt.Sprintf("COPY %s (%s, %s) FROM STDIN", tt.stage, cols, ord)
	tt.insertSQL = fmt.Sprintf(`WITH staged AS (DELETE FROM %s RETURNING *)
INSERT INTO %s (%s) SELECT %s FROM staged ORDER BY %s ON CONFLICT DO NOTHING`, tt.stage, w.table.Sanitize(), cols, cols, ord)
	return tt, nil
}
