package cdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/testbed"
)

// The source tables: every semantic type the plugin converts, a composite primary key,
// and a table without a primary key (its events are refused as poison).
const sourceDDL = `
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

// replicaDDL is the same tables in the replica schema %[1]s, without the table that has no
// primary key.
const replicaDDL = `;
CREATE TABLE %[1]s.accounts (
	id bigint PRIMARY KEY, version integer NOT NULL, balance numeric(12,3), anyscale numeric, opened timestamptz,
	local_ts timestamp, day date, meta jsonb, ref uuid, photo bytea, note text);
CREATE TABLE %[1]s.lines (order_id integer, line integer, version integer NOT NULL, qty integer, PRIMARY KEY (order_id, line));`

// tables compared between source and replica, with their order.
var tables = map[string]string{"accounts": "id", "lines": "order_id, line"}

// compared is each table's row as compared. Debezium sends a numeric without a declared
// scale as a VariableScaleDecimal without its trailing zeros (9925.000280 arrives as
// 9925.00028): equal numbers, another display scale; trim_scale compares the numbers.
var compared = map[string]string{
	"accounts": "row(id, version, balance, trim_scale(anyscale), opened, local_ts, day, meta, ref, photo, note)",
	"lines":    "t",
}

// workload changes the source: inserts, updates, primary key changes and deletes, in
// transactions of one to three statements. Ids are never reused, so a deleted id must
// never come back.
type workload struct {
	c       *pgx.Conn
	rng     *rand.Rand
	nextID  int64
	nextOrd int
	ids     []int64
	lines   [][2]int
}

func (w *workload) account(ctx context.Context, tx pgx.Tx, id int64) error {
	r := w.rng
	_, err := tx.Exec(ctx, `INSERT INTO public.accounts VALUES ($1, 1, $2::numeric, $3::numeric, $4, $5, $6, $7::jsonb, $8::uuid, $9, $10)`,
		id, fmt.Sprintf("%d.%03d", r.IntN(1e6)-5e5, r.IntN(1000)), fmt.Sprintf("%d.%0*d", r.IntN(1e4), r.IntN(8)+1, r.IntN(1e3)),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(1e15))*time.Microsecond),
		time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(1e15))*time.Microsecond).Format("2006-01-02 15:04:05.999999"),
		time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r.IntN(20000)).Format("2006-01-02"),
		fmt.Sprintf(`{"n": %d, "tags": ["a", "b\u00e9"], "x": {"y": %d.5}}`, r.IntN(100), r.IntN(100)),
		fmt.Sprintf("%08x-0000-4000-8000-%012x", r.Uint32(), r.Uint64()&0xffffffffffff),
		[]byte{byte(r.IntN(256)), 0, 0xff, byte(r.IntN(256))}, fmt.Sprintf("note\t%d\n\\", id))
	return err
}

func (w *workload) step(ctx context.Context) error {
	tx, err := w.c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	for range 1 + w.rng.IntN(3) {
		r := w.rng
		switch k := r.IntN(10); {
		case k < 3 || len(w.ids) < 5:
			w.nextID++
			if err := w.account(ctx, tx, w.nextID); err != nil {
				return err
			}
			w.ids = append(w.ids, w.nextID)
			w.nextOrd++
			for l := range 1 + r.IntN(3) {
				if _, err := tx.Exec(ctx, `INSERT INTO public.lines VALUES ($1, $2, 1, $3)`, w.nextOrd, l, r.IntN(100)); err != nil {
					return err
				}
				w.lines = append(w.lines, [2]int{w.nextOrd, l})
			}
		case k < 6:
			i := r.IntN(len(w.ids))
			if _, err := tx.Exec(ctx, `UPDATE public.accounts SET version = version + 1, balance = balance + 1.5, opened = opened + interval '1 hour',
				meta = jsonb_set(meta, '{n}', to_jsonb(version)), photo = photo || '\x00'::bytea, note = NULL WHERE id = $1`, w.ids[i]); err != nil {
				return err
			}
			if len(w.lines) > 0 {
				l := w.lines[r.IntN(len(w.lines))]
				if _, err := tx.Exec(ctx, `UPDATE public.lines SET version = version + 1, qty = qty + 1 WHERE order_id = $1 AND line = $2`, l[0], l[1]); err != nil {
					return err
				}
			}
		case k < 8: // primary key changes
			i := r.IntN(len(w.ids))
			w.nextID++
			if _, err := tx.Exec(ctx, `UPDATE public.accounts SET id = $2, version = version + 1 WHERE id = $1`, w.ids[i], w.nextID); err != nil {
				return err
			}
			w.ids[i] = w.nextID
			if len(w.lines) > 0 {
				j := r.IntN(len(w.lines))
				l := w.lines[j]
				if _, err := tx.Exec(ctx, `UPDATE public.lines SET line = line + 100, version = version + 1 WHERE order_id = $1 AND line = $2`, l[0], l[1]); err != nil {
					return err
				}
				w.lines[j][1] += 100
			}
		default:
			i := r.IntN(len(w.ids))
			if _, err := tx.Exec(ctx, `DELETE FROM public.accounts WHERE id = $1`, w.ids[i]); err != nil {
				return err
			}
			w.ids = append(w.ids[:i], w.ids[i+1:]...)
			if len(w.lines) > 0 {
				j := r.IntN(len(w.lines))
				l := w.lines[j]
				if _, err := tx.Exec(ctx, `DELETE FROM public.lines WHERE order_id = $1 AND line = $2`, l[0], l[1]); err != nil {
					return err
				}
				w.lines = append(w.lines[:j], w.lines[j+1:]...)
			}
		}
	}
	if r := w.rng.IntN(10); r == 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO public.nopk VALUES ('refused')`); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// rowsOf returns each row of table as text, by primary key order.
func rowsOf(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, schema, table string) ([]string, error) {
	rows, err := q.Query(ctx, fmt.Sprintf("SELECT %s::text FROM %s t ORDER BY %s", compared[table], pgx.Identifier{schema, table}.Sanitize(), tables[table]))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// compare returns, per table, the source and replica row counts and the mismatches: rows
// present on one side only or with different contents.
func compare(ctx context.Context, src *pgx.Conn, db *pgxpool.Pool, replica string) (map[string][3]int, []string, error) {
	out := map[string][3]int{}
	var diff []string
	for table := range tables {
		a, err := rowsOf(ctx, src, "public", table)
		if err != nil {
			return nil, nil, err
		}
		b, err := rowsOf(ctx, db, replica, table)
		if err != nil {
			return nil, nil, err
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
		out[table] = [3]int{len(a), len(b), mis}
	}
	return out, diff, nil
}

func waitTopics(t *testing.T, brokers string, topics []string) {
	t.Helper()
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	testbed.Eventually(t, 90*time.Second, "Debezium's topics", func() (bool, string) {
		md, err := a.GetMetadata(nil, true, 5000)
		if err != nil {
			return false, err.Error()
		}
		for _, tp := range topics {
			if m, ok := md.Topics[tp]; !ok || m.Error.Code() != kafka.ErrNoError {
				return false, "no topic " + tp
			}
		}
		return true, ""
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = a.DeleteTopics(ctx, topics)
	})
}

func cli(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(eosinkBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("eosink %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
