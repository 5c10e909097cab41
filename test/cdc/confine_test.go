package cdc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// field is one column of a hand-made change event: its Connect type and JSON value.
type field struct{ name, typ, value string }

// changeEvent is a change event as Debezium's JsonConverter writes it with schemas on,
// from source schema.table, its key the fields named in key.
func changeEvent(op, schema, table string, lsn int64, key []string, fields ...field) testbed.Msg {
	var defs, vals, keyDefs, keyVals []string
	for _, f := range fields {
		def := fmt.Sprintf(`{"type":%q,"optional":true,"field":%q}`, f.typ, f.name)
		defs = append(defs, def)
		vals = append(vals, fmt.Sprintf("%q:%s", f.name, f.value))
		for _, k := range key {
			if k == f.name {
				keyDefs, keyVals = append(keyDefs, def), append(keyVals, fmt.Sprintf("%q:%s", f.name, f.value))
			}
		}
	}
	after := "{" + strings.Join(vals, ",") + "}"
	if op == "t" {
		after = "null"
	}
	value := fmt.Sprintf(`{"schema":{"type":"struct","fields":[
{"type":"struct","optional":true,"field":"before","fields":[%[1]s]},
{"type":"struct","optional":true,"field":"after","fields":[%[1]s]},
{"type":"struct","optional":false,"field":"source","fields":[{"type":"string","field":"db"},{"type":"string","field":"schema"},{"type":"string","field":"table"},{"type":"int64","field":"lsn"}]},
{"type":"string","optional":false,"field":"op"}]},
"payload":{"before":null,"after":%[2]s,"source":{"db":"src","schema":%[3]q,"table":%[4]q,"lsn":%[5]d},"op":%[6]q}}`,
		strings.Join(defs, ","), after, schema, table, lsn, op)
	msg := testbed.Msg{Value: []byte(value)}
	if op != "t" {
		msg.Key = []byte(fmt.Sprintf(`{"schema":{"type":"struct","fields":[%s]},"payload":{%s}}`, strings.Join(keyDefs, ","), strings.Join(keyVals, ",")))
	}
	return msg
}

