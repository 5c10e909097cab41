package table_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/mapping"
	"github.com/eosink/eosink/sink/table"
)

// TestExprConfigErrors: expressions are compiled and type-checked by New, and each error
// names its option's path.
func TestExprConfigErrors(t *testing.T) {
	good := map[string]table.Column{"id": {From: "value.id"}}
	for _, tc := range []struct {
		c    table.Config
		want []string
	}{
		{table.Config{Table: "t", Columns: map[string]table.Column{"amount": {Expr: `value.amount.replace(",")`}}},
			[]string{`columns.amount.expr: 1:`, `found no matching overload for 'replace'`}},
		{table.Config{Table: "t", Columns: map[string]table.Column{"amount": {Expr: `nosuch + 1`}}},
			[]string{`columns.amount.expr: 1:1: undeclared reference to 'nosuch'`}},
		{table.Config{Table: "t", Columns: map[string]table.Column{"amount": {From: "value.a", Expr: `value.a`}}},
			[]string{`columns.amount.expr: give from or expr, not both`}},
		{table.Config{Table: "t", Columns: good, Where: `value.status +`}, []string{`where: 1:`, `Syntax error`}},
		{table.Config{Table: "t", Columns: good, Where: `topic`}, []string{`where: the expression gives string, not bool`}},
		{table.Config{Table: "t", Columns: good, Check: []table.Check{{Expr: `true`}, {Expr: `offset + 1`}}},
			[]string{`check[1].expr: the expression gives int, not bool`}},
		{table.Config{Columns: good, Routes: []table.Route{{Topic: "a", Table: "a", Where: `offset`}}},
			[]string{`routes[0].where: the expression gives int, not bool`}},
	} {
		_, err := table.New(tc.c)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("New(%+v) = %v, want an error containing %q", tc.c, err, w)
			}
		}
		if err != nil && strings.Count(err.Error(), "\n") > 0 && len(tc.want) == 1 {
			t.Errorf("New(%+v): several errors: %v", tc.c, err)
		}
	}
	// The section's where is reported once, not once per route that takes it.
	_, err := table.New(table.Config{Table: "t", Columns: good, Where: "topic", Routes: []table.Route{{Topic: "a", Table: "a"}}})
	if err == nil || strings.Count(err.Error(), "where:") != 1 {
		t.Errorf("a bad section where with a route: %v, want one where: error", err)
	}
}

// TestExprConfigYAML: the yaml forms of expr, where and check, and their mistakes.
func TestExprConfigYAML(t *testing.T) {
	var c table.Config
	text := `table: t
columns:
  amount: {expr: 'value.amount.replace(",", ".")', required: true}
where: value.kind != "test"
check:
  - value.id != ""
  - {expr: 'value.status in ["paid", "refunded"]', message: "unknown status"}
`
	if err := yaml.Unmarshal([]byte(text), &c); err != nil {
		t.Fatal(err)
	}
	if c.Columns["amount"].Expr != `value.amount.replace(",", ".")` || c.Where != `value.kind != "test"` || len(c.Check) != 2 ||
		c.Check[0].Expr != `value.id != ""` || c.Check[1].Message != "unknown status" {
		t.Fatalf("decoded %+v", c)
	}
	if _, err := table.New(c); err != nil {
		t.Fatal(err)
	}
	bad := `table: t
columns:
  amount: {expr: [1]}
check:
  - {expr: "true", mesage: x}
  - [1, 2]
`
	c = table.Config{}
	if err := yaml.Unmarshal([]byte(bad), &c); err != nil {
		t.Fatal(err)
	}
	_, err := table.New(c)
	for _, w := range []string{"columns.amount.expr: want a CEL expression", `check[0].mesage: unknown key`, `did you mean message`,
		"check[1]: a check is a CEL condition or {expr: CEL, message: TEXT}"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("New: %v, want an error containing %q", err, w)
		}
	}
	if err != nil && strings.Contains(err.Error(), "columns.amount.from") {
		t.Errorf("New: %v: a refused expr also reported as a missing from", err)
	}
}

