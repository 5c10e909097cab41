package inbox_test

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
	"github.com/eosink/eosink/sink/inbox"
	"github.com/eosink/eosink/sink/sinktest"
	"github.com/eosink/eosink/sink/table"
)

func newInbox(t *testing.T, db *pgxpool.Pool, schema string) *inbox.Inbox {
	t.Helper()
	tbl := pgx.Identifier{schema, "orders"}.Sanitize()
	if _, err := db.Exec(context.Background(), "CREATE TABLE "+tbl+` (order_id text PRIMARY KEY, amount integer NOT NULL, total integer NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	inner, err := table.New(table.Config{Table: schema + ".orders", Columns: map[string]table.Column{
		"order_id": {From: "value.order_id", Required: true}, "amount": {From: "value.amount"}}})
	if err != nil {
		t.Fatal(err)
	}
	ib, err := inbox.New(inbox.Config{EventID: "value.event_id", Subscriber: "test", Schema: schema}, inner)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.MigratePlugin(context.Background(), os.Getenv("DATABASE_URL"), ib, nil); err != nil {
		t.Fatal(err)
	}
	return ib
}

func event(id string, order string, amount int) sink.Record {
	return sink.Record{Value: []byte(fmt.Sprintf(`{"event_id": %q, "order_id": %q, "amount": %d}`, id, order, amount))}
}

func TestInboxConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin { return newInbox(t, db, schema) },
		Record: func(i int) sink.Record {
			return event(fmt.Sprintf("e-%d", i), fmt.Sprintf("o-%d", i), i)
		},
		Poison: func(i int) sink.Record {
			switch i % 3 {
			case 0:
				return sink.Record{Value: []byte(fmt.Sprintf(`{"order_id": "o-%d", "amount": 1}`, i))} // no event id
			case 1:
				return sink.Record{Value: []byte(`not json`)}
			default:
				// The inner table refuses it (a data error): the inbox's own row rolls back with it.
				return sink.Record{Value: []byte(fmt.Sprintf(`{"event_id": "e-%d", "order_id": "o-%d", "amount": "x"}`, i, i))}
			}
		},
		State: func(ctx context.Context, db sink.DB, schema string) ([]string, error) {
			rows, err := db.Query(ctx, `SELECT format('%s/%s', o.order_id, o.amount) FROM `+pgx.Identifier{schema, "orders"}.Sanitize()+` o`)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, pgx.RowTo[string])
		},
		Expect: func(r sink.Record) string { return fmt.Sprintf("o-%d/%d", r.Offset, r.Offset) },
	})
}

// TestDuplicatesAndConflicts: an event id seen again with the same payload is skipped and
// counted, in the same batch and in a later one; with a different payload it is poison and,
// isolated, dead-lettered while the rest of the batch commits.
func TestDuplicatesAndConflicts(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: this test needs a real PostgreSQL (make test starts one)")
	}
	ctx := context.Background()
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	schema := "tt_inbox_duplicates"
	if _, err := db.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	if err := sink.Migrate(ctx, url, schema); err != nil {
		t.Fatal(err)
	}
	defer db.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE") //nolint:errcheck
	ib := newInbox(t, db, schema)

	offset := int64(0)
	write := func(isolate bool, recs ...sink.Record) (engine.WriteResult, error) {
		for i := range recs {
			recs[i].Topic, recs[i].Offset = "orders", offset
			offset++
		}
		var res engine.WriteResult
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			var err error
			res, err = engine.WriteBatch(ctx, tx, ib, sink.Batch{Topic: "orders", Records: recs},
				engine.WriteOptions{Isolate: isolate, Schema: schema, Pipeline: "p"})
			return err
		})
		return res, err
	}
	// Batch 1: e1 twice (same payload) and e2.
	if res, err := write(false, event("e1", "o1", 10), event("e2", "o2", 20), event("e1", "o1", 10)); err != nil {
		t.Fatal(err)
	} else if res.Applied != 2 || res.Skipped != 1 {
		t.Fatalf("batch 1: applied %d, skipped %d; want 2 applied, the repeat of e1 skipped", res.Applied, res.Skipped)
	}
	// Batch 2: e2 again (same payload), e3 new, e1 with another payload: a conflict.
	_, err = write(false, event("e2", "o2", 20), event("e3", "o3", 30), event("e1", "o1", 99))
	if !errors.Is(err, inbox.ErrConflict) || !sink.IsPoison(err) {
		t.Fatalf("a conflicting payload: got %v, want a poison error wrapping inbox.ErrConflict", err)
	}
	// The same again with isolation: the conflict is dead-lettered, the rest commits.
	res, err := write(true, event("e2", "o2", 20), event("e3", "o3", 30), event("e1", "o1", 99))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.DeadLettered) != 1 || !errors.Is(res.DeadLettered[0].Err, inbox.ErrConflict) {
		t.Fatalf("dead letters: %+v, want the one conflict", res.DeadLettered)
	}
	if res.Applied != 1 || res.Skipped != 1 {
		t.Fatalf("isolated batch: applied %d, skipped %d; want e3 applied, e2 skipped", res.Applied, res.Skipped)
	}
	q := func(sql string) string {
		var s string
		if err := db.QueryRow(ctx, sql).Scan(&s); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return s
	}
	if got := q("SELECT string_agg(order_id || '=' || amount, ' ' ORDER BY order_id) FROM " + schema + ".orders"); got != "o1=10 o2=20 o3=30" {
		t.Errorf("orders: %q, want one effect per event: o1=10 o2=20 o3=30", got)
	}
	if got := q("SELECT string_agg(event_id || ':' || duplicates, ' ' ORDER BY event_id) FROM " + schema + ".inbox"); got != "e1:1 e2:1 e3:0" {
		t.Errorf("inbox duplicates: %q, want e1:1 e2:1 e3:0 (the rolled-back attempt counts nothing)", got)
	}
	if got := q(`SELECT string_agg("offset"::text, ' ') FROM ` + schema + ".dead_letters"); got != "8" {
		t.Errorf("dead letters at offsets %q, want 8", got)
	}
	if !strings.Contains(q("SELECT error FROM "+schema+".dead_letters"), "different payload") {
		t.Errorf("dead letter error does not name the conflict")
	}
}

// TestEventIDExpr: event_id_expr builds the id from several fields; a record whose
// expression fails is poison naming ErrNoEventID; the options are checked by New.
func TestEventIDExpr(t *testing.T) {
	inner, err := table.New(table.Config{Table: "x.orders", Columns: map[string]table.Column{"order_id": {From: "value.order_id"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    inbox.Config
		want string
	}{
		{inbox.Config{EventID: "value.id", EventIDExpr: "value.id", Subscriber: "s"}, "event_id_expr: give event_id or event_id_expr, not both"},
		{inbox.Config{EventIDExpr: "value.id +", Subscriber: "s"}, "event_id_expr: 1:"},
		{inbox.Config{Subscriber: "s"}, "event_id: required"},
	} {
		if _, err := inbox.New(tc.c, inner); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q", tc.c, err, tc.want)
		}
	}
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: this test needs a real PostgreSQL (make test starts one)")
	}
	ctx := context.Background()
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	schema := "tt_inbox_event_id_expr"
	if _, err := db.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	if err := sink.Migrate(ctx, url, schema); err != nil {
		t.Fatal(err)
	}
	defer db.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE") //nolint:errcheck
	if _, err := db.Exec(ctx, "CREATE TABLE "+schema+".orders (order_id text, amount integer)"); err != nil {
		t.Fatal(err)
	}
	inner, err = table.New(table.Config{Table: schema + ".orders", Columns: map[string]table.Column{
		"order_id": {From: "value.order_id"}, "amount": {From: "value.amount"}}})
	if err != nil {
		t.Fatal(err)
	}
	ib, err := inbox.New(inbox.Config{EventIDExpr: `value.order_id + ":" + string(value.amount)`, Subscriber: "test", Schema: schema}, inner)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.MigratePlugin(ctx, url, ib, nil); err != nil {
		t.Fatal(err)
	}
	recs := []sink.Record{event("a", "o1", 10), event("a", "o1", 10), event("a", "o1", 20)}
	for i := range recs {
		recs[i].Topic, recs[i].Offset = "orders", int64(i)
	}
	var res engine.WriteResult
	if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		res, err = engine.WriteBatch(ctx, tx, ib, sink.Batch{Topic: "orders", Records: recs}, engine.WriteOptions{Schema: schema, Pipeline: "p"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if res.Applied != 2 || res.Skipped != 1 {
		t.Errorf("applied %d, skipped %d; want 2 (o1:10, o1:20) and 1 (o1:10 again)", res.Applied, res.Skipped)
	}
	var ids string
	if err := db.QueryRow(ctx, "SELECT string_agg(event_id, ' ' ORDER BY event_id) FROM "+schema+".inbox").Scan(&ids); err != nil || ids != "o1:10 o1:20" {
		t.Errorf("inbox ids %q (%v), want o1:10 o1:20", ids, err)
	}
	bad := sink.Record{Topic: "orders", Offset: 9, Value: []byte(`{"order_id": "o2"}`)}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := engine.WriteBatch(ctx, tx, ib, sink.Batch{Topic: "orders", Records: []sink.Record{bad}}, engine.WriteOptions{Schema: schema, Pipeline: "p"})
		return err
	})
	if !errors.Is(err, inbox.ErrNoEventID) || !sink.IsPoison(err) || !strings.Contains(err.Error(), "no such key") {
		t.Errorf("an id expression that fails: %v, want poison wrapping ErrNoEventID, saying no such key", err)
	}
}
