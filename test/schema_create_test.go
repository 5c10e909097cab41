package test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/plugin"
	"github.com/eosink/eosink/sink/table"
)

// TestAvroCreateUpsert: the upsert plugin with create: true and Avro values through the real
// registry writes into a table that does not exist: the first batch of each of two
// partitions creates it (the same table, at once), its columns typed from the registry's
// schema (decimal numeric, timestamp-micros timestamptz, uuid, bytes bytea, a record, an
// array and the whole value jsonb, the string key text) and its key as primary key; every
// record lands with its values exact.
func TestAvroCreateUpsert(t *testing.T) {
	t.Parallel()
	c, regURL := registryClient(t)
	p := newPipeline(t, 2)
	v1 := registerSchema(t, c, p.Topic+"-value", "AVRO", orderSchemaV1)
	var want []order
	var msgs []testbed.Msg
	for i := range 40 {
		o := makeOrder(i, false)
		want = append(want, o)
		msgs = append(msgs, testbed.Msg{Partition: o.partOf, Key: []byte(o.keyValue), Value: o.avro(t, c, p.Topic, v1)})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	ctx := context.Background()
	db := testbed.Pool(t, p.Env)
	if _, err := db.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{p.Schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	tbl := pgx.Identifier{p.Schema, "orders_created"}.Sanitize()
	pl, err := table.NewUpsert(table.UpsertConfig{Key: []string{"id"}, Config: table.Config{
		Table: p.Schema + ".orders_created", ValueFormat: "avro", Create: true,
		SchemaRegistry: &plugin.SchemaRegistry{URL: regURL, Timeout: 5 * time.Second},
		Columns: map[string]table.Column{"k": {From: "key"}, "id": {From: "value.id"},
			"amount": {From: "value.amount"}, "created": {From: "value.created"}, "uid": {From: "value.uid"},
			"blob": {From: "value.blob"}, "customer": {From: "value.customer"}, "tags": {From: "value.tags"},
			"whole": {From: "value"}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := startSink(t, avroSinkConfig(t, p, pl))
	waitEnds(t, p, p.logEnds(t))
	if errs := r.s.PartitionErrors(); len(errs) > 0 {
		t.Fatalf("partition errors: %v", errs)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	cols := strs(t, db, `SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
WHERE a.attrelid = '`+tbl+`'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`)
	pk := strs(t, db, `SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = '`+tbl+`'::regclass AND contype = 'p'`)
	wantCols := "amount numeric, blob bytea, created timestamp with time zone, customer jsonb, id bigint, k text, tags jsonb, uid uuid, whole jsonb"
	if got := strings.Join(cols, ", "); got != wantCols || len(pk) != 1 || pk[0] != "PRIMARY KEY (id)" {
		t.Fatalf("created as %s, %v;\nwant %s, PRIMARY KEY (id)", got, pk, wantCols)
	}
	t.Logf("created %s: %s, %s", tbl, strings.Join(cols, ", "), pk[0])
	view := pgx.Identifier{p.Schema, "orders_created_v"}.Sanitize()
	if _, err := db.Exec(ctx, "CREATE VIEW "+view+` AS SELECT k, id, amount, created, uid, blob, customer,
  ARRAY(SELECT jsonb_array_elements_text(tags)) AS tags, NULL::text AS note, whole FROM `+tbl); err != nil {
		t.Fatal(err)
	}
	checkOrders(t, &pgxTable{db, view}, want)
}

// TestCreateNeedsSchema: with create, a column whose type no schema gives (a path into a
// json value) makes the batch fail with an error that stops the partition, not poison, and
// creates nothing. A table plugin whose columns are all typed (topic, partition, offset,
// timestamp, the whole json value) creates its table in the batch's transaction: rolled
// back, no table.
func TestCreateNeedsSchema(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	schema := testbed.Schema(t, e)
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	batch := sink.Batch{Topic: "t", Records: []sink.Record{{Topic: "t", Offset: 5, Value: []byte(`{"x": 1}`), Timestamp: time.Now()}}}
	write := func(pl sink.Plugin, commit bool) error {
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		_, err = engine.WriteBatch(ctx, tx, pl, batch, engine.WriteOptions{})
		if err == nil && commit {
			err = tx.Commit(ctx)
		}
		return err
	}
	untyped, err := table.New(table.Config{Table: schema + ".untyped", Create: true, Columns: map[string]table.Column{"x": {From: "value.x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := untyped.Prepare(ctx, db); err != nil {
		t.Fatalf("Prepare with create and no table: %v", err)
	}
	err = write(untyped, true)
	if err == nil || sink.IsPoison(err) || !strings.Contains(err.Error(), "no type for the column in the record's schema") {
		t.Fatalf("create from a json path: %v (poison %v), want a stopping error", err, sink.IsPoison(err))
	}
	t.Logf("json path: %v", err)
	typed, err := table.New(table.Config{Table: schema + ".typed", Create: true, Columns: map[string]table.Column{
		"topic": {From: "topic"}, "p": {From: "partition"}, "o": {From: "offset"}, "ts": {From: "timestamp"}, "v": {From: "value"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := write(typed, false); err != nil {
		t.Fatal(err)
	}
	n := strs(t, db, "SELECT count(*)::text FROM pg_tables WHERE schemaname = '"+schema+"'")
	if n[0] != "0" {
		t.Fatalf("%s tables after the rolled-back batches, want 0", n[0])
	}
	if err := write(typed, true); err != nil {
		t.Fatal(err)
	}
	got := strs(t, db, "SELECT topic || ' ' || p || ' ' || o || ' ' || (v->>'x') || ' ' || pg_typeof(ts) FROM "+pgx.Identifier{schema, "typed"}.Sanitize())
	if len(got) != 1 || got[0] != "t 0 5 1 timestamp with time zone" {
		t.Fatalf("rows: %q", got)
	}
}
