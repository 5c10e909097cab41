package sqlsink_test

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
	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/sinktest"
	"github.com/eosink/eosink/sink/sqlsink"
)

func exec(t *testing.T, db *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// The conformance plugin writes each record to two tables: a history row, and a total per
// account that a CHECK constraint keeps non-negative.
func ledgerTables(t *testing.T, db *pgxpool.Pool, schema string) {
	exec(t, db, "CREATE TABLE "+pgx.Identifier{schema, "history"}.Sanitize()+` (id bigint NOT NULL, account text NOT NULL, amount integer, src_offset bigint)`)
	exec(t, db, "CREATE TABLE "+pgx.Identifier{schema, "totals"}.Sanitize()+` (account text PRIMARY KEY, amount integer NOT NULL CHECK (amount >= 0), n integer NOT NULL)`)
}

func ledgerConfig(schema string) sqlsink.Config {
	h, tt := pgx.Identifier{schema, "history"}.Sanitize(), pgx.Identifier{schema, "totals"}.Sanitize()
	return sqlsink.Config{
		Params: map[string]sqlsink.Param{
			"id": {From: "value.id", Required: true}, "account": {From: "value.account", Required: true},
			"amount": {From: "value.amount"}, "off": {From: "offset"},
		},
		Statements: []string{
			"INSERT INTO " + h + " (id, account, amount, src_offset) VALUES (@id, @account, @amount, @off)",
			"INSERT INTO " + tt + " AS t (account, amount, n) VALUES (@account, @amount, 1) ON CONFLICT (account) DO UPDATE SET amount = t.amount + excluded.amount, n = t.n + 1",
		},
	}
}

func record(i int) sink.Record {
	return sink.Record{Key: []byte(fmt.Sprintf("k-%d", i)),
		Value: []byte(fmt.Sprintf(`{"id": %d, "account": "a-%d", "amount": %d, "note": "é"}`, i, i, i*3))}
}

// poison cycles through the kinds of bad records: not JSON, a required field missing, a
// type PostgreSQL refuses in the first statement, a CHECK violation in the second statement
// (after the first succeeded), a NUL byte, a tombstone.
func poison(i int) sink.Record {
	switch i % 6 {
	case 0:
		return sink.Record{Value: []byte(`{"id": `)}
	case 1:
		return sink.Record{Value: []byte(fmt.Sprintf(`{"account": "a-%d", "amount": 1}`, i))}
	case 2:
		return sink.Record{Value: []byte(fmt.Sprintf(`{"id": %d, "account": "a-%d", "amount": "lots"}`, i, i))}
	case 3:
		return sink.Record{Value: []byte(fmt.Sprintf(`{"id": %d, "account": "a-%d", "amount": -1}`, i, i))}
	case 4:
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

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin {
			ledgerTables(t, db, schema)
			p, err := sqlsink.New(ledgerConfig(schema))
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Record: record,
		Poison: poison,
		// One entry per record, covering both tables: a second application would double the
		// total and its count, a missing one leave a side empty.
		State: func(ctx context.Context, db sink.DB, schema string) ([]string, error) {
			return rows(ctx, db, `SELECT format('%s/%s/%s/%s/%s/%s', h.id, account, h.amount, h.src_offset, t.amount, t.n) FROM `+
				pgx.Identifier{schema, "history"}.Sanitize()+` h FULL JOIN `+pgx.Identifier{schema, "totals"}.Sanitize()+` t USING (account)`)
		},
		Expect: func(r sink.Record) string {
			i := r.Offset
			return fmt.Sprintf("%d/a-%d/%d/%d/%d/1", i, i, i*3, i, i*3)
		},
	})
}

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
	schema := "sqlt_" + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name()))
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

func write(db *pgxpool.Pool, p sink.Plugin, isolate bool, schema string, recs ...sink.Record) (engine.WriteResult, error) {
	ctx := context.Background()
	for i := range recs {
		recs[i].Topic, recs[i].Offset = "t", int64(i)
	}
	var res engine.WriteResult
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		res, err = engine.WriteBatch(ctx, tx, p, sink.Batch{Topic: "t", Records: recs}, engine.WriteOptions{Isolate: isolate, Schema: schema, Pipeline: "p"})
		return err
	})
	return res, err
}

