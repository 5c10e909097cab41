package outboxsink_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/outbox"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/outboxsink"
	"github.com/eosink/eosink/sink/sinktest"
	"github.com/eosink/eosink/sink/table"
)

func newOutbox(t *testing.T, db *pgxpool.Pool, schema string, c outboxsink.Config) *outboxsink.Outbox {
	t.Helper()
	if _, err := db.Exec(context.Background(), "CREATE TABLE IF NOT EXISTS "+pgx.Identifier{schema, "orders"}.Sanitize()+
		` (order_id text PRIMARY KEY, amount integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	inner, err := table.New(table.Config{Table: schema + ".orders", Columns: map[string]table.Column{
		"order_id": {From: "value.order_id", Required: true}, "amount": {From: "value.amount"}}})
	if err != nil {
		t.Fatal(err)
	}
	c.Schema = schema
	e, err := outboxsink.New(c, inner)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.MigratePlugin(context.Background(), os.Getenv("DATABASE_URL"), e, nil); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestEmitConformance: each committed record has its row and exactly one outbox event, in
// the same transaction; rolled-back, isolated and poison records have neither.
func TestEmitConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin {
			return newOutbox(t, db, schema, outboxsink.Config{Topic: "order-events", EventID: "value.order_id", EventIDPrefix: "order:", Value: "value.amount"})
		},
		Record: func(i int) sink.Record {
			return sink.Record{Key: fmt.Appendf(nil, "o-%d", i), Value: fmt.Appendf(nil, `{"order_id": "o-%d", "amount": %d}`, i, i)}
		},
		Poison: func(i int) sink.Record {
			if i%2 == 0 {
				return sink.Record{Value: []byte(`not json`)}
			}
			return sink.Record{Value: fmt.Appendf(nil, `{"order_id": "o-%d", "amount": "x"}`, i)}
		},
		// One line per order with its events (none, one, or several joined), and one per
		// event without an order.
		State: func(ctx context.Context, db sink.DB, schema string) ([]string, error) {
			o, e := pgx.Identifier{schema, "orders"}.Sanitize(), pgx.Identifier{schema, "outbox"}.Sanitize()
			rows, err := db.Query(ctx, `SELECT format('%s/%s/%s', o.order_id, o.amount,
  (SELECT string_agg(format('%s=%s@%s', e.event_id, convert_from(e.value, 'UTF8'), e.topic), ',') FROM `+e+` e WHERE e.event_id = 'order:' || o.order_id))
FROM `+o+` o
UNION ALL SELECT 'orphan ' || e.event_id FROM `+e+` e WHERE NOT EXISTS (SELECT 1 FROM `+o+` o WHERE e.event_id = 'order:' || o.order_id)`)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, pgx.RowTo[string])
		},
		Expect: func(r sink.Record) string {
			return fmt.Sprintf("o-%d/%d/order:o-%d=%d@order-events", r.Offset, r.Offset, r.Offset, r.Offset)
		},
	})
}

// TestEmitDefaultIDsAreStable: without event_id the id is the record's coordinates, the same
// for the same record written again (a replay after `eosink offsets set`).
func TestEmitDefaultIDsAreStable(t *testing.T) {
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
	schema := fmt.Sprintf("emit_stable_%d", os.Getpid())
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	defer db.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	e := newOutbox(t, db, schema, outboxsink.Config{Topic: "ev"})
	rec := sink.Record{Topic: "orders", Partition: 2, Offset: 41, Key: []byte("k"), Value: []byte(`{"order_id": "o-1", "amount": 1}`)}
	var ids []string
	for range 2 {
		if _, err := db.Exec(ctx, "TRUNCATE "+pgx.Identifier{schema, "orders"}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			return e.Write(ctx, tx, sink.Batch{Topic: "orders", Partition: 2, Records: []sink.Record{rec}})
		}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.Query(ctx, "SELECT event_id FROM "+pgx.Identifier{schema, "outbox"}.Sanitize()+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	want := outbox.RecordEventID("orders", 2, 41, 0)
	if len(ids) != 2 || ids[0] != want || ids[1] != want {
		t.Fatalf("event ids %v, want %q twice", ids, want)
	}
}
