package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// sqlPipeline writes a pipeline config for the sql plugin: each record inserts a history
// row and adds its quantity to its SKU's stock, two tables in the batch's transaction.
// stock's CHECK refuses a quantity of a million or more, so such a record fails in its
// second statement, after its first succeeded.
func sqlPipeline(t *testing.T, e testbed.Env, topic, schema, statements string) (config string, env []string) {
	t.Helper()
	dir := t.TempDir()
	config = filepath.Join(dir, "pipeline.yaml")
	text := `pipeline: ${SQL_PIPELINE}
kafka:
  brokers: ${KAFKA_BOOTSTRAP_SERVERS}
  group: ${SQL_GROUP}
  topics: ["${SQL_TOPIC}"]
  properties:
    session.timeout.ms: 6000
    heartbeat.interval.ms: 1000
database:
  url: ${DATABASE_URL}
  schema: ${SQL_SCHEMA}
  auto_migrate: true
batch: {max_records: 50}
on_poison: dead-letter
dead_letter: {max_ratio: 1}
sink:
  type: sql
  params:
    id: {from: value.id, required: true}
    sku: {from: value.sku, required: true}
    qty: value.qty
    src: offset
  statements:
` + statements
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env = []string{"KAFKA_BOOTSTRAP_SERVERS=" + e.Brokers, "DATABASE_URL=" + e.DatabaseURL, "SQL_TOPIC=" + topic,
		"SQL_GROUP=" + testbed.Name(t, "g"), "SQL_PIPELINE=" + testbed.Name(t, "p"), "SQL_SCHEMA=" + schema}
	return config, env
}

const sqlStatements = `    - INSERT INTO ${SQL_SCHEMA}.history (id, sku, qty, src) VALUES (@id, @sku, @qty, @src)
    - INSERT INTO ${SQL_SCHEMA}.stock AS s (sku, qty) VALUES (@sku, @qty)
      ON CONFLICT (sku) DO UPDATE SET qty = s.qty + excluded.qty
`