func prepared(t *testing.T, db *pgxpool.Pool, c sqlsink.Config) *sqlsink.SQL {
	t.Helper()
	p, err := sqlsink.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFailureNamesRecordAndStatement: the failing result's place in the pipelined batch
// names the record and the statement; a data error is that record's poison, and isolation
// keeps none of its statements' effects.
func TestFailureNamesRecordAndStatement(t *testing.T) {
	db, schema := testDB(t)
	ledgerTables(t, db, schema)
	p := prepared(t, db, ledgerConfig(schema))
	recs := []sink.Record{record(0), record(1), record(2), poison(3), record(4)}
	_, err := write(db, p, false, schema, recs...)
	var pe *sink.PoisonError
	if !errors.As(err, &pe) || pe.Offset != 3 || !strings.Contains(err.Error(), "statements[1]") || !strings.Contains(err.Error(), "23514") {
		t.Fatalf("got %v, want the poison of offset 3 naming statements[1] and the check violation (23514)", err)
	}
	res, err := write(db, p, true, schema, recs...)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.DeadLettered) != 1 || res.DeadLettered[0].Record.Offset != 3 || res.Applied != 4 {
		t.Fatalf("isolation: %+v, want offset 3 dead-lettered and 4 applied", res)
	}
	// The poison record's first statement succeeded in the batch; nothing of it is kept.
	got, err := rows(context.Background(), db, `SELECT string_agg(account, ',' ORDER BY account) FROM (SELECT account FROM `+
		pgx.Identifier{schema, "history"}.Sanitize()+` UNION ALL SELECT account FROM `+pgx.Identifier{schema, "totals"}.Sanitize()+`) x`)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a-0,a-0,a-1,a-1,a-2,a-2,a-4,a-4"; got[0] != want {
		t.Fatalf("tables hold %s, want %s", got[0], want)
	}
	dl, err := rows(context.Background(), db, `SELECT "offset"::text || ' ' || error FROM `+pgx.Identifier{schema, "dead_letters"}.Sanitize())
	if err != nil || len(dl) != 1 || !strings.HasPrefix(dl[0], "3 ") || !strings.Contains(dl[0], "statements[1]") {
		t.Fatalf("dead letters %q (%v), want offset 3 with the statement named", dl, err)
	}
}

// TestOtherErrorsAreNotPoison: an error that is not a data error (here a serialization
// failure raised by a function) is returned as it is, for the engine to retry.
func TestOtherErrorsAreNotPoison(t *testing.T) {
	db, schema := testDB(t)
	fn := pgx.Identifier{schema, "boom"}.Sanitize()
	exec(t, db, "CREATE FUNCTION "+fn+`(x text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN IF x = 'boom' THEN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END IF; END $$`)
	p := prepared(t, db, sqlsink.Config{Params: map[string]sqlsink.Param{"x": {From: "value.x"}},
		Statements: []string{"SELECT 1", "SELECT " + fn + "(@x)"}})
	_, err := write(db, p, true, schema, sink.Record{Value: []byte(`{"x": "ok"}`)}, sink.Record{Value: []byte(`{"x": "boom"}`)})
	if err == nil || sink.IsPoison(err) || pgerr.Classify(err) != pgerr.Transient || !strings.Contains(err.Error(), "statements[1] (record at offset 1)") {
		t.Fatalf("got %v, want a transient, non-poison error naming statements[1] and offset 1", err)
	}
}

