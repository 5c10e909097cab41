package multi_test

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
	"github.com/eosink/eosink/sink/multi"
	"github.com/eosink/eosink/sink/plugin"
	"github.com/eosink/eosink/sink/sinktest"
	"github.com/eosink/eosink/sink/table"
)

func exec(t *testing.T, db *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// newPair returns a multi plugin writing each record to a history table (insert) and a
// totals table (upsert). history refuses an amount of 13, totals one of 7: a record can be
// poison for one sink only.
func newPair(t *testing.T, db *pgxpool.Pool, schema string) *multi.Multi {
	t.Helper()
	exec(t, db, "CREATE TABLE "+pgx.Identifier{schema, "history"}.Sanitize()+` (id integer PRIMARY KEY, amount integer CHECK (amount <> 13))`)
	exec(t, db, "CREATE TABLE "+pgx.Identifier{schema, "totals"}.Sanitize()+` (account text PRIMARY KEY, amount integer CHECK (amount <> 7))`)
	hist, err := table.New(table.Config{Table: schema + ".history", Columns: map[string]table.Column{
		"id": {From: "value.id", Required: true}, "amount": {From: "value.amount"}}})
	if err != nil {
		t.Fatal(err)
	}
	tot, err := table.NewUpsert(table.UpsertConfig{Key: []string{"account"}, Config: table.Config{Table: schema + ".totals",
		Columns: map[string]table.Column{"account": {From: "value.account"}, "amount": {From: "value.amount"}}}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := multi.New(hist, tot)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func record(i int) sink.Record {
	return sink.Record{Value: []byte(fmt.Sprintf(`{"event_id": "e-%d", "id": %d, "account": "a-%d", "amount": %d}`, i, i, i, i*3))}
}

// poison is refused by the first sink (amount 13), by the second (amount 7), or by both
// (not JSON), by i%4 so that the suite's poison records (0, 17, 18, 39) hit each kind.
func poison(i int) sink.Record {
	switch i % 4 {
	case 0:
		return sink.Record{Value: []byte(fmt.Sprintf(`{"event_id": "e-%d", "id": %d, "account": "a-%d", "amount": 13}`, i, i, i))}
	case 2:
		return sink.Record{Value: []byte(`not json`)}
	}
	return sink.Record{Value: []byte(fmt.Sprintf(`{"event_id": "e-%d", "id": %d, "account": "a-%d", "amount": 7}`, i, i, i))}
}

// pairState shows both tables joined, so that a write kept in one sink only shows.
func pairState(ctx context.Context, db sink.DB, schema string) ([]string, error) {
	rows, err := db.Query(ctx, fmt.Sprintf(`SELECT format('%%s/%%s|%%s/%%s', h.id, h.amount, u.account, u.amount)
FROM %s h FULL JOIN %s u ON u.account = 'a-' || h.id`, pgx.Identifier{schema, "history"}.Sanitize(), pgx.Identifier{schema, "totals"}.Sanitize()))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func pairExpect(r sink.Record) string {
	return fmt.Sprintf("%d/%d|a-%d/%d", r.Offset, r.Offset*3, r.Offset, r.Offset*3)
}

func TestMultiConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New:    func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin { return newPair(t, db, schema) },
		Record: record, Poison: poison, State: pairState, Expect: pairExpect,
	})
}

// TestInboxAroundMulti: the inbox wraps the whole list.
func TestInboxAroundMulti(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin {
			ib, err := inbox.New(inbox.Config{EventID: "value.event_id", Subscriber: "test", Schema: schema}, newPair(t, db, schema))
			if err != nil {
				t.Fatal(err)
			}
			if err := sink.MigratePlugin(context.Background(), os.Getenv("DATABASE_URL"), ib, nil); err != nil {
				t.Fatal(err)
			}
			return ib
		},
		Record: record, Poison: poison, State: pairState, Expect: pairExpect,
	})
}

// fn is a plugin of one function.
type fn func(ctx context.Context, tx pgx.Tx, b sink.Batch) error

func (fn) Open(context.Context, sink.Partition) error                 { return nil }
func (fn) Close(context.Context, sink.Partition) error                { return nil }
func (f fn) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error { return f(ctx, tx, b) }

// skipper reports n records skipped on every write.
func skipper(n int) sink.Plugin {
	return fn(func(ctx context.Context, _ pgx.Tx, _ sink.Batch) error { sink.Skipped(ctx, n); return nil })
}