// TestSQLPluginExactlyOnce runs the sql plugin with `eosink run -config`, kills it with
// SIGKILL inside a batch's transaction (its statements sent, before COMMIT), restarts it,
// and checks that every record's two statements were applied exactly once, and that the
// poison records were dead-lettered alone with none of their statements' effects.
func TestSQLPluginExactlyOnce(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	topic := testbed.Topic(t, e, 3)
	schema := testbed.Schema(t, e)
	db := testbed.Pool(t, e)
	ctx := context.Background()
	for _, q := range []string{
		"CREATE SCHEMA " + schema,
		"CREATE TABLE " + schema + ".history (id bigint NOT NULL, sku text NOT NULL, qty integer NOT NULL, src bigint NOT NULL)",
		"CREATE TABLE " + schema + ".stock (sku text PRIMARY KEY, qty bigint NOT NULL CHECK (qty < 1000000))",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	const events = 2000
	isPoison := func(i int) bool { return i%97 == 13 }
	msgs := make([]testbed.Msg, events)
	wantStock := map[string]int64{}
	good, poison := 0, 0
	for i := range events {
		sku := fmt.Sprintf("sku-%d", i%10)
		qty := 1 + i%5
		if isPoison(i) {
			qty = 5_000_000 // breaks stock's CHECK in the second statement
			poison++
		} else {
			wantStock[sku] += int64(qty)
			good++
		}
		v, _ := json.Marshal(map[string]any{"id": i, "sku": sku, "qty": qty})
		msgs[i] = testbed.Msg{Partition: int32(i % 3), Key: []byte(sku), Value: v}
	}
	testbed.Produce(t, e, topic, msgs)
	config, env := sqlPipeline(t, e, topic, schema, sqlStatements)

	count := func(q string) int {
		var n int
		if err := db.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	dups := func() int {
		return count("SELECT count(*) - count(DISTINCT id) FROM " + schema + ".history")
	}

	// The first run dies the 5th time a batch's statements are in its open transaction.
	first := testbed.StartProcess(t, eosinkBin, "eosink run sql (killed)", []string{"run", "-config", config},
		append(env, "EOSINK_FAILPOINTS=in-handler=kill@5")...)
	if err := first.Wait(90 * time.Second); !testbed.KilledBySIGKILL(err) {
		t.Fatalf("first run: want death by SIGKILL, got %v", err)
	}
	if !first.Contains("failpoint fired: in-handler kill") {
		t.Fatalf("the first run died without the failpoint firing")
	}
	before := count("SELECT count(*) FROM " + schema + ".history")
	if before == 0 || before >= good || dups() != 0 {
		t.Fatalf("after the kill: %d history rows (%d duplicated), want a partial, duplicate-free state", before, dups())
	}

	// The restart resumes at the stored offsets and finishes the stream.
	second := testbed.StartProcess(t, eosinkBin, "eosink run sql", []string{"run", "-config", config}, env...)
	dead := func() int {
		return count(fmt.Sprintf(`SELECT count(*) FROM %s.dead_letters`, schema))
	}
	testbed.Eventually(t, 120*time.Second, "all records applied or dead-lettered", func() (bool, string) {
		h, d := count("SELECT count(*) FROM "+schema+".history"), dead()
		return h >= good && d >= poison, fmt.Sprintf("history %d/%d, dead letters %d/%d", h, good, d, poison)
	})
	second.StopClean(45 * time.Second)

	if h, d, n := count("SELECT count(*) FROM "+schema+".history"), dead(), dups(); h != good || d != poison || n != 0 {
		t.Fatalf("history %d (want %d), duplicated ids %d, dead letters %d (want %d)", h, good, n, d, poison)
	}
	rows, err := db.Query(ctx, "SELECT sku, qty FROM "+schema+".stock")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var sku string
	var qty int64
	if _, err := pgx.ForEachRow(rows, []any{&sku, &qty}, func() error { got[sku] = qty; return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(wantStock) {
		t.Fatalf("stock %v, want %v", got, wantStock)
	}
	// The poison records left nothing in either table (their history rows were written in the
	// failed batch, before the second statement refused them), and each is dead-lettered once
	// with the statement that refused it.
	if n := count("SELECT count(*) FROM " + schema + ".history WHERE qty >= 1000000"); n != 0 {
		t.Fatalf("%d history rows of poison records kept", n)
	}
	var wrong int
	if err := db.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.dead_letters WHERE (convert_from(value, 'UTF8')::jsonb->>'id')::int %% 97 <> 13
		OR error NOT LIKE '%%statements[1]%%23514%%' OR failures <> 1`, schema)).Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	if wrong != 0 {
		t.Fatalf("%d dead letters are not exactly the poison records, once, refused by statements[1]", wrong)
	}
	t.Logf("applied before the kill %d; after the restart %d history rows, %d dead letters, stock %v", before, good, poison, got)
}

// TestSQLPluginConfigErrors: an unknown parameter is refused at load naming its path and
// line; a statement PostgreSQL refuses stops the start with its index and the message.
func TestSQLPluginConfigErrors(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	topic := testbed.Topic(t, e, 1)
	schema := testbed.Schema(t, e)
	db := testbed.Pool(t, e)
	if _, err := db.Exec(context.Background(), "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".history (id bigint, sku text, qty integer, src bigint)"); err != nil {
		t.Fatal(err)
	}

	config, env := sqlPipeline(t, e, topic, schema, `    - INSERT INTO ${SQL_SCHEMA}.history (id, sku, qty, src) VALUES (@id, @sku, @qty, @src)
    - UPDATE ${SQL_SCHEMA}.stock SET qty = qty + @qty WHERE sku = @skux
`)
	out, err := run(t, env, true, eosinkBin, "run", "-config", config, "-validate")
	if err == nil || !strings.Contains(out, "sink.statements[1]: unknown parameter @skux (declared under params: id, qty, sku, src) (line 25)") {
		t.Fatalf("unknown parameter: exit %v, output:\n%s", err, out)
	}

	config, env = sqlPipeline(t, e, topic, schema, `    - INSERT INTO ${SQL_SCHEMA}.history (id, sku, qty, src) VALUES (@id, @sku, @qty, @src)
    - UPDATE ${SQL_SCHEMA}.stok SET qty = qty + @qty WHERE sku = @sku
`)
	if out, err := run(t, env, false, eosinkBin, "run", "-config", config, "-validate"); !strings.Contains(out, "statements[1]: UPDATE") {
		t.Fatalf("-validate: %v\n%s", err, out)
	}
	out, err = run(t, env, true, eosinkBin, "run", "-config", config)
	want := fmt.Sprintf(`sql: statements[1]: ERROR: relation "%s.stok" does not exist (SQLSTATE 42P01)`, schema)
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("bad statement at start: exit %v, want %q in:\n%s", err, want, out)
	}
}
