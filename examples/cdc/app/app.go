// Package app is the cdc example's source database and its checker: the source tables
// (every type the cdc plugin converts, a composite primary key, a table without a primary
// key), a workload of inserts, updates, primary key changes and deletes, and a comparison
// of row contents between the source and the replica. examples/cdc/main.go is its command
// line; test/cdc uses it too.
package app

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

// SourceDDL creates the source tables in public. Ids come from sequences and are never
// reused, so a deleted row must never come back.
const SourceDDL = `
CREATE SEQUENCE public.account_ids;
CREATE SEQUENCE public.order_ids;
CREATE TABLE public.accounts (
	id       bigint PRIMARY KEY,
	version  integer NOT NULL,
	balance  numeric(12,3),
	anyscale numeric,
	opened   timestamptz,
	local_ts timestamp,
	day      date,
	meta     jsonb,
	ref      uuid,
	photo    bytea,
	note     text
);
ALTER TABLE public.accounts REPLICA IDENTITY FULL;
CREATE TABLE public.lines (
	order_id integer,
	line     integer,
	version  integer NOT NULL,
	qty      integer,
	PRIMARY KEY (order_id, line)
);
CREATE TABLE public.nopk (v text);`

// ReplicaDDL creates the replica tables in schema (an SQL identifier, quoted as needed):
// the same columns and primary keys, and no table for nopk (its events are refused).
func ReplicaDDL(schema string) string {
	return fmt.Sprintf(`CREATE SCHEMA IF NOT EXISTS %[1]s;
CREATE TABLE %[1]s.accounts (
	id bigint PRIMARY KEY, version integer NOT NULL, balance numeric(12,3), anyscale numeric, opened timestamptz,
	local_ts timestamp, day date, meta jsonb, ref uuid, photo bytea, note text);
CREATE TABLE %[1]s.lines (order_id integer, line integer, version integer NOT NULL, qty integer, PRIMARY KEY (order_id, line));`, schema)
}

// Tables are the replicated tables with their primary key columns.
var Tables = map[string]string{"accounts": "id", "lines": "order_id, line"}

// compared is each table's row as compared. Debezium sends a numeric without a declared
// scale as a VariableScaleDecimal without its trailing zeros (9925.000280 arrives as
// 9925.00028): equal numbers, another display scale; trim_scale compares the numbers.
var compared = map[string]string{
	"accounts": "row(id, version, balance, trim_scale(anyscale), opened, local_ts, day, meta, ref, photo, note)",
	"lines":    "t",
}

// Workload changes the source: inserts, updates, primary key changes and deletes, in
// transactions of one to three statements, and now and then a row of the table without a
// primary key.
type Workload struct {
	c     *pgx.Conn
	rng   *rand.Rand
	ids   []int64
	lines [][2]int
}