// TestSkippedIsTheLeast: a record one sink skips is applied by another, so the list
// reports the smallest count.
func TestSkippedIsTheLeast(t *testing.T) {
	m, err := multi.New(skipper(3), skipper(1), skipper(2))
	if err != nil {
		t.Fatal(err)
	}
	res, err := engine.WriteBatch(context.Background(), nil, m, sink.Batch{Records: make([]sink.Record, 5)}, engine.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 1 || res.Applied != 4 {
		t.Fatalf("WriteBatch = %+v, want 1 skipped and 4 applied", res)
	}
}

// TestWriteErrorKeepsItsKind: an inner error is named by its entry and stays poison.
func TestWriteErrorKeepsItsKind(t *testing.T) {
	bad := fn(func(_ context.Context, _ pgx.Tx, b sink.Batch) error {
		return sink.Poison(&b.Records[0], errors.New("bad"))
	})
	m, _ := multi.New(skipper(0), bad)
	err := m.Write(context.Background(), nil, sink.Batch{Records: make([]sink.Record, 1)})
	if !sink.IsPoison(err) || !strings.HasPrefix(err.Error(), "sinks[1]: ") {
		t.Fatalf("Write = %v, want a poison error naming sinks[1]", err)
	}
}

func TestConfigErrors(t *testing.T) {
	build := func(raw map[string]any) error {
		_, err := plugin.Build(plugin.Config{Path: "sink", Pipeline: "p", Schema: "eosink", Raw: raw})
		return err
	}
	tbl := map[string]any{"type": "table", "table": "t", "columns": map[string]any{"a": "value.a"}}
	for _, tc := range []struct {
		name  string
		raw   map[string]any
		field string
		want  string
	}{
		{"no sinks", map[string]any{"type": "multi"}, "sink.sinks", "required"},
		{"empty sinks", map[string]any{"type": "multi", "sinks": []any{}}, "sink.sinks", "required"},
		{"unknown key", map[string]any{"type": "multi", "sink": []any{tbl}}, "sink.sink", "unknown key (sink has type, sinks); did you mean sinks?"},
		{"entry without type", map[string]any{"type": "multi", "sinks": []any{tbl, map[string]any{"table": "t"}}}, "sink.sinks[1].type", "required"},
		{"unknown plugin", map[string]any{"type": "multi", "sinks": []any{map[string]any{"type": "tabel"}}}, "sink.sinks[0].type", "unknown plugin"},
		{"entry's unknown key", map[string]any{"type": "multi", "sinks": []any{tbl, map[string]any{"type": "table", "table": "t", "colums": map[string]any{}}}}, "sink.sinks[1].colums", "unknown key (sink.sinks[1] has type, table, columns, "},
		{"entry's own error", map[string]any{"type": "multi", "sinks": []any{tbl, map[string]any{"type": "upsert", "table": "t", "columns": map[string]any{"a": "value.a"}, "key": []any{"b"}}}}, "sink.sinks[1].key", `column "b" is not in columns`},
		{"entry not a mapping", map[string]any{"type": "multi", "sinks": []any{"table"}}, "sink.sinks[0]", "must be a plugin section"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := build(tc.raw)
			var ce *sink.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Reason, tc.want) {
				t.Fatalf("plugin.Build = %v, want a *sink.ConfigError for %s containing %q", err, tc.field, tc.want)
			}
		})
	}
	if err := build(map[string]any{"type": "multi", "sinks": []any{tbl, tbl}}); err != nil {
		t.Fatalf("two tables: %v", err)
	}
}

// TestRoutesAndMigrations: a topic is routed only when every sink routes it, the refusal
// naming the sink; two inboxes in one schema share one migration set.
func TestRoutesAndMigrations(t *testing.T) {
	cols := map[string]table.Column{"a": {From: "value.a"}}
	all, err := table.New(table.Config{Table: "t", Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	some, err := table.New(table.Config{Routes: []table.Route{{Topic: "orders", Table: "o"}}, Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := multi.New(all, some)
	if err := m.CheckTopic("orders"); err != nil {
		t.Fatalf("CheckTopic(orders) = %v", err)
	}
	err = m.CheckTopic("payments")
	var nr *sink.NoRouteError
	if !errors.As(err, &nr) || !strings.HasPrefix(nr.Reason, "sinks[1]: ") || nr.Topic != "payments" {
		t.Fatalf("CheckTopic(payments) = %v, want a *sink.NoRouteError naming sinks[1]", err)
	}
	if got := m.RouteSummary(); len(got) != 2 || !strings.HasPrefix(got[0], "sinks[0]: ") || !strings.HasPrefix(got[1], "sinks[1]: orders -> o") {
		t.Fatalf("RouteSummary = %q", got)
	}
	ib1, _ := inbox.New(inbox.Config{EventID: "value.id", Subscriber: "a", Schema: "s"}, all)
	ib2, _ := inbox.New(inbox.Config{EventID: "value.id", Subscriber: "b", Schema: "s"}, some)
	m, _ = multi.New(ib1, ib2)
	if sets := m.Migrations(); len(sets) != 1 || sets[0].Schema != "s" {
		t.Fatalf("Migrations = %+v, want the inbox set once", sets)
	}
}
