package table_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/sinktest"
	"github.com/eosink/eosink/sink/table"
)

func exec(t *testing.T, db *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func record(i int) sink.Record {
	return sink.Record{Key: []byte(fmt.Sprintf("k-%d", i)),
		Value: []byte(fmt.Sprintf(`{"id": %d, "account": "a-%d", "amount": %d, "note": "tab\there \\ \"quoted\" é"}`, i, i, i*3))}
}

// poison cycles through the kinds of bad records: not JSON, a required field missing, a
// type PostgreSQL refuses (found by COPY, isolated by halving), a NUL byte, a tombstone.
func poison(i int) sink.Record {
	switch i % 5 {
	case 0:
		return sink.Record{Value: []byte(`{"id": `)}
	case 1:
		return sink.Record{Value: []byte(fmt.Sprintf(`{"account": "a-%d", "amount": 1}`, i))}
	case 2:
		return sink.Record{Value: []byte(fmt.Sprintf(`{"id": %d, "account": "a-%d", "amount": "lots"}`, i, i))}
	case 3:
		return sink.Record{Value: []byte(fmt.Sprintf(`{"id": %d, "account": "a-\u0000%d", "amount": 1}`, i, i))}
	default:
		return sink.Record{Key: []byte("k"), Value: nil}
	}
}

func rows(ctx context.Context, db sink.DB, sql string) ([]string, error) {
	r, err := db.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(r, pgx.RowTo[string])
}

func TestTableConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin {
			tbl := pgx.Identifier{schema, "events"}.Sanitize()
			exec(t, db, "CREATE TABLE "+tbl+` (id bigint NOT NULL, account text, amount integer, note text, k text, src_offset bigint)`)
			p, err := table.New(table.Config{Table: schema + ".events", Columns: map[string]table.Column{
				"id": {From: "value.id", Required: true}, "account": {From: "value.account"}, "amount": {From: "value.amount"},
				"note": {From: "value.note"}, "k": {From: "key"}, "src_offset": {From: "offset"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Record: record,
		Poison: poison,
		State: func(ctx context.Context, db sink.DB, schema string) ([]string, error) {
			return rows(ctx, db, `SELECT format('%s/%s/%s/%s/%s/%s', id, account, amount, note, k, src_offset) FROM `+pgx.Identifier{schema, "events"}.Sanitize())
		},
		Expect: func(r sink.Record) string {
			i := r.Offset
			return fmt.Sprintf("%d/a-%d/%d/tab\there \\ \"quoted\" é/k-%d/%d", i, i, i*3, i, i)
		},
	})
}

func upsertHarness(t *testing.T) sinktest.Harness {
	return sinktest.Harness{
		New: func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin {
			tbl := pgx.Identifier{schema, "balances"}.Sanitize()
			exec(t, db, "CREATE TABLE "+tbl+` (account text PRIMARY KEY, amount integer NOT NULL, src_offset bigint)`)
			p, err := table.NewUpsert(table.UpsertConfig{Key: []string{"account"}, Config: table.Config{Table: schema + ".balances",
				Columns: map[string]table.Column{"account": {From: "value.account"}, "amount": {From: "value.amount"}, "src_offset": {From: "offset"}}}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Record: record,
		Poison: poison,
		State: func(ctx context.Context, db sink.DB, schema string) ([]string, error) {
			return rows(ctx, db, `SELECT format('%s/%s/%s', account, amount, src_offset) FROM `+pgx.Identifier{schema, "balances"}.Sanitize())
		},
		Expect: func(r sink.Record) string { return fmt.Sprintf("a-%d/%d/%d", r.Offset, r.Offset*3, r.Offset) },
	}
}

func TestUpsertConformance(t *testing.T) { sinktest.Run(t, upsertHarness(t)) }

// testDB returns a pool and a fresh schema holding the framework's tables.
func testDB(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: these tests need a real PostgreSQL (make test starts one)")
	}
	db, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	schema := "tt_" + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name()))
	if len(schema) > 60 {
		schema = schema[:60]
	}
	exec(t, db, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	if err := sink.Migrate(context.Background(), url, schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec(t, db, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return db, schema
}

func writeCommit(t *testing.T, db *pgxpool.Pool, p sink.Plugin, recs ...sink.Record) {
	t.Helper()
	ctx := context.Background()
	for i := range recs {
		recs[i].Topic, recs[i].Offset = "t", int64(i)
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := engine.WriteBatch(ctx, tx, p, sink.Batch{Topic: "t", Records: recs}, engine.WriteOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("write: %v", err)
	}
}

func TestUpsertLastWinsAndTombstones(t *testing.T) {
	db, schema := testDB(t)
	tbl := pgx.Identifier{schema, "balances"}.Sanitize()
	exec(t, db, "CREATE TABLE "+tbl+` (account text PRIMARY KEY, amount integer NOT NULL)`)
	kv := func(k, v string) sink.Record {
		r := sink.Record{Key: []byte(k)}
		if v != "" {
			r.Value = []byte(v)
		}
		return r
	}
	cols := map[string]table.Column{"account": {From: "key"}, "amount": {From: "value.amount"}}
	for _, tc := range []struct {
		mode string
		want string
	}{
		{"update", "a=3 c=7"},
		{"nothing", "a=1 b=5 c=7"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			exec(t, db, "TRUNCATE "+tbl)
			del := tc.mode == "update" // "nothing" refuses delete_on_tombstone (see below)
			p, err := table.NewUpsert(table.UpsertConfig{Key: []string{"account"}, OnConflict: tc.mode, DeleteOnTombstone: del,
				Config: table.Config{Table: schema + ".balances", Columns: cols}})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Prepare(context.Background(), db); err != nil {
				t.Fatal(err)
			}
			writeCommit(t, db, p, kv("a", `{"amount":1}`), kv("b", `{"amount":5}`), kv("a", `{"amount":2}`), kv("a", `{"amount":3}`))
			if del {
				writeCommit(t, db, p, kv("b", ""), kv("c", `{"amount":7}`)) // b deleted by its tombstone
			} else {
				writeCommit(t, db, p, kv("b", `{"amount":6}`), kv("c", `{"amount":7}`)) // b stays 5: the first wins
			}
			got, err := rows(context.Background(), db, "SELECT string_agg(account || '=' || amount, ' ' ORDER BY account) FROM "+tbl)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("table holds %q, want %q", got, tc.want)
			}
		})
	}
}

func TestUpsertRefusesNothingWithTombstoneDeletes(t *testing.T) {
	_, err := table.NewUpsert(table.UpsertConfig{Key: []string{"k"}, OnConflict: "nothing", DeleteOnTombstone: true,
		Config: table.Config{Table: "t", Columns: map[string]table.Column{"k": {From: "key"}}}})
	if err == nil || !strings.Contains(err.Error(), "cannot be combined") {
		t.Fatalf("NewUpsert = %v, want a refusal: the result would depend on batch boundaries", err)
	}
}

func TestConfigErrorsAtPrepare(t *testing.T) {
	db, schema := testDB(t)
	exec(t, db, "CREATE TABLE "+pgx.Identifier{schema, "nokey"}.Sanitize()+` (account text, amount integer)`)
	ctx := context.Background()
	cols := map[string]table.Column{"account": {From: "key"}, "amount": {From: "value.amount"}}
	missing, _ := table.New(table.Config{Table: schema + ".nosuch", Columns: cols})
	wrongCol, _ := table.New(table.Config{Table: schema + ".nokey", Columns: map[string]table.Column{"acct": {From: "key"}}})
	noIndex, _ := table.NewUpsert(table.UpsertConfig{Key: []string{"account"}, Config: table.Config{Table: schema + ".nokey", Columns: cols}})
	for _, tc := range []struct {
		name string
		p    sink.Preparer
		want string
	}{
		{"missing table", missing, "does not exist"},
		{"missing column", wrongCol, `has no column acct`},
		{"key without unique index", noIndex, "no unique or exclusion constraint"},
	} {
		err := tc.p.Prepare(ctx, db)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Prepare = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		c    table.Config
		want string
	}{
		{table.Config{Columns: cols}, "table: required"},
		{table.Config{Table: "a.b.c", Columns: cols}, "not table or schema.table"},
		{table.Config{Table: "t"}, "at least one column"},
		{table.Config{Table: "t", Columns: map[string]table.Column{"x": {From: "value.a"}}, ValueFormat: "bytes"}, "not json"},
		{table.Config{Table: "t", Columns: map[string]table.Column{"x": {From: "valu"}}}, "valu"},
	} {
		if _, err := table.New(tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.c, err, tc.want)
		}
	}
}

// A value PostgreSQL refuses during the COPY is the poison of its own record, found by the
// line PostgreSQL reports, with the column named; for table and for upsert's staging COPY,
// at any line of the batch, and for a NOT NULL violation (no column in the context).
func TestCopyErrorsNameTheRecordAndColumn(t *testing.T) {
	db, schema := testDB(t)
	tbl := pgx.Identifier{schema, "items"}.Sanitize()
	exec(t, db, "CREATE TABLE "+tbl+` (id integer PRIMARY KEY, qty integer, note text NOT NULL)`)
	cols := map[string]table.Column{"id": {From: "value.id"}, "qty": {From: "value.qty"}, "note": {From: "value.note"}}
	tp, err := table.New(table.Config{Table: schema + ".items", Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	up, err := table.NewUpsert(table.UpsertConfig{Key: []string{"id"}, Config: table.Config{Table: schema + ".items", Columns: cols}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		p      sink.Plugin
		values []string
		offset int64
		want   string
	}{
		{"table, line 3", tp, []string{`{"id":1,"qty":1,"note":"a"}`, `{"id":2,"qty":2,"note":"b"}`, `{"id":3,"qty":"x","note":"c"}`, `{"id":4,"qty":4,"note":"d"}`},
			12, `column qty: ERROR: invalid input syntax for type integer: "x" (SQLSTATE 22P02)`},
		{"upsert, line 2", up, []string{`{"id":1,"qty":1,"note":"a"}`, `{"id":2,"qty":"2.5","note":"b"}`, `{"id":3,"qty":3,"note":"c"}`},
			11, `column qty: ERROR: invalid input syntax for type integer: "2.5" (SQLSTATE 22P02)`},
		{"table, NOT NULL at line 2", tp, []string{`{"id":1,"qty":1,"note":"a"}`, `{"id":2,"qty":2}`},
			11, `poison record t[2]@11: ERROR: null value in column "note"`}, // the message names the column
	} {
		recs := make([]sink.Record, len(tc.values))
		for i, v := range tc.values {
			recs[i] = sink.Record{Topic: "t", Partition: 2, Offset: int64(10 + i), Value: []byte(v)}
		}
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			return tc.p.Write(ctx, tx, sink.Batch{Topic: "t", Partition: 2, Records: recs})
		})
		var pe *sink.PoisonError
		if !errors.As(err, &pe) || pe.Offset != tc.offset || pe.Partition != 2 || !strings.Contains(err.Error(), tc.want) || !sink.IsPoison(err) {
			t.Errorf("%s: Write = %v, want poison at offset %d with %q", tc.name, err, tc.offset, tc.want)
		}
	}
}

func nothingHarness() sinktest.Harness {
	return sinktest.Harness{
		New: func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin {
			exec(t, db, "CREATE TABLE "+pgx.Identifier{schema, "log"}.Sanitize()+` (id bigint NOT NULL UNIQUE, account text, amount integer, src_offset bigint)`)
			p, err := table.New(table.Config{Table: schema + ".log", OnConflict: "nothing", Columns: map[string]table.Column{
				"id": {From: "value.id", Required: true}, "account": {From: "value.account"}, "amount": {From: "value.amount"}, "src_offset": {From: "offset"}}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Record: record,
		Poison: poison,
		State: func(ctx context.Context, db sink.DB, schema string) ([]string, error) {
			return rows(ctx, db, `SELECT format('%s/%s/%s/%s', id, account, amount, src_offset) FROM `+pgx.Identifier{schema, "log"}.Sanitize())
		},
		Expect: func(r sink.Record) string {
			return fmt.Sprintf("%d/a-%d/%d/%d", r.Offset, r.Offset, r.Offset*3, r.Offset)
		},
	}
}

func TestTableOnConflictNothingConformance(t *testing.T) { sinktest.Run(t, nothingHarness()) }

// TestTableOnConflictNothing: a row breaking the unique key, stored or earlier in the batch,
// is skipped (the first record of a key stays) and counted; with the default it is poison.
func TestTableOnConflictNothing(t *testing.T) {
	db, schema := testDB(t)
	tbl := pgx.Identifier{schema, "log"}.Sanitize()
	exec(t, db, "CREATE TABLE "+tbl+` (id integer UNIQUE, amount integer)`)
	cols := map[string]table.Column{"id": {From: "value.id"}, "amount": {From: "value.amount"}}
	v := func(id, amount int) sink.Record {
		return sink.Record{Topic: "t", Value: []byte(fmt.Sprintf(`{"id": %d, "amount": %d}`, id, amount))}
	}
	ctx := context.Background()
	write := func(p sink.Plugin, recs ...sink.Record) (engine.WriteResult, error) {
		for i := range recs {
			recs[i].Offset = int64(i)
		}
		var res engine.WriteResult
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) (err error) {
			res, err = engine.WriteBatch(ctx, tx, p, sink.Batch{Topic: "t", Records: recs}, engine.WriteOptions{})
			return err
		})
		return res, err
	}
	p, err := table.New(table.Config{Table: schema + ".log", Columns: cols, OnConflict: "nothing"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := write(p, v(1, 10), v(2, 20), v(1, 11), v(3, 30)); err != nil || res.Applied != 3 || res.Skipped != 1 {
		t.Fatalf("first batch: %+v, %v; want 3 applied, 1 skipped", res, err)
	}
	if res, err := write(p, v(2, 21), v(4, 40)); err != nil || res.Applied != 1 || res.Skipped != 1 {
		t.Fatalf("second batch: %+v, %v; want 1 applied, 1 skipped", res, err)
	}
	got, err := rows(ctx, db, "SELECT string_agg(id || '=' || amount, ' ' ORDER BY id) FROM "+tbl)
	if err != nil || len(got) != 1 || got[0] != "1=10 2=20 3=30 4=40" {
		t.Fatalf("log holds %q (%v), want 1=10 2=20 3=30 4=40", got, err)
	}
	def, err := table.New(table.Config{Table: schema + ".log", Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := write(def, v(5, 50), v(4, 41)); !sink.IsPoison(err) {
		t.Fatalf("default on_conflict: %v, want a poison error (unique violation)", err)
	}
	if _, err := table.New(table.Config{Table: "t", Columns: cols, OnConflict: "skip"}); err == nil || !strings.Contains(err.Error(), `on_conflict: "skip" is not error or nothing`) {
		t.Fatalf("on_conflict skip: %v", err)
	}
}
