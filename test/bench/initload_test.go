package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A snapshot read is Debezium's envelope without schemas: op r, the row in after, the
// snapshot's LSN in source.lsn and source.sequence, source.snapshot first, true ... last.
func TestInitialRead(t *testing.T) {
	const n = 3
	for i, mark := range []string{"first", "true", "last"} {
		var v struct {
			Before *json.RawMessage `json:"before"`
			After  map[string]any   `json:"after"`
			Op     string           `json:"op"`
			Source map[string]any   `json:"source"`
		}
		data := appendInitialRead(nil, int64(i), n)
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("read %d: %v: %s", i, err, data)
		}
		id, account, qty := initialRow(int64(i))
		if v.Op != "r" || v.Before != nil || v.After["id"] != float64(id) || v.After["account"] != account || v.After["qty"] != float64(qty) {
			t.Errorf("read %d: %s", i, data)
		}
		if v.Source["snapshot"] != mark || v.Source["lsn"] != float64(initialLSN) ||
			v.Source["sequence"] != fmt.Sprintf(`[null,"%d"]`, initialLSN) || v.Source["schema"] != "public" {
			t.Errorf("read %d: source %v", i, v.Source)
		}
		var plain map[string]any
		if err := json.Unmarshal(appendInitialRow(nil, int64(i)), &plain); err != nil || fmt.Sprint(plain) != fmt.Sprint(v.After) {
			t.Errorf("row %d: plain %v (%v), after %v", i, plain, err, v.After)
		}
	}
}

// The rate of each tenth is the records between two marks over the seconds between them.
func TestTenthRates(t *testing.T) {
	got := tenthRates([]tenthMark{{500, 0}, {1000, 0.5}, {2000, 1.5}, {2000, 1.5}, {3500, 2}})
	want := []float64{1000, 1000, 3000}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// The SQL hash of a table holding the rows equals initialHash, and differs for a table with
// one row changed.
func TestInitialHash(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: this test needs a real PostgreSQL (make test starts one)")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	saved := benchSchema
	benchSchema = "tt_bench_initial"
	defer func() { benchSchema = saved }()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS tt_bench_initial CASCADE; CREATE SCHEMA tt_bench_initial"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS tt_bench_initial CASCADE") })
	b := &bench{url: url}
	if err := b.initialTable(ctx, "t", true); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	rows := make([][]any, n)
	for i := range int64(n) {
		id, account, qty := initialRow(i)
		rows[i] = []any{id, account, qty}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{benchSchema, "t"}, initialColumns, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	v, err := b.verifyInitial(ctx, "t", n)
	if err != nil || !v.OK {
		t.Fatalf("%v %v", v, err)
	}
	if _, err := conn.Exec(ctx, "UPDATE tt_bench_initial.t SET qty = qty + 1 WHERE id = 500; DELETE FROM tt_bench_initial.t WHERE id = 7"); err != nil {
		t.Fatal(err)
	}
	if v, err = b.verifyInitial(ctx, "t", n); err != nil || v.OK || v.Missing != 1 || v.Rows != n-1 {
		t.Fatalf("changed table: %v %v", v, err)
	}
}
