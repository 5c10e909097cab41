package fidelity

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// table is one source table: a type under a replica identity.
type table struct {
	typ  colType
	full bool // REPLICA IDENTITY FULL, else DEFAULT
	name string
}

func (tb table) identity() string {
	if tb.full {
		return "FULL"
	}
	return "DEFAULT"
}

func tablesOf(ts []colType) []table {
	var out []table
	for _, t := range ts {
		for _, full := range []bool{false, true} {
			tb := table{typ: t, full: full, name: "t_" + t.slug + "_d"}
			if full {
				tb.name = "t_" + t.slug + "_f"
			}
			out = append(out, tb)
		}
	}
	return out
}

// sourceDDL creates schema fid: the enum, a table per type and identity, and fid.marker (the
// workload bumps it last, so that its row in a replica says every earlier change was read).
func sourceDDL(tables []table) string {
	var b strings.Builder
	b.WriteString("CREATE SCHEMA fid;\n")
	b.WriteString(`CREATE TYPE fid.mood AS ENUM ('happy', 'sad', 'très bien', 'with,comma', 'quo"te');` + "\n")
	b.WriteString("CREATE TABLE fid.marker (id integer PRIMARY KEY, n integer NOT NULL);\nINSERT INTO fid.marker VALUES (1, 0);\n")
	for _, tb := range tables {
		fmt.Fprintf(&b, "CREATE TABLE fid.%s (id bigint PRIMARY KEY, version integer NOT NULL, note text, v %s);\n", tb.name, tb.typ.sql)
		if tb.full {
			fmt.Fprintf(&b, "ALTER TABLE fid.%s REPLICA IDENTITY FULL;\n", tb.name)
		}
	}
	return b.String()
}

// workload changes the source tables at random: inserts (an edge value first, then random
// ones, a TOASTed value per TOAST table), updates of the note only (a TOASTed v stays
// unchanged, so Debezium sends its placeholder under DEFAULT), updates of v, primary key
// changes, deletes, an insert and an update of its note in one transaction; and, once each,
// a truncate and a column added mid-stream. Ids are never reused, so a row that is gone must
// never come back; version grows on every update.
type workload struct {
	c      *pgx.Conn
	r      *rand.Rand
	tables []table
	ids    map[string][]int64
	edges  map[string]int // edge values used per table
	bigs   map[string]int // TOASTed values inserted per table
	maxBig int
	next   int64
	// pkChangeBig: primary key changes may move rows holding a TOASTed value (the new key's
	// event then carries the placeholder and no stored row holds the value).
	pkChangeBig bool
	big         map[string]map[int64]bool
	added       map[string]bool // tables with the column extra
	// touched counts the updates of other columns of rows holding a TOASTed value, per table.
	touched map[string]int
}

func newWorkload(c *pgx.Conn, seed uint64, tables []table, maxBig int, pkChangeBig bool) *workload {
	return &workload{c: c, r: rand.New(rand.NewPCG(seed, 22)), tables: tables, ids: map[string][]int64{},
		edges: map[string]int{}, bigs: map[string]int{}, maxBig: maxBig, pkChangeBig: pkChangeBig,
		big: map[string]map[int64]bool{}, added: map[string]bool{}, touched: map[string]int{}}
}

func (w *workload) value(tb table) string {
	t := tb.typ
	if i := w.edges[tb.name]; i < len(t.edge) { // every edge value, first: the snapshot reads them
		w.edges[tb.name]++
		return t.edge[i]
	}
	if w.r.IntN(10) == 0 {
		return "NULL"
	}
	return t.gen(w.r)
}

func (w *workload) insert(ctx context.Context, tx pgx.Tx, tb table) (int64, error) {
	w.next++
	id := w.next
	v := w.value(tb)
	if tb.typ.toast && w.bigs[tb.name] < w.maxBig {
		w.bigs[tb.name]++
		v = big(tb.typ, w.r)
		if w.big[tb.name] == nil {
			w.big[tb.name] = map[int64]bool{}
		}
		w.big[tb.name][id] = true
	}
	_, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO fid.%s (id, version, note, v) VALUES ($1, 1, $2, %s)", tb.name, v), id, "n"+word(w.r))
	if err == nil {
		w.ids[tb.name] = append(w.ids[tb.name], id)
	}
	return id, err
}

// pick returns a random row of tb and its index, preferring rows with a TOASTed value.
func (w *workload) pick(tb table) (int64, int, bool) {
	ids := w.ids[tb.name]
	if len(ids) == 0 {
		return 0, 0, false
	}
	i := w.r.IntN(len(ids))
	for j := range ids {
		if w.big[tb.name][ids[j]] && w.r.IntN(2) == 0 {
			i = j
			break
		}
	}
	return ids[i], i, true
}

