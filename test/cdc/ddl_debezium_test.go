package cdc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/examples/cdc/app"
	"github.com/eosink/eosink/internal/testbed"
)

// TestCDCCreateEvolveJSON: real Debezium with the JsonConverter, schemas on, into an empty
// replica schema with create: true and evolve: add-columns. The replica tables are created
// from the events' schemas with the source's types and primary keys (three partitions
// create them at once), rows equal the source's; then the source table gets three more
// columns (ALTER TABLE ADD COLUMN) mid-stream, and the replica gets them too.
func TestCDCCreateEvolveJSON(t *testing.T) { ddlScenario(t, testbed.JSONWithSchemas) }

// TestCDCCreateEvolveAvro: the same with Avro through the registry: the types come from the
// registry's schemas (connect.name).
func TestCDCCreateEvolveAvro(t *testing.T) { ddlScenario(t, testbed.Avro) }

// The replica's columns as created, for the source tables of app.SourceDDL.
var wantCreated = map[string]string{
	"accounts": "id bigint, version integer, balance numeric, anyscale numeric, opened timestamp with time zone, " +
		"local_ts timestamp without time zone, day date, meta jsonb, ref uuid, photo bytea, note text",
	"lines": "order_id integer, line integer, version integer, qty integer",
}

var wantPK = map[string]string{"accounts": "PRIMARY KEY (id)", "lines": "PRIMARY KEY (order_id, line)"}

func ddlScenario(t *testing.T, conv testbed.Converter) {
	e := testbed.Require(t)
	registryURL := testbed.RequireRegistry(t)
	ctx := context.Background()
	srcURL, _ := testbed.SourceDatabase(t, e, "ddlsrc")
	src, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(context.Background()) })
	if _, err := src.Exec(ctx, app.SourceDDL); err != nil {
		t.Fatal(err)
	}
	w, err := app.NewWorkload(ctx, src, 11)
	if err != nil {
		t.Fatal(err)
	}
	steps := func(n int) {
		t.Helper()
		for range n {
			if err := w.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps(20)
	db := testbed.Pool(t, e)
	replica, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	d := testbed.RunDebezium(t, testbed.DebeziumOptions{Brokers: e.Brokers, SourceURL: srcURL,
		Tables:      []string{"public.accounts", "public.lines", "public.nopk"},
		TopicPrefix: testbed.Name(t, "ddl"), Converter: conv, RegistryURL: registryURL, Partitions: 3})
	t.Logf("Debezium (%s) running after %s", conv, d.StartedIn.Round(time.Millisecond))
	topics := []string{d.Topic("public.accounts"), d.Topic("public.lines"), d.Topic("public.nopk")}
	waitTopics(t, e.Brokers, topics)

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
  create: true
  evolve: add-columns
`, pipeline, e.Brokers, testbed.Name(t, "g"), strings.Join(topics, ", "), e.DatabaseURL, offsets, registry, format, replica)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "migrate", "up", "-config", config)
	sink := testbed.StartProcess(t, eosinkBin, "eosink run", []string{"run", "-config", config})
	steps(60)
	equal := func(what string) {
		t.Helper()
		testbed.Eventually(t, 3*time.Minute, what, func() (bool, string) {
			c, diff, err := app.Compare(ctx, src, db, replica)
			if err != nil {
				return false, err.Error()
			}
			return app.Equal(c), fmt.Sprint(c, "\n", strings.Join(diff, "\n"))
		})
	}
	equal("the created replica equal to the source")
	for _, table := range []string{"accounts", "lines"} {
		cols, pk := columnTypes(t, ctx, db, pgx.Identifier{replica, table}.Sanitize())
		if got := strings.Join(cols, ", "); got != wantCreated[table] || pk != wantPK[table] {
			t.Errorf("%s created as %s, %s;\nwant %s, %s", table, got, pk, wantCreated[table], wantPK[table])
		}
		t.Logf("%s created: %s, %s", table, strings.Join(cols, ", "), pk)
	}
	if exists(t, ctx, db, pgx.Identifier{replica, "nopk"}.Sanitize()) {
		t.Error("a replica table was created for nopk, which has no primary key")
	}

	// The source table gets new columns mid-stream.
	if _, err := src.Exec(ctx, `ALTER TABLE public.accounts ADD COLUMN extra numeric(10,2), ADD COLUMN tag text, ADD COLUMN seen timestamptz;
UPDATE public.accounts SET extra = id % 1000 + 0.25, tag = 'tag ' || id, seen = now()`); err != nil {
		t.Fatal(err)
	}
	steps(40)
	equal("the replica equal to the source after the source's ADD COLUMN")
	testbed.Eventually(t, 3*time.Minute, "the new columns' values in the replica", func() (bool, string) {
		a, err := textRows(ctx, src, `SELECT row(id, extra, tag, seen)::text FROM public.accounts`)
		if err != nil {
			return false, err.Error()
		}
		b, err := textRows(ctx, db, fmt.Sprintf(`SELECT row(id, extra, tag, seen)::text FROM %s`, pgx.Identifier{replica, "accounts"}.Sanitize()))
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(a, b), fmt.Sprintf("source %d rows, replica %d rows", len(a), len(b))
	})
	cols, _ := columnTypes(t, ctx, db, pgx.Identifier{replica, "accounts"}.Sanitize())
	want := wantCreated["accounts"] + ", extra numeric, tag text, seen timestamp with time zone"
	if got := strings.Join(cols, ", "); got != want {
		t.Errorf("accounts after evolving: %s;\nwant %s", got, want)
	}
	t.Logf("accounts evolved: %s", strings.Join(cols, ", "))
	sink.StopClean(60 * time.Second)
	if !sink.Contains("columns added") {
		t.Error("no log line of the columns added")
	}

	var nopk, others int
	if err := db.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE topic = $1), count(*) FILTER (WHERE topic <> $1) FROM %s.dead_letters`,
		pgx.Identifier{offsets}.Sanitize()), d.Topic("public.nopk")).Scan(&nopk, &others); err != nil {
		t.Fatal(err)
	}
	if others != 0 {
		t.Errorf("%d dead letters outside public.nopk", others)
	}
	t.Logf("dead letters: %d of nopk, %d others", nopk, others)
}

func textRows(ctx context.Context, q app.Querier, sql string) ([]string, error) {
	rows, err := q.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	slices.Sort(out)
	return out, err
}