// NewWorkload returns a workload on the source database c, seeded with seed, that knows the
// rows already there (so that it can run in several invocations).
func NewWorkload(ctx context.Context, c *pgx.Conn, seed uint64) (*Workload, error) {
	w := &Workload{c: c, rng: rand.New(rand.NewPCG(seed, 7))}
	rows, _ := c.Query(ctx, "SELECT id FROM public.accounts ORDER BY id")
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	w.ids = ids
	rows, _ = c.Query(ctx, "SELECT order_id, line FROM public.lines ORDER BY 1, 2")
	var o, l int
	if _, err := pgx.ForEachRow(rows, []any{&o, &l}, func() error { w.lines = append(w.lines, [2]int{o, l}); return nil }); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Workload) account(ctx context.Context, tx pgx.Tx) (int64, error) {
	r := w.rng
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO public.accounts VALUES (nextval('public.account_ids'), 1, $1::numeric, $2::numeric, $3, $4, $5, $6::jsonb, $7::uuid, $8, $9) RETURNING id`,
		fmt.Sprintf("%d.%03d", r.IntN(1e6)-5e5, r.IntN(1000)), fmt.Sprintf("%d.%0*d", r.IntN(1e4), r.IntN(8)+1, r.IntN(1e3)),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(1e15))*time.Microsecond),
		time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(1e15))*time.Microsecond).Format("2006-01-02 15:04:05.999999"),
		time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r.IntN(20000)).Format("2006-01-02"),
		fmt.Sprintf(`{"n": %d, "tags": ["a", "b\u00e9"], "x": {"y": %d.5}}`, r.IntN(100), r.IntN(100)),
		fmt.Sprintf("%08x-0000-4000-8000-%012x", r.Uint32(), r.Uint64()&0xffffffffffff),
		[]byte{byte(r.IntN(256)), 0, 0xff, byte(r.IntN(256))}, fmt.Sprintf("note\t%d\n\\", r.IntN(1e6))).Scan(&id)
	return id, err
}

// Step runs one source transaction.
func (w *Workload) Step(ctx context.Context) error {
	tx, err := w.c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	ids, lines := append([]int64(nil), w.ids...), append([][2]int(nil), w.lines...)
	for range 1 + w.rng.IntN(3) {
		r := w.rng
		switch k := r.IntN(10); {
		case k < 3 || len(ids) < 5:
			id, err := w.account(ctx, tx)
			if err != nil {
				return err
			}
			ids = append(ids, id)
			var ord int
			if err := tx.QueryRow(ctx, `SELECT nextval('public.order_ids')`).Scan(&ord); err != nil {
				return err
			}
			for l := range 1 + r.IntN(3) {
				if _, err := tx.Exec(ctx, `INSERT INTO public.lines VALUES ($1, $2, 1, $3)`, ord, l, r.IntN(100)); err != nil {
					return err
				}
				lines = append(lines, [2]int{ord, l})
			}
		case k < 6:
			i := r.IntN(len(ids))
			if _, err := tx.Exec(ctx, `UPDATE public.accounts SET version = version + 1, balance = balance + 1.5, opened = opened + interval '1 hour',
				meta = jsonb_set(meta, '{n}', to_jsonb(version)), photo = photo || '\x00'::bytea, note = NULL WHERE id = $1`, ids[i]); err != nil {
				return err
			}
			if len(lines) > 0 {
				l := lines[r.IntN(len(lines))]
				if _, err := tx.Exec(ctx, `UPDATE public.lines SET version = version + 1, qty = qty + 1 WHERE order_id = $1 AND line = $2`, l[0], l[1]); err != nil {
					return err
				}
			}
		case k < 8: // primary key changes
			i := r.IntN(len(ids))
			if err := tx.QueryRow(ctx, `UPDATE public.accounts SET id = nextval('public.account_ids'), version = version + 1 WHERE id = $1 RETURNING id`, ids[i]).Scan(&ids[i]); err != nil {
				return err
			}
			if len(lines) > 0 {
				j := r.IntN(len(lines))
				l := lines[j]
				if _, err := tx.Exec(ctx, `UPDATE public.lines SET line = line + 100, version = version + 1 WHERE order_id = $1 AND line = $2`, l[0], l[1]); err != nil {
					return err
				}
				lines[j][1] += 100
			}
		default:
			i := r.IntN(len(ids))
			if _, err := tx.Exec(ctx, `DELETE FROM public.accounts WHERE id = $1`, ids[i]); err != nil {
				return err
			}
			ids = append(ids[:i], ids[i+1:]...)
			if len(lines) > 0 {
				j := r.IntN(len(lines))
				l := lines[j]
				if _, err := tx.Exec(ctx, `DELETE FROM public.lines WHERE order_id = $1 AND line = $2`, l[0], l[1]); err != nil {
					return err
				}
				lines = append(lines[:j], lines[j+1:]...)
			}
		}
	}
	if w.rng.IntN(10) == 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO public.nopk VALUES ('refused')`); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	w.ids, w.lines = ids, lines
	return nil
}

// Querier is a pgx.Conn, pgx.Tx or pgxpool.Pool.
type Querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// rowsOf returns each row of table as text, by primary key order.
func rowsOf(ctx context.Context, q Querier, schema, table string) ([]string, error) {
	rows, err := q.Query(ctx, fmt.Sprintf("SELECT %s::text FROM %s t ORDER BY %s", compared[table], pgx.Identifier{schema, table}.Sanitize(), Tables[table]))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Result is one table's comparison.
type Result struct {
	Table                       string
	Source, Replica, Mismatches int
}

// Compare reads every replicated table on both sides and compares the rows' contents. It
// returns one Result per table (by name) and up to six differing rows, each with its count on
// the source minus its count on the replica.
func Compare(ctx context.Context, src, replica Querier, schema string) ([]Result, []string, error) {
	names := make([]string, 0, len(Tables))
	for t := range Tables {
		names = append(names, t)
	}
	sort.Strings(names)
	var out []Result
	var diff []string
	for _, table := range names {
		a, err := rowsOf(ctx, src, "public", table)
		if err != nil {
			return nil, nil, fmt.Errorf("source %s: %w", table, err)
		}
		b, err := rowsOf(ctx, replica, schema, table)
		if err != nil {
			return nil, nil, fmt.Errorf("replica %s: %w", table, err)
		}
		seen := map[string]int{}
		for _, r := range a {
			seen[r]++
		}
		for _, r := range b {
			seen[r]--
		}
		mis := 0
		for r, n := range seen {
			if n != 0 {
				mis++
				if len(diff) < 6 {
					diff = append(diff, fmt.Sprintf("%s %+d: %s", table, n, r))
				}
			}
		}
		out = append(out, Result{table, len(a), len(b), mis})
	}
	return out, diff, nil
}

// Equal reports whether every Result has no mismatch.
func Equal(rs []Result) bool {
	for _, r := range rs {
		if r.Mismatches != 0 {
			return false
		}
	}
	return true
}