func (w *workload) op(ctx context.Context, tx pgx.Tx, tb table) error {
	id, i, ok := w.pick(tb)
	k := w.r.IntN(100)
	if !ok || k < 35 || len(w.ids[tb.name]) < 4 {
		_, err := w.insert(ctx, tx, tb)
		return err
	}
	set := "note = $2"
	if w.added[tb.name] {
		set += fmt.Sprintf(", extra = 'x%d'", w.r.IntN(1000))
	}
	var err error
	switch {
	case k < 60: // some columns only: v unchanged
		if w.big[tb.name][id] {
			w.touched[tb.name]++
		}
		_, err = tx.Exec(ctx, fmt.Sprintf("UPDATE fid.%s SET %s, version = version + 1 WHERE id = $1", tb.name, set), id, "u"+word(w.r))
	case k < 72:
		v := w.value(tb)
		if w.big[tb.name][id] && w.r.IntN(2) == 0 {
			v = big(tb.typ, w.r)
		} else {
			delete(w.big[tb.name], id)
		}
		_, err = tx.Exec(ctx, fmt.Sprintf("UPDATE fid.%s SET v = %s, version = version + 1 WHERE id = $1", tb.name, v), id)
	case k < 82: // primary key change
		if w.big[tb.name][id] && !w.pkChangeBig {
			return nil
		}
		w.next++
		_, err = tx.Exec(ctx, fmt.Sprintf("UPDATE fid.%s SET id = $2, version = version + 1 WHERE id = $1", tb.name), id, w.next)
		if err == nil {
			w.ids[tb.name][i] = w.next
			if w.big[tb.name][id] {
				w.big[tb.name][w.next] = true
			}
		}
	case k < 90: // an insert and an update of its other columns in one transaction
		nid, err := w.insert(ctx, tx, tb)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, fmt.Sprintf("UPDATE fid.%s SET %s, version = version + 1 WHERE id = $1", tb.name, set), nid, "iu"+word(w.r))
		return err
	default:
		if w.big[tb.name][id] && w.r.IntN(4) != 0 {
			return nil // keep most TOASTed rows for later updates
		}
		_, err = tx.Exec(ctx, fmt.Sprintf("DELETE FROM fid.%s WHERE id = $1", tb.name), id)
		if err == nil {
			ids := w.ids[tb.name]
			w.ids[tb.name] = append(ids[:i], ids[i+1:]...)
		}
	}
	return err
}

// step runs one source transaction of one to ops changes on random tables.
func (w *workload) step(ctx context.Context, ops int) error {
	tx, err := w.c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	saved := w.snapshot()
	for range 1 + w.r.IntN(ops) {
		if err := w.op(ctx, tx, w.tables[w.r.IntN(len(w.tables))]); err != nil {
			w.restore(saved)
			return err
		}
	}
	return tx.Commit(ctx)
}

// touchBig updates the note of every row holding a TOASTed value, in one transaction per
// table, so that each streaming phase has such updates (under DEFAULT, Debezium sends the
// unchanged TOASTed column as its placeholder).
func (w *workload) touchBig(ctx context.Context) error {
	for _, tb := range w.tables {
		for id := range w.big[tb.name] {
			if !slices.Contains(w.ids[tb.name], id) {
				continue
			}
			if _, err := w.c.Exec(ctx, fmt.Sprintf("UPDATE fid.%s SET note = $2, version = version + 1 WHERE id = $1", tb.name), id, "touched"); err != nil {
				return err
			}
			w.touched[tb.name]++
		}
	}
	return nil
}

// fill inserts n rows into every table, in transactions of up to 20 rows.
func (w *workload) fill(ctx context.Context, n int) error {
	for _, tb := range w.tables {
		for i := 0; i < n; i += 20 {
			tx, err := w.c.Begin(ctx)
			if err != nil {
				return err
			}
			for j := i; j < min(n, i+20); j++ {
				if _, err := w.insert(ctx, tx, tb); err != nil {
					tx.Rollback(ctx)
					return fmt.Errorf("%s: %w", tb.name, err)
				}
			}
			if err := tx.Commit(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *workload) truncate(ctx context.Context, tb table) error {
	if _, err := w.c.Exec(ctx, "TRUNCATE fid."+tb.name); err != nil {
		return err
	}
	w.ids[tb.name], w.big[tb.name] = nil, nil
	return nil
}

// addColumn adds the column extra (text) to the source table; the caller adds it to the
// replicas made from the source's DDL first, as an operator would.
func (w *workload) addColumn(ctx context.Context, tb table) error {
	if _, err := w.c.Exec(ctx, "ALTER TABLE fid."+tb.name+" ADD COLUMN extra text"); err != nil {
		return err
	}
	w.added[tb.name] = true
	return nil
}

// mark bumps fid.marker and returns its new n.
func (w *workload) mark(ctx context.Context) (int, error) {
	var n int
	err := w.c.QueryRow(ctx, "UPDATE fid.marker SET n = n + 1 WHERE id = 1 RETURNING n").Scan(&n)
	return n, err
}

type saved struct {
	ids  map[string][]int64
	next int64
}

func (w *workload) snapshot() saved {
	s := saved{ids: map[string][]int64{}, next: w.next}
	for k, v := range w.ids {
		s.ids[k] = append([]int64(nil), v...)
	}
	return s
}

func (w *workload) restore(s saved) { w.ids, w.next = s.ids, s.next }
