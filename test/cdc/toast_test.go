package cdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/cdc"
	"github.com/eosink/eosink/sink/plugin"
)

// The source table of the TOAST tests, under the default REPLICA IDENTITY: each of t, b,
// j, ta and ia holds 20 KB or more of random (incompressible) data, so it is stored out of
// line, and an update that does not touch it arrives from Debezium with the placeholder.
const toastSourceDDL = `
CREATE FUNCTION rnd(n int) RETURNS text LANGUAGE sql VOLATILE AS
  $$ SELECT string_agg(chr(35 + (random() * 88)::int), '') FROM generate_series(1, n) $$;
CREATE FUNCTION rndbytes(n int) RETURNS bytea LANGUAGE sql VOLATILE AS
  $$ SELECT decode(string_agg(lpad(to_hex((random() * 255)::int), 2, '0'), ''), 'hex') FROM generate_series(1, n) $$;
CREATE TABLE public.toasty (id int PRIMARY KEY, n int NOT NULL, t text, b bytea, j jsonb, ta text[], ia int[]);`

// toastInsert inserts rows from..to with fresh large values.
func toastInsert(from, to int) string {
	return fmt.Sprintf(`INSERT INTO public.toasty
SELECT i, 0, rnd(21000), rndbytes(21000), jsonb_build_object('s', rnd(21000), 'i', i),
       array(SELECT rnd(100) FROM generate_series(1, 210)), array(SELECT (random() * 2e9)::int FROM generate_series(1, 5300))
FROM generate_series(%d, %d) i`, from, to)
}

// The replica: text, bytea and jsonb as in the source; the arrays in jsonb columns (the
// TOAST handling does not depend on how an array is converted), compared as to_jsonb.
const toastReplicaDDL = `CREATE TABLE %s (id int PRIMARY KEY, n int NOT NULL, t text, b bytea, j jsonb, ta text[], ia int[])`

const (
	toastSourceRows  = `SELECT row(id, n, t, b, j, ta, ia)::text FROM public.toasty ORDER BY id`
	toastReplicaRows = `SELECT row(id, n, t, b, j, ta, ia)::text FROM %s ORDER BY id`
)

// TestCDCToastJSON: the real connector with the JsonConverter (schemas on), REPLICA IDENTITY
// DEFAULT: updates of other columns only, through `eosink run`, onto stored rows and, in
// one batch, onto an insert of the same batch; the replica equals the source as row::text.
// Then the plugin's own Write, on the connector's records: an insert and its update in one
// batch keep the insert's values, and an update whose insert never arrived is poison naming
// the column, with nothing written.
func TestCDCToastJSON(t *testing.T) { toastScenario(t, testbed.JSONWithSchemas) }

// TestCDCToastAvro: the same with Avro through the registry.
func TestCDCToastAvro(t *testing.T) { toastScenario(t, testbed.Avro) }