// TestCDCConfinement: hostile change events through `eosink run` with the default template
// ${source.schema}.${source.table}, schemas: [<replica>], create, evolve (max_columns: 7)
// and truncate on. Each is dead-lettered as a refused target, the partitions keep running,
// eosink's tables are untouched, no table is created outside the replica schema, evolve
// stops at the budget, and the real changes all apply:
//   - a truncate of the replica's accounts sent on the items topic (another topic's table);
//   - an event of eosink.cdc_positions itself on a topic named for it: a pk "null" row at
//     the maximal LSN would be accounts' truncate watermark, dropping every later change;
//   - an event of a public table (create: true would create it there);
//   - fields beyond max_columns, and a field eosink_lsn (a staging column);
//   - two source tables whose 64-byte names PostgreSQL would truncate to one table.
func TestCDCConfinement(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	replica, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	accounts := pgx.Identifier{replica, "accounts"}.Sanitize()
	if _, err := db.Exec(ctx, fmt.Sprintf("CREATE SCHEMA %s; CREATE TABLE %s (id bigint PRIMARY KEY, name text)",
		pgx.Identifier{replica}.Sanitize(), accounts)); err != nil {
		t.Fatal(err)
	}
	public := testbed.Name(t, "evil")
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{"public", public}.Sanitize())
	})
	long1, long2 := strings.Repeat("l", 63)+"1", strings.Repeat("l", 63)+"2"

	prefix := testbed.Name(t, "dbz")
	topic := func(schema, table string) string { return testbed.NamedTopic(t, e, prefix+"."+schema+"."+table, 1) }
	itemsTopic, accountsTopic := topic(replica, "items"), topic(replica, "accounts")
	positionsTopic, publicTopic := topic(offsets, "cdc_positions"), topic("public", public)
	long1Topic, long2Topic := topic(replica, long1), topic(replica, long2)

	id := func(n int) field { return field{"id", "int64", fmt.Sprint(n)} }
	name := func(s string) field { return field{"name", "string", fmt.Sprintf("%q", s)} }
	str := func(f string) field { return field{f, "string", `"junk"`} }
	k := []string{"id"}
	maxLSN := int64(1<<63 - 1)
	testbed.Produce(t, e, accountsTopic, []testbed.Msg{changeEvent("c", replica, "accounts", 100, k, id(7), name("seven"))})
	testbed.Produce(t, e, positionsTopic, []testbed.Msg{changeEvent("c", offsets, "cdc_positions", 100, []string{"target", "pk"},
		field{"target", "string", fmt.Sprintf("%q", accounts)}, field{"pk", "string", `"null"`},
		field{"commit_lsn", "int64", fmt.Sprint(maxLSN)}, field{"lsn", "int64", fmt.Sprint(maxLSN)}, field{"deleted", "boolean", "true"})})
	testbed.Produce(t, e, publicTopic, []testbed.Msg{changeEvent("c", "public", public, 100, k, id(1), name("evil"))})
	testbed.Produce(t, e, long1Topic, []testbed.Msg{changeEvent("c", replica, long1, 100, k, id(1), name("one"))})
	testbed.Produce(t, e, long2Topic, []testbed.Msg{changeEvent("c", replica, long2, 100, k, id(1), name("two"))})
	testbed.Produce(t, e, itemsTopic, []testbed.Msg{
		changeEvent("c", replica, "items", 100, k, id(1), name("one")),                                                   // creates items (2 columns)
		changeEvent("t", replica, "accounts", maxLSN, nil),                                                               // another topic's table
		changeEvent("c", replica, "items", 110, k, id(2), name("two"), str("a"), str("b"), str("c"), str("d"), str("e")), // 7 of 7
		changeEvent("c", replica, "items", 120, k, id(3), name("three"), str("f")),                                       // 8 of 7
		changeEvent("c", replica, "items", 130, k, id(4), name("four"), str("eosink_lsn")),                               // a staging column
		changeEvent("c", replica, "items", 140, k, id(5), name("five")),
	})
	testbed.Produce(t, e, accountsTopic, []testbed.Msg{changeEvent("c", replica, "accounts", 200, k, id(8), name("eight"))})

	pipeline := testbed.Name(t, "p")
	config := filepath.Join(t.TempDir(), "pipeline.yaml")
	yaml := fmt.Sprintf(`pipeline: %s
kafka:
  brokers: %s
  group: %s
  topics: ['^%s\..*']
database:
  url: %s
  schema: %s
on_poison: dead-letter
sink:
  type: cdc
  schemas: [%s]
  create: true
  evolve: add-columns
  max_columns: 7
  truncate: true
`, pipeline, e.Brokers, testbed.Name(t, "g"), strings.ReplaceAll(prefix, ".", `\.`), e.DatabaseURL, offsets, replica)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "migrate", "up", "-config", config)
	run := testbed.StartProcess(t, eosinkBin, "eosink run", []string{"run", "-config", config})
	caughtUp(t, e.DatabaseURL, e.Brokers, offsets, pipeline)
	if run.Exited() {
		t.Fatalf("eosink run exited:\n%s", run.Output())
	}
	run.StopClean(60 * time.Second)

	q := func(sql string, args ...any) (out []string) {
		t.Helper()
		rows, err := db.Query(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		if out, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatal(err)
		}
		return out
	}
	o := pgx.Identifier{offsets}.Sanitize()
	if stopped := q("SELECT topic || ': ' || stopped_error FROM " + o + ".offsets WHERE stopped_reason IS NOT NULL"); len(stopped) > 0 {
		t.Errorf("stopped partitions: %q", stopped)
	}
	dead := q(`SELECT topic || ' @' || "offset" || ': ' || error FROM ` + o + `.dead_letters ORDER BY topic, "offset"`)
	want := map[string]string{ // topic @offset → what the error says
		itemsTopic + " @1":     "the event's source table " + replica + ".accounts is not the one its topic " + itemsTopic + " names",
		itemsTopic + " @3":     "8 columns would exceed max_columns (7)",
		itemsTopic + " @4":     `field "eosink_lsn" cannot be a column: it begins with eosink_`,
		positionsTopic + " @0": "schema " + offsets + " is eosink's own schema",
		publicTopic + " @0":    "schema public is not one of schemas: [" + replica + "]",
		long1Topic + " @0":     "its table name is 64 bytes long",
		long2Topic + " @0":     "its table name is 64 bytes long",
	}
	for _, d := range dead {
		at, _, _ := strings.Cut(d, ": ")
		if w, ok := want[at]; !ok || !strings.Contains(d, "cdc: refused target") || !strings.Contains(d, w) {
			t.Errorf("dead letter %s\nwant %q", d, w)
		}
		delete(want, at)
	}
	for at, w := range want {
		t.Errorf("no dead letter at %s (%s)", at, w)
	}
	// eosink's positions hold the replica's rows only, and no watermark.
	if got := q("SELECT target || ' ' || pk::text FROM "+o+".cdc_positions WHERE target NOT IN ($1, $2) OR pk = 'null'::jsonb "+
		"UNION ALL SELECT target || ' ' || pk FROM "+o+".cdc_positions_int WHERE target NOT IN ($1, $2)",
		accounts, pgx.Identifier{replica, "items"}.Sanitize()); len(got) > 0 {
		t.Errorf("cdc_positions holds %q", got)
	}
	if got := q("SELECT id || ' ' || name FROM " + accounts + " ORDER BY id"); strings.Join(got, ",") != "7 seven,8 eight" {
		t.Errorf("accounts: %q, want 7 seven, 8 eight", got)
	}
	items := pgx.Identifier{replica, "items"}.Sanitize()
	if got := q("SELECT id::text FROM " + items + " ORDER BY id"); strings.Join(got, ",") != "1,2,5" {
		t.Errorf("items: ids %q, want 1, 2, 5", got)
	}
	if cols, _ := columnTypes(t, ctx, db, items); len(cols) != 7 {
		t.Errorf("items' columns: %q, want 7 (id, name, a..e)", cols)
	}
	if got := q(`SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname = $1 OR c.relname LIKE 'llll%' OR (n.nspname = $2 AND c.relname NOT IN ('items', 'accounts', 'items_pkey', 'accounts_pkey'))`,
		public, replica); len(got) > 0 {
		t.Errorf("tables made outside the confinement: %q", got)
	}
}