// TestPrepareNamesTheStatement: a statement PostgreSQL cannot parse or plan fails Prepare
// with its index and PostgreSQL's message.
func TestPrepareNamesTheStatement(t *testing.T) {
	db, schema := testDB(t)
	ledgerTables(t, db, schema)
	for i, bad := range []string{
		"INSERT INTO " + schema + ".nosuch (id) VALUES (@id)",
		"INSRT INTO " + schema + ".history (id) VALUES (@id)",
		"INSERT INTO " + schema + ".history (nosuch) VALUES (@id)",
		"SELECT @id",
	} {
		c := sqlsink.Config{Params: map[string]sqlsink.Param{"id": {From: "value.id"}},
			Statements: []string{"SELECT 1", bad}}
		p, err := sqlsink.New(c)
		if err != nil {
			t.Fatal(err)
		}
		err = p.Prepare(context.Background(), db)
		want := []string{"does not exist", "syntax error", "does not exist", ""}[i]
		if i == 3 {
			// An untyped parameter is text: no error.
			if err != nil {
				t.Errorf("%s: %v", bad, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "sql: statements[1]: ERROR: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want statements[1] and %q", bad, err, want)
		}
	}
}

// TestSimpleProtocolRefused: pgx's simple protocol would put values into SQL text.
func TestSimpleProtocolRefused(t *testing.T) {
	_, schema := testDB(t)
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	db, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := sqlsink.New(sqlsink.Config{Params: map[string]sqlsink.Param{"x": {From: "value"}}, Statements: []string{"SELECT @x::text"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(context.Background(), db); err == nil || !strings.Contains(err.Error(), "simple protocol") {
		t.Fatalf("Prepare with the simple protocol: %v, want a refusal", err)
	}
	if _, err := write(db, p, false, schema, sink.Record{Value: []byte(`"x"`)}); err == nil || !strings.Contains(err.Error(), "simple protocol") {
		t.Fatalf("Write with the simple protocol: %v, want a refusal", err)
	}
}

// TestValuesBind: JSON strings, numbers, booleans, nulls, objects and bytes bind into the
// types PostgreSQL infers, and SQL in the data is only data.
func TestValuesBind(t *testing.T) {
	db, schema := testDB(t)
	tbl := pgx.Identifier{schema, "v"}.Sanitize()
	exec(t, db, "CREATE TABLE "+tbl+` (s text, n numeric, i integer, b boolean, j jsonb, raw bytea, sb bytea, at timestamptz, missing text, k bytea)`)
	p := prepared(t, db, sqlsink.Config{KeyFormat: "bytes",
		Params: map[string]sqlsink.Param{"s": {From: "value.s"}, "n": {From: "value.n"}, "i": {From: "value.i"}, "b": {From: "value.b"},
			"j": {From: "value.j"}, "sb": {From: "value.s"}, "at": {From: "timestamp"}, "missing": {From: "value.nope"}, "k": {From: "key"}},
		Statements: []string{"INSERT INTO " + tbl + " (s, n, i, b, j, sb, at, missing, k) VALUES (@s, @n, @i, @b, @j, @sb, @at, @missing, @k)"}})
	r := sink.Record{Key: []byte{0, 1, 0xff}, Value: []byte(`{"s": "x'); DROP TABLE v; --", "n": 1.25e2, "i": -7, "b": true, "j": {"a": [1, null, "é"]}}`)}
	r.Timestamp = r.Timestamp.AddDate(2024, 0, 0)
	if _, err := write(db, p, false, schema, r); err != nil {
		t.Fatal(err)
	}
	got, err := rows(context.Background(), db, `SELECT format('%s|%s|%s|%s|%s|%s|%s|%s|%s', s, n, i, b, j, encode(sb, 'escape'), extract(year from at), missing IS NULL, encode(k, 'hex')) FROM `+tbl)
	if err != nil {
		t.Fatal(err)
	}
	want := `x'); DROP TABLE v; --|125|-7|t|{"a": [1, null, "é"]}|x'); DROP TABLE v; --|2025|t|0001ff`
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	// A number that is not an integer is a data error: poison.
	bad := sink.Record{Value: []byte(`{"i": 1.5}`)}
	if _, err := write(db, p, false, schema, bad); !sink.IsPoison(err) {
		t.Fatalf("1.5 into integer: %v, want poison", err)
	}
}

// TestParamCastRefusesWhatPostgreSQLWouldGuess: PostgreSQL reads "yesterday" into a
// timestamptz (@at::timestamptz) as the day before; a parameter with cast: rfc3339 makes
// that record poison, dead-lettered with the parameter and the value named, and writes the
// good records' timestamps exactly; a default fills an absent field through the cast.
func TestParamCastRefusesWhatPostgreSQLWouldGuess(t *testing.T) {
	db, schema := testDB(t)
	tbl := pgx.Identifier{schema, "payments"}.Sanitize()
	exec(t, db, "CREATE TABLE "+tbl+` (id integer PRIMARY KEY, at timestamptz, at_ms timestamptz, region text)`)
	stmt := "INSERT INTO " + tbl + " (id, at, at_ms, region) VALUES (@id, @at::timestamptz, @ms, @region)"
	params := func(cast string) map[string]sqlsink.Param {
		region := "eu"
		return map[string]sqlsink.Param{"id": {From: "value.id", Required: true}, "at": {From: "value.at", Cast: cast},
			"ms": {From: "value.ms", Cast: "epoch_ms"}, "region": {From: "value.region", Default: &region}}
	}
	recs := func() []sink.Record {
		return []sink.Record{
			{Value: []byte(`{"id": 1, "at": "2023-11-14T23:13:20.5+01:00", "ms": 1700000000123, "region": "us"}`)},
			{Value: []byte(`{"id": 2, "at": "yesterday", "ms": 0}`)},
			{Value: []byte(`{"id": 3, "at": "2023-11-14 22:13:20.000001"}`)},
		}
	}
	state := func() string {
		got, err := rows(context.Background(), db, `SELECT coalesce(string_agg(format('%s|%s|%s|%s', id, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'),
  to_char(at_ms AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), region), ' ' ORDER BY id), '') FROM `+tbl)
		if err != nil {
			t.Fatal(err)
		}
		return got[0]
	}

	// Without a cast PostgreSQL takes "yesterday": the bug the cast is for.
	res, err := write(db, prepared(t, db, sqlsink.Config{Params: params(""), Statements: []string{stmt}}), true, schema, recs()...)
	if err != nil || res.Applied != 3 {
		t.Fatalf("without a cast: %+v %v, want all three applied", res, err)
	}
	var guessed bool
	if err := db.QueryRow(context.Background(), "SELECT at::date = current_date - 1 FROM "+tbl+" WHERE id = 2").Scan(&guessed); err != nil || !guessed {
		t.Fatalf("without a cast, PostgreSQL read yesterday as %v (%v)", guessed, err)
	}
	exec(t, db, "TRUNCATE "+tbl)

	res, err = write(db, prepared(t, db, sqlsink.Config{Params: params("rfc3339"), Statements: []string{stmt}}), true, schema, recs()...)
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 2 || len(res.DeadLettered) != 1 || res.DeadLettered[0].Record.Offset != 1 {
		t.Fatalf("with cast rfc3339: %+v, want offset 1 dead-lettered and 2 applied", res)
	}
	const reason = `sql: parameter @at (value.at): cast rfc3339: "yesterday" is not an RFC 3339 timestamp`
	dl, err := rows(context.Background(), db, `SELECT "offset"::text || ' ' || error FROM `+pgx.Identifier{schema, "dead_letters"}.Sanitize())
	if err != nil || len(dl) != 1 || !strings.HasPrefix(dl[0], "1 ") || !strings.Contains(dl[0], reason) {
		t.Fatalf("dead letters %q (%v), want offset 1 with %q", dl, err, reason)
	}
	if got, want := state(), "1|2023-11-14T22:13:20.500000|2023-11-14T22:13:20.123000|us 3|2023-11-14T22:13:20.000001||eu"; got != want {
		t.Fatalf("rows\n got %s\nwant %s", got, want)
	}
}

// TestTombstones: poison by default, skip, or the tombstone statements.
func TestTombstones(t *testing.T) {
	db, schema := testDB(t)
	tbl := pgx.Identifier{schema, "kv"}.Sanitize()
	exec(t, db, "CREATE TABLE "+tbl+` (k text PRIMARY KEY, v text)`)
	upsert := "INSERT INTO " + tbl + " (k, v) VALUES (@k, @v) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
	params := map[string]sqlsink.Param{"k": {From: "key", Required: true}, "v": {From: "value.v"}}
	kv := func(k, v string) sink.Record {
		r := sink.Record{Key: []byte(k)}
		if v != "" {
			r.Value = []byte(`{"v": "` + v + `"}`)
		}
		return r
	}
	state := func() string {
		got, err := rows(context.Background(), db, `SELECT coalesce(string_agg(k || '=' || v, ' ' ORDER BY k), '') FROM `+tbl)
		if err != nil {
			t.Fatal(err)
		}
		return got[0]
	}
	p := prepared(t, db, sqlsink.Config{Params: params, Statements: []string{upsert}})
	if _, err := write(db, p, false, schema, kv("a", "1"), kv("a", "")); !sink.IsPoison(err) {
		t.Fatalf("tombstone by default: %v, want poison", err)
	}
	p = prepared(t, db, sqlsink.Config{Params: params, Statements: []string{upsert}, OnTombstone: "skip"})
	if _, err := write(db, p, false, schema, kv("a", "1"), kv("a", ""), kv("b", "2")); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != "a=1 b=2" {
		t.Fatalf("skip: %s", got)
	}
	p = prepared(t, db, sqlsink.Config{Params: params, Statements: []string{upsert}, TombstoneStatements: []string{"DELETE FROM " + tbl + " WHERE k = @k"}})
	if _, err := write(db, p, false, schema, kv("a", ""), kv("c", "3"), kv("b", ""), kv("b", "4")); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != "b=4 c=3" {
		t.Fatalf("tombstone statements: %s", got)
	}
}

// batchTracer records the batches a connection sends and their queries.
type batchTracer struct {
	batches int
	queries []string
}

func (bt *batchTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (bt *batchTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (bt *batchTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	bt.batches++
	return ctx
}
func (bt *batchTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	bt.queries = append(bt.queries, fmt.Sprintf("%s %v", strings.Fields(d.SQL)[0], d.Args))
}
func (bt *batchTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestOneBatchPerWrite: a Write sends one pipelined batch holding every statement of every
// record, in record order, with the values as arguments.
func TestOneBatchPerWrite(t *testing.T) {
	_, schema := testDB(t)
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	bt := &batchTracer{}
	cfg.ConnConfig.Tracer = bt
	cfg.MaxConns = 1
	db, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ledgerTables(t, db, schema)
	p := prepared(t, db, ledgerConfig(schema))
	if _, err := write(db, p, false, schema, record(0), record(1), record(2)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"INSERT [0 a-0 0 0]", "INSERT [a-0 0]", "INSERT [1 a-1 3 1]", "INSERT [a-1 3]", "INSERT [2 a-2 6 2]", "INSERT [a-2 6]",
	}
	if bt.batches != 1 || fmt.Sprint(bt.queries) != fmt.Sprint(want) {
		t.Fatalf("%d batches with %q; want 1 with %q", bt.batches, bt.queries, want)
	}
}

// TestRoutesWrite: each topic runs its route's statements; Prepare checks every route's.
func TestRoutesWrite(t *testing.T) {
	db, schema := testDB(t)
	a, b := pgx.Identifier{schema, "a"}.Sanitize(), pgx.Identifier{schema, "b"}.Sanitize()
	exec(t, db, "CREATE TABLE "+a+" (x text); CREATE TABLE "+b+" (x text, n integer)")
	c := sqlsink.Config{Params: map[string]sqlsink.Param{"x": {From: "value.x"}},
		Routes: []sqlsink.Route{{Topic: "orders", Statements: []string{"INSERT INTO " + a + " VALUES (@x)"}},
			{Topic: "^audit\\.", Statements: []string{"INSERT INTO " + b + " VALUES (@x, 1)", "UPDATE " + b + " SET n = n + 1 WHERE x = @x"}}}}
	p := prepared(t, db, c)
	ctx := context.Background()
	for _, topic := range []string{"orders", "audit.x"} {
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			_, err := engine.WriteBatch(ctx, tx, p, sink.Batch{Topic: topic, Records: []sink.Record{{Topic: topic, Value: []byte(`{"x": "` + topic + `"}`)}}}, engine.WriteOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := rows(ctx, db, "SELECT x || '/' || coalesce(n::text, '-') FROM (SELECT x, NULL::int n FROM "+a+" UNION ALL SELECT x, n FROM "+b+") u ORDER BY 1")
	if err != nil || fmt.Sprint(got) != "[audit.x/2 orders/-]" {
		t.Fatalf("got %v (%v)", got, err)
	}
	if err := p.CheckTopic("other"); !errors.Is(err, sink.ErrNoRoute) {
		t.Fatalf("CheckTopic(other): %v, want no route", err)
	}
	c.Routes[1].Statements[1] = "UPDATE " + schema + ".nosuch SET n = 1 WHERE x = @x"
	bad, err := sqlsink.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Prepare(ctx, db); err == nil || !strings.Contains(err.Error(), "sql: routes[1].statements[1]: ERROR: relation") {
		t.Fatalf("Prepare with a bad route statement: %v", err)
	}
}