func toastScenario(t *testing.T, conv testbed.Converter) {
	e := testbed.Require(t)
	registryURL := testbed.RequireRegistry(t)
	ctx := context.Background()
	srcURL, _ := testbed.SourceDatabase(t, e, "toastsrc")
	src, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(context.Background()) })
	exec := func(sql string) {
		t.Helper()
		if _, err := src.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec(toastSourceDDL)
	exec(toastInsert(1, 4))
	var toastBytes int64
	if err := src.QueryRow(ctx, `SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = 'public.toasty'::regclass`).Scan(&toastBytes); err != nil {
		t.Fatal(err)
	}
	if toastBytes < 4*5*20000 {
		t.Fatalf("the source's TOAST table holds %d bytes: the values are not stored out of line", toastBytes)
	}

	db := testbed.Pool(t, e)
	replica, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	table := pgx.Identifier{replica, "toasty"}.Sanitize()
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize()+"; "+fmt.Sprintf(toastReplicaDDL, table)); err != nil {
		t.Fatal(err)
	}
	d := testbed.RunDebezium(t, testbed.DebeziumOptions{Brokers: e.Brokers, SourceURL: srcURL,
		Tables: []string{"public.toasty"}, TopicPrefix: testbed.Name(t, "toast"), Converter: conv, RegistryURL: registryURL})
	topic := d.Topic("public.toasty")
	waitTopics(t, e.Brokers, []string{topic})

	format, registry := "json", ""
	if conv == testbed.Avro {
		format, registry = "avro", "schema_registry:\n  url: "+registryURL+"\n"
	}
	pipeline := testbed.Name(t, "p")
	config := filepath.Join(t.TempDir(), "pipeline.yaml")
	yaml := fmt.Sprintf(`pipeline: %s
kafka:
  brokers: %s
  group: %s
  topics: [%s]
database:
  url: %s
  schema: %s
on_poison: dead-letter
%ssink:
  type: cdc
  format: %s
  table: "%s.$${source.table}"
`, pipeline, e.Brokers, testbed.Name(t, "g"), topic, e.DatabaseURL, offsets, registry, format, replica)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "migrate", "up", "-config", config)
	equal := func(what string) {
		t.Helper()
		testbed.Eventually(t, 2*time.Minute, what, func() (bool, string) {
			a, err := textRows(ctx, src, toastSourceRows)
			if err != nil {
				return false, err.Error()
			}
			b, err := textRows(ctx, db, fmt.Sprintf(toastReplicaRows, table))
			if err != nil {
				return false, err.Error()
			}
			return slices.Equal(a, b), toastDiff(a, b)
		})
	}
	proc := testbed.StartProcess(t, eosinkBin, "eosink run", []string{"run", "-config", config})
	equal("the snapshot in the replica")
	// Updates of n only, onto the rows the replica stores: the large columns keep their values.
	exec(`UPDATE public.toasty SET n = n + 1`)
	if conv == testbed.JSONWithSchemas {
		var msgs []testbed.Msg
		testbed.Eventually(t, time.Minute, "the connector's records of the updates", func() (bool, string) {
			msgs = earliestAll(t, e.Brokers, topic)
			return len(msgs) >= 8, fmt.Sprint(len(msgs), " records")
		})
		logPlaceholders(t, msgs[4].Value)
	}
	equal("the replica equal to the source after updates of other columns")
	proc.StopClean(60 * time.Second)

	// With the sink stopped: inserts and updates of other columns in one source transaction,
	// and more updates of the stored rows; the sink's next batch holds all of them.
	exec(`BEGIN; ` + toastInsert(5, 8) + `; UPDATE public.toasty SET n = n + 10; COMMIT`)
	testbed.Eventually(t, time.Minute, "the connector's records of the transaction", func() (bool, string) {
		n := len(earliestAll(t, e.Brokers, topic))
		return n >= 4+4+4+8, fmt.Sprint(n, " records")
	})
	proc = testbed.StartProcess(t, eosinkBin, "eosink run", []string{"run", "-config", config})
	equal("the replica equal to the source after an insert and its update in one batch")
	proc.StopClean(60 * time.Second)
	var dead int
	if err := db.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.dead_letters", pgx.Identifier{offsets}.Sanitize())).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if dead != 0 {
		t.Fatalf("%d dead letters", dead)
	}

	// The plugin's Write on the connector's own records: the last transaction's insert of
	// row 5 and its update, in one batch, into a new replica.
	msgs := earliestAll(t, e.Brokers, topic)
	// Offsets: 0-3 the snapshot, 4-7 the first updates, 8-11 the inserts of 5..8 (then
	// their updates, in the order the UPDATE met the rows).
	if len(msgs) < 20 {
		t.Fatalf("%d records, want 20", len(msgs))
	}
	ins, upd := msgs[8], testbed.Msg{}
	for _, m := range msgs[12:] {
		if string(m.Key) == string(ins.Key) {
			upd = m
		}
	}
	if upd.Value == nil {
		t.Fatalf("the update of the first insert not found among %d records", len(msgs))
	}
	replica2, positions := testbed.Schema(t, e), testbed.Schema(t, e)
	table2 := pgx.Identifier{replica2, "toasty"}.Sanitize()
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{replica2}.Sanitize()+"; "+fmt.Sprintf(toastReplicaDDL, table2)); err != nil {
		t.Fatal(err)
	}
	c := cdc.Config{}
	if conv == testbed.Avro {
		c.Format, c.SchemaRegistry = "avro", &plugin.SchemaRegistry{URL: registryURL}
	}
	p := newPlugin(t, e, replica2, positions, c)
	write := func(msgs ...testbed.Msg) error {
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		b := records(0, msgs...)
		for i := range b.Records {
			b.Records[i].Topic = topic
		}
		if err := p.Write(ctx, tx, b); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	// An update whose insert never arrived: poison, naming the column, nothing written.
	err = write(upd)
	var pe *sink.PoisonError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "REPLICA IDENTITY FULL") {
		t.Fatalf("an update with unavailable values and no stored row: %v, want poison naming REPLICA IDENTITY FULL", err)
	}
	t.Logf("an update with unavailable values and no stored row: %v", err)
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+table2).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the replica holds %d rows (%v) after the refused update", n, err)
	}
	// The insert and its update in one batch: the update keeps the insert's large values.
	if err := write(ins, upd); err != nil {
		t.Fatal(err)
	}
	want, err := textRows(ctx, src, `SELECT row(id, n, t, b, j, ta, ia)::text FROM public.toasty WHERE id = 5`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := textRows(ctx, db, fmt.Sprintf(toastReplicaRows, table2))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(want, got) {
		t.Fatalf("an insert and its update in one batch: %s", toastDiff(want, got))
	}
	t.Logf("%s: %d rows equal to the source as row::text, 0 dead letters; one-batch insert+update exact", conv, 8)
}

func earliestAll(t *testing.T, brokers, topic string) []testbed.Msg {
	t.Helper()
	return earliest(t, brokers, topic, 1, 1000)
}

// toastDiff says how rows a and b differ, without printing 100 KB values.
func toastDiff(a, b []string) string {
	if len(a) != len(b) {
		return fmt.Sprintf("source %d rows, replica %d rows", len(a), len(b))
	}
	var bad []string
	for i := range a {
		if a[i] != b[i] {
			x := b[i]
			if len(x) > 120 {
				x = x[:120] + "..."
			}
			bad = append(bad, fmt.Sprintf("row %d: replica %s", i, x))
		}
	}
	return strings.Join(bad, "; ")
}

// logPlaceholders logs what the connector sent for each column of an update of n only.
func logPlaceholders(t *testing.T, value []byte) {
	var ev struct {
		Payload struct {
			After map[string]json.RawMessage `json:"after"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(value, &ev); err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"t", "b", "j", "ta", "ia"} {
		v := string(ev.Payload.After[col])
		if len(v) > 100 {
			v = v[:100] + fmt.Sprintf("... (%d bytes)", len(v))
		}
		t.Logf("JsonConverter, update of n only: %s = %s", col, v)
	}
}