// TestExprWritesThroughTheTable: on real PostgreSQL, an expression normalises "12,30" into
// a numeric column exactly, a where skips records (counted as skipped; they have no row),
// a check dead-letters a record with its message, an evaluation error is poison, and a COPY
// error after a skipped record is still the poison of its own record.
func TestExprWritesThroughTheTable(t *testing.T) {
	db, schema := testDB(t)
	ctx := context.Background()
	tbl := pgx.Identifier{schema, "payments"}.Sanitize()
	exec(t, db, "CREATE TABLE "+tbl+" (id text PRIMARY KEY, amount numeric NOT NULL, status text, event text, qty int)")
	for _, onConflict := range []string{"error", "nothing"} {
		exec(t, db, "TRUNCATE "+tbl)
		exec(t, db, "TRUNCATE "+pgx.Identifier{schema, "dead_letters"}.Sanitize())
		p, err := table.New(table.Config{Table: schema + ".payments", OnConflict: onConflict,
			Where: `!(has(value.test) && value.test)`,
			Check: []table.Check{{Expr: `value.status in ["paid", "refunded"]`, Message: "status is not paid or refunded"}},
			Columns: map[string]table.Column{
				"id":     {From: "value.id", Required: true},
				"amount": {Expr: `value.amount.replace(",", ".")`, Required: true},
				"status": {From: "value.status"},
				"event":  {Expr: `value.id + ":" + value.status`},
				"qty":    {From: "value.qty"},
			}})
		if err != nil {
			t.Fatal(err)
		}
		values := []string{
			`{"id": "p1", "amount": "12,30", "status": "paid"}`,
			`{"id": "p2", "amount": "12345678901234567,89", "status": "refunded"}`,
			`{"id": "p3", "amount": "1,00", "status": "paid", "test": true}`, // skipped by the where
			`{"id": "p4", "amount": "2,00", "status": "lost"}`,               // the check: dead-lettered
			`{"id": "p5", "amount": 7, "status": "paid"}`,                    // replace on an int: poison
			`{"id": "p6", "amount": "3,50", "status": "paid", "qty": "x"}`,   // a COPY error after a skipped record
		}
		recs := make([]sink.Record, len(values))
		for i, v := range values {
			recs[i] = sink.Record{Topic: "pay", Offset: int64(i), Value: []byte(v)}
		}
		var res engine.WriteResult
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			var err error
			res, err = engine.WriteBatch(ctx, tx, p, sink.Batch{Topic: "pay", Records: recs},
				engine.WriteOptions{Isolate: true, Schema: schema, Pipeline: "p"})
			return err
		})
		if err != nil {
			t.Fatalf("on_conflict %s: %v", onConflict, err)
		}
		if res.Applied != 2 || res.Skipped != 1 || len(res.DeadLettered) != 3 {
			t.Errorf("on_conflict %s: applied %d, skipped %d, dead %d; want 2, 1 (the where), 3", onConflict, res.Applied, res.Skipped, len(res.DeadLettered))
		}
		got, err := rows(ctx, db, "SELECT format('%s=%s/%s/%s', id, amount, status, event) FROM "+tbl+" ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		if want := "p1=12.30/paid/p1:paid p2=12345678901234567.89/refunded/p2:refunded"; strings.Join(got, " ") != want {
			t.Errorf("on_conflict %s: rows %q, want %q", onConflict, strings.Join(got, " "), want)
		}
		dead, err := rows(ctx, db, `SELECT "offset" || ' ' || error FROM `+pgx.Identifier{schema, "dead_letters"}.Sanitize()+` ORDER BY "offset"`)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"3 ", "check failed: status is not paid or refunded", "4 ", "no such overload", "5 ", "column qty"}
		if len(dead) != 3 {
			t.Fatalf("on_conflict %s: dead letters %q", onConflict, dead)
		}
		for i := range dead {
			if !strings.HasPrefix(dead[i], want[2*i]) || !strings.Contains(dead[i], want[2*i+1]) {
				t.Errorf("on_conflict %s: dead letter %q, want offset %s with %q", onConflict, dead[i], want[2*i], want[2*i+1])
			}
		}
		// Without isolation, the COPY error names its own record, not the skipped one at its line.
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			_, err := engine.WriteBatch(ctx, tx, p, sink.Batch{Topic: "pay", Records: []sink.Record{recs[0], recs[2], recs[5]}}, engine.WriteOptions{})
			return err
		})
		var pe *sink.PoisonError
		if !errors.As(err, &pe) || pe.Offset != 5 {
			t.Errorf("on_conflict %s: a COPY error after a skipped record: %v, want the poison of offset 5", onConflict, err)
		}
	}
}

// TestExprUpsert: the upsert plugin takes the same expressions; a where that drops
// tombstones drops them before delete_on_tombstone, and a batch the where empties writes
// nothing and counts every record as skipped.
func TestExprUpsert(t *testing.T) {
	db, schema := testDB(t)
	ctx := context.Background()
	tbl := pgx.Identifier{schema, "latest"}.Sanitize()
	exec(t, db, "CREATE TABLE "+tbl+" (k text PRIMARY KEY, status text)")
	p, err := table.NewUpsert(table.UpsertConfig{Key: []string{"k"}, DeleteOnTombstone: true, Config: table.Config{
		Table: schema + ".latest", Where: `value == null || value.status != "draft"`,
		Columns: map[string]table.Column{"k": {From: "key"}, "status": {Expr: `value.status.upperAscii()`}}}})
	if err != nil {
		t.Fatal(err)
	}
	write := func(recs ...sink.Record) engine.WriteResult {
		t.Helper()
		for i := range recs {
			recs[i].Topic, recs[i].Offset = "t", int64(i)
		}
		var res engine.WriteResult
		if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			var err error
			res, err = engine.WriteBatch(ctx, tx, p, sink.Batch{Topic: "t", Records: recs}, engine.WriteOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return res
	}
	write(sink.Record{Key: []byte("a"), Value: []byte(`{"status": "open"}`)}, sink.Record{Key: []byte("b"), Value: []byte(`{"status": "open"}`)},
		sink.Record{Key: []byte("a"), Value: []byte(`{"status": "draft"}`)}) // skipped: a stays OPEN
	if res := write(sink.Record{Key: []byte("b")}, sink.Record{Key: []byte("a"), Value: []byte(`{"status": "draft"}`)}); res.Skipped != 1 || res.Applied != 1 {
		t.Errorf("tombstone and draft: applied %d, skipped %d; want 1 and 1", res.Applied, res.Skipped)
	}
	if res := write(sink.Record{Key: []byte("a"), Value: []byte(`{"status": "draft"}`)}); res.Skipped != 1 || res.Applied != 0 {
		t.Errorf("a batch the where empties: applied %d, skipped %d; want 0 and 1", res.Applied, res.Skipped)
	}
	got, err := rows(ctx, db, "SELECT k || '=' || status FROM "+tbl+" ORDER BY k")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "a=OPEN" {
		t.Errorf("rows %q, want a=OPEN (b deleted by its tombstone, the drafts skipped)", got)
	}
	// A tombstone the where does not guard is poison, not a crash.
	p2, err := table.NewUpsert(table.UpsertConfig{Key: []string{"k"}, DeleteOnTombstone: true, Config: table.Config{
		Table: schema + ".latest", Where: `value.status != "draft"`, Columns: map[string]table.Column{"k": {From: "key"}, "status": {From: "value.status"}}}})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := engine.WriteBatch(ctx, tx, p2, sink.Batch{Topic: "t", Records: []sink.Record{{Topic: "t", Key: []byte("a")}}}, engine.WriteOptions{})
		return err
	})
	if !sink.IsPoison(err) || !errors.Is(err, mapping.ErrExpr) {
		t.Errorf("a tombstone into value.status: %v, want poison wrapping mapping.ErrExpr", err)
	}
}
