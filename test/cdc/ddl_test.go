package cdc

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/cdc"
)

// Change events as Debezium's PostgreSQL connector writes them with Connect's JsonConverter
// and schemas on, for the tests that produce their own events: a table items (id bigint
// primary key, name text, amount numeric(10,2), at timestamp, doc jsonb), and in version 2
// of its schema two more columns (extra text, qty integer).

const itemFieldsV1 = `{"type":"int64","optional":false,"field":"id"},
 {"type":"string","optional":true,"field":"name"},
 {"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"amount"},
 {"type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1,"field":"at"},
 {"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"doc"}`

const itemFieldsV2 = itemFieldsV1 + `,
 {"type":"string","optional":true,"field":"extra"},
 {"type":"int32","optional":true,"field":"qty"}`

// itemEvent is the change event (op c) of item id; v2 adds the fields of version 2.
func itemEvent(table string, id int64, v2 bool) testbed.Msg {
	fields, extra := itemFieldsV1, ""
	if v2 {
		fields, extra = itemFieldsV2, fmt.Sprintf(`,"extra":"x%d","qty":%d`, id, id%7)
	}
	amount := base64.StdEncoding.EncodeToString(twos(big.NewInt(id*100 + 25)))
	lsn := 1000 + id*10
	value := fmt.Sprintf(`{"schema":{"type":"struct","name":"dbz.public.%[1]s.Envelope","fields":[
{"type":"struct","optional":true,"name":"dbz.public.%[1]s.Value","field":"before","fields":[%[2]s]},
{"type":"struct","optional":true,"name":"dbz.public.%[1]s.Value","field":"after","fields":[%[2]s]},
{"type":"struct","optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source","fields":[
 {"type":"string","field":"db"},{"type":"string","field":"schema"},{"type":"string","field":"table"},{"type":"int64","optional":true,"field":"lsn"}]},
{"type":"string","optional":false,"field":"op"}]},
"payload":{"before":null,"after":{"id":%[3]d,"name":"item %[3]d","amount":"%[4]s","at":%[5]d,"doc":"{\"n\": %[3]d}"%[6]s},
"source":{"db":"src","schema":"public","table":"%[1]s","lsn":%[7]d},"op":"c"}}`,
		table, fields, id, amount, int64(1796081150152718)+id, extra, lsn)
	key := fmt.Sprintf(`{"schema":{"type":"struct","name":"dbz.public.%s.Key","fields":[{"type":"int64","optional":false,"field":"id"}]},"payload":{"id":%d}}`, table, id)
	return testbed.Msg{Key: []byte(key), Value: []byte(value)}
}

// twos is n as big-endian two's complement, as Connect's Decimal holds its unscaled value.
func twos(n *big.Int) []byte {
	b := n.Bytes()
	if len(b) == 0 || b[0]&0x80 != 0 {
		b = append([]byte{0}, b...)
	}
	return b
}

// itemRows is what the replica's items must hold for ids from..to (inclusive).
func itemRowsSQL(from, to int64, v2 bool) string {
	extra := ""
	if v2 {
		extra = ", 'x' || i, (i % 7)::int"
	}
	return fmt.Sprintf(`SELECT i, 'item ' || i, round((i * 100 + 25)::numeric / 100, 2),
  timestamp '1970-01-01' + (1796081150152718 + i) * interval '1 microsecond', jsonb_build_object('n', i)%s
FROM generate_series(%d::bigint, %d) i`, extra, from, to)
}

// columnTypes returns table's columns as "name type", in order, and its primary key.
func columnTypes(t *testing.T, ctx context.Context, db *pgxpool.Pool, table string) (cols []string, pk string) {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, table)
	if err != nil {
		t.Fatal(err)
	}
	if cols, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	_ = db.QueryRow(ctx, `SELECT coalesce(pg_get_constraintdef(oid), '') FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p'`, table).Scan(&pk)
	return cols, pk
}

func exists(t *testing.T, ctx context.Context, db *pgxpool.Pool, table string) bool {
	t.Helper()
	var ok bool
	if err := db.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// sameRows fails unless query a and query b return the same multiset of rows.
func sameRows(ctx context.Context, db *pgxpool.Pool, a, b string) (bool, string) {
	var diff int
	err := db.QueryRow(ctx, fmt.Sprintf(`SELECT (SELECT count(*) FROM ((%[1]s) EXCEPT ALL (%[2]s)) x) + (SELECT count(*) FROM ((%[2]s) EXCEPT ALL (%[1]s)) y)`, a, b)).Scan(&diff)
	if err != nil {
		return false, err.Error()
	}
	return diff == 0, fmt.Sprintf("%d rows differ", diff)
}

// newPlugin returns a cdc plugin writing to schema replica, with its positions in schema
// positions (migrated).
func newPlugin(t *testing.T, e testbed.Env, replica, positions string, c cdc.Config) *cdc.CDC {
	t.Helper()
	c.Table, c.PositionsSchema = replica+".${source.table}", positions
	p, err := cdc.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.MigratePlugin(context.Background(), e.DatabaseURL, p, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

func records(partition int32, msgs ...testbed.Msg) sink.Batch {
	b := sink.Batch{Topic: "dbz.public.items", Partition: partition}
	for i, m := range msgs {
		b.Records = append(b.Records, sink.Record{Topic: b.Topic, Partition: partition, Offset: int64(i), Key: m.Key, Value: m.Value})
	}
	return b
}

// TestCDCCreateConcurrently: two partitions' transactions create the same table at once.
// The second waits on the first's advisory lock, then finds the table made and writes its
// row; both commit. Control: on this server, two plain CREATE TABLE IF NOT EXISTS at once
// do fail (unique violation on pg_type), which the engine would take for poison.
func TestCDCCreateConcurrently(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	replica, positions := testbed.Schema(t, e), testbed.Schema(t, e)
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	p := newPlugin(t, e, replica, positions, cdc.Config{Create: true})

	// The control: the race the advisory lock prevents.
	raw := pgx.Identifier{replica, "raw"}.Sanitize()
	a, _ := db.Begin(ctx)
	defer a.Rollback(ctx)
	if _, err := a.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+raw+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	rawErr := make(chan error, 1)
	go func() {
		_, err := db.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+raw+" (id int PRIMARY KEY)")
		rawErr <- err
	}()
	time.Sleep(300 * time.Millisecond) // the control only: let the second CREATE block
	_ = a.Commit(ctx)
	var pe *pgconn.PgError
	if err := <-rawErr; !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("control: two concurrent CREATE TABLE IF NOT EXISTS: %v, want a unique violation (23505)", err)
	}

	tx1, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	if err := p.Write(ctx, tx1, records(0, itemEvent("items", 1, false))); err != nil {
		t.Fatal(err)
	}
	tx2, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	pid2 := tx2.Conn().PgConn().PID()
	done := make(chan error, 1)
	go func() { done <- p.Write(ctx, tx2, records(1, itemEvent("items", 2, false))) }()
	testbed.Eventually(t, 10*time.Second, "the second partition waiting on the first's DDL lock", func() (bool, string) {
		var wait string
		_ = db.QueryRow(ctx, "SELECT coalesce(wait_event_type || ':' || wait_event, '') FROM pg_stat_activity WHERE pid = $1", pid2).Scan(&wait)
		return wait == "Lock:advisory", wait
	})
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the second partition's batch: %v", err)
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	table := pgx.Identifier{replica, "items"}.Sanitize()
	if ok, msg := sameRows(ctx, db, "SELECT * FROM "+table, itemRowsSQL(1, 2, false)); !ok {
		t.Fatal(msg)
	}
	cols, pk := columnTypes(t, ctx, db, table)
	t.Logf("created concurrently: %s: %s, %s", table, strings.Join(cols, ", "), pk)
}

// TestCDCDDLRolledBack: a batch that created the table, or added a column, and was rolled
// back leaves neither, and the plugin does not remember them: the next batch creates (adds)
// them again.
func TestCDCDDLRolledBack(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	replica, positions := testbed.Schema(t, e), testbed.Schema(t, e)
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	p := newPlugin(t, e, replica, positions, cdc.Config{Create: true, Evolve: cdc.EvolveAddColumns})
	table := pgx.Identifier{replica, "items"}.Sanitize()
	write := func(commit bool, msgs ...testbed.Msg) {
		t.Helper()
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if err := p.Write(ctx, tx, records(0, msgs...)); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(false, itemEvent("items", 1, false))
	if exists(t, ctx, db, table) {
		t.Fatal("the table exists after its batch was rolled back")
	}
	write(true, itemEvent("items", 1, false), itemEvent("items", 2, false))
	// Version 2 in a batch that rolls back, after a v1 event of the same batch (staged with
	// the old columns, applied before the column is added).
	write(false, itemEvent("items", 3, false), itemEvent("items", 4, true))
	if cols, _ := columnTypes(t, ctx, db, table); len(cols) != 5 {
		t.Fatalf("columns after the evolving batch rolled back: %v", cols)
	}
	write(true, itemEvent("items", 3, false), itemEvent("items", 4, true), itemEvent("items", 5, true))
	cols, pk := columnTypes(t, ctx, db, table)
	want := "id bigint, name text, amount numeric, at timestamp without time zone, doc jsonb, extra text, qty integer"
	if strings.Join(cols, ", ") != want || pk != "PRIMARY KEY (id)" {
		t.Fatalf("columns: %s, %s; want %s, PRIMARY KEY (id)", strings.Join(cols, ", "), pk, want)
	}
	if ok, msg := sameRows(ctx, db, "SELECT * FROM "+table,
		"SELECT *, NULL::text, NULL::int FROM ("+itemRowsSQL(1, 3, false)+") v1 UNION ALL "+itemRowsSQL(4, 5, true)); !ok {
		t.Fatal(msg)
	}
}

// TestCDCCreateKilledBeforeCommit: eosink run with create: true is SIGKILLed (failpoint
// in-handler) after the plugin's Write, which created the table, and before COMMIT. The
// table is not there, nothing is stored; the restarted sink creates it and writes every
// row once. Then events with a new schema version (two more fields) add the columns.
func TestCDCCreateKilledBeforeCommit(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	replica, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	topic := testbed.NamedTopic(t, e, testbed.Name(t, "dbz")+".public.items", 1) // Debezium's name: the topic check
	var msgs []testbed.Msg
	for id := int64(1); id <= 50; id++ {
		msgs = append(msgs, itemEvent("items", id, false))
	}
	testbed.Produce(t, e, topic, msgs)
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
on_poison: stop
sink:
  type: cdc
  table: "%s.$${source.table}"
  create: true
  evolve: add-columns
`, pipeline, e.Brokers, testbed.Name(t, "g"), topic, e.DatabaseURL, offsets, replica)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "migrate", "up", "-config", config)
	table := pgx.Identifier{replica, "items"}.Sanitize()

	killed := testbed.StartProcess(t, eosinkBin, "eosink run (killed in the handler)", []string{"run", "-config", config}, "EOSINK_FAILPOINTS=in-handler=kill@1")
	if err := killed.Wait(60 * time.Second); !testbed.KilledBySIGKILL(err) {
		t.Fatalf("eosink run with in-handler=kill@1: %v, want killed by SIGKILL", err)
	}
	if !killed.Contains("failpoint fired: in-handler kill") || !killed.Contains("target table created") {
		t.Fatalf("the failpoint did not fire after the table was created:\n%s", killed.Output())
	}
	if exists(t, ctx, db, table) {
		t.Fatal("the table created by the batch killed before COMMIT exists")
	}
	var stored int64
	if err := db.QueryRow(ctx, fmt.Sprintf("SELECT coalesce(max(next_offset), 0) FROM %s.offsets", pgx.Identifier{offsets}.Sanitize())).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Fatalf("stored offset %d after the kill, want 0", stored)
	}
	t.Logf("killed before COMMIT: no table %s, stored offset 0", table)

	run := testbed.StartProcess(t, eosinkBin, "eosink run", []string{"run", "-config", config})
	testbed.Eventually(t, 90*time.Second, "the replica's items", func() (bool, string) {
		if !exists(t, ctx, db, table) {
			return false, "no table"
		}
		return sameRows(ctx, db, "SELECT * FROM "+table, itemRowsSQL(1, 50, false))
	})
	msgs = msgs[:0]
	for id := int64(51); id <= 80; id++ {
		msgs = append(msgs, itemEvent("items", id, true))
	}
	testbed.Produce(t, e, topic, msgs)
	testbed.Eventually(t, 90*time.Second, "the replica's items with the new columns", func() (bool, string) {
		return sameRows(ctx, db, "SELECT * FROM "+table,
			"SELECT *, NULL::text, NULL::int FROM ("+itemRowsSQL(1, 50, false)+") v1 UNION ALL "+itemRowsSQL(51, 80, true))
	})
	run.StopClean(60 * time.Second)
	cols, pk := columnTypes(t, ctx, db, table)
	t.Logf("%s: %s, %s; 80 rows equal", table, strings.Join(cols, ", "), pk)
	if !run.Contains("columns added") {
		t.Error("no log line of the columns added")
	}
}

// TestCDCDDLWithoutSchemasStops: JsonConverter events without schemas carry no types. With
// create, a missing table stops its partition with a clear error; with evolve, a new field
// does too. Nothing is created or guessed, nothing is skipped or dead-lettered, and the
// stored offsets stay at 0.
func TestCDCDDLWithoutSchemasStops(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	replica, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	if _, err := db.Exec(ctx, fmt.Sprintf("CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.known (id bigint PRIMARY KEY, name text)", pgx.Identifier{replica}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	plain := func(table string, id int64, fields string) testbed.Msg {
		return testbed.Msg{Key: []byte(fmt.Sprintf(`{"id":%d}`, id)), Value: []byte(fmt.Sprintf(
			`{"before":null,"after":{"id":%d,"name":"n%d"%s},"source":{"db":"src","schema":"public","table":"%s","lsn":%d},"op":"c"}`,
			id, id, fields, table, 100+id))}
	}
	prefix := testbed.Name(t, "dbz") // Debezium's topic names: the topic check
	missing, known := testbed.NamedTopic(t, e, prefix+".public.missing", 1), testbed.NamedTopic(t, e, prefix+".public.known", 1)
	testbed.Produce(t, e, missing, []testbed.Msg{plain("missing", 1, ""), plain("missing", 2, "")})
	testbed.Produce(t, e, known, []testbed.Msg{plain("known", 1, ""), plain("known", 2, `,"extra":"x"`)})
	pipeline := testbed.Name(t, "p")
	config := filepath.Join(t.TempDir(), "pipeline.yaml")
	yaml := fmt.Sprintf(`pipeline: %s
kafka:
  brokers: %s
  group: %s
  topics: [%s, %s]
database:
  url: %s
  schema: %s
on_poison: dead-letter
sink:
  type: cdc
  table: "%s.$${source.table}"
  create: true
  evolve: add-columns
`, pipeline, e.Brokers, testbed.Name(t, "g"), missing, known, e.DatabaseURL, offsets, replica)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "migrate", "up", "-config", config)
	run := testbed.StartProcess(t, eosinkBin, "eosink run", []string{"run", "-config", config})
	type stop struct {
		topic, reason, err string
		next               int64
	}
	var stops []stop
	testbed.Eventually(t, 90*time.Second, "both partitions stopped", func() (bool, string) {
		rows, err := db.Query(ctx, fmt.Sprintf(`SELECT topic, coalesce(stopped_reason, ''), coalesce(stopped_error, ''), next_offset FROM %s.offsets ORDER BY topic`,
			pgx.Identifier{offsets}.Sanitize()))
		if err != nil {
			return false, err.Error()
		}
		stops = stops[:0]
		var s stop
		if _, err := pgx.ForEachRow(rows, []any{&s.topic, &s.reason, &s.err, &s.next}, func() error { stops = append(stops, s); return nil }); err != nil {
			return false, err.Error()
		}
		return len(stops) == 2 && stops[0].reason != "" && stops[1].reason != "", fmt.Sprint(stops)
	})
	run.StopClean(60 * time.Second)
	for _, s := range stops {
		t.Logf("%s stopped (%s) at offset %d: %s", s.topic, s.reason, s.next, s.err)
		if s.next != 0 || !strings.Contains(s.err, "eosink never guesses column types") {
			t.Errorf("%s: stopped at %d with %q; want 0 and the untyped error", s.topic, s.next, s.err)
		}
	}
	if exists(t, ctx, db, pgx.Identifier{replica, "missing"}.Sanitize()) {
		t.Error("a table was created from events without schemas")
	}
	if cols, _ := columnTypes(t, ctx, db, pgx.Identifier{replica, "known"}.Sanitize()); len(cols) != 2 {
		t.Errorf("known's columns: %v, want id and name only", cols)
	}
	var n int
	_ = db.QueryRow(ctx, fmt.Sprintf("SELECT (SELECT count(*) FROM %s.dead_letters) + (SELECT count(*) FROM %s.known)",
		pgx.Identifier{offsets}.Sanitize(), pgx.Identifier{replica}.Sanitize())).Scan(&n)
	if n != 0 {
		t.Errorf("%d dead letters and rows in known, want 0", n)
	}
}

// TestCDCCreateWithDeadLetters: a batch that creates the table and holds a poison record,
// written as the engine does with on_poison: dead-letter (savepoints, rolled back and
// written again): the table is created once, its rows written, the poison record
// dead-lettered; after the transaction rolls back nothing of it remains, and the plugin
// does it all again.
func TestCDCCreateWithDeadLetters(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	replica, positions := testbed.Schema(t, e), testbed.Schema(t, e)
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if err := sink.Migrate(ctx, e.DatabaseURL, positions); err != nil {
		t.Fatal(err)
	}
	p := newPlugin(t, e, replica, positions, cdc.Config{Create: true, Evolve: cdc.EvolveAddColumns})
	poison := itemEvent("items", 3, false)
	poison.Value = []byte(strings.Replace(string(poison.Value), `"op":"c"`, `"op":"x"`, 1))
	batch := records(0, itemEvent("items", 1, false), itemEvent("items", 2, true), poison, itemEvent("items", 4, false))
	table := pgx.Identifier{replica, "items"}.Sanitize()
	for _, commit := range []bool{false, true} {
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := engine.WriteBatch(ctx, tx, p, batch, engine.WriteOptions{Isolate: true, Schema: positions, Pipeline: "ddl"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Applied != 3 || len(res.DeadLettered) != 1 || res.DeadLettered[0].Record.Offset != 2 {
			t.Fatalf("applied %d, dead-lettered %v; want 3 and offset 2", res.Applied, res.DeadLettered)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		} else if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if exists(t, ctx, db, table) != commit {
			t.Fatalf("after the batch (commit %v): table exists %v", commit, !commit)
		}
	}
	if ok, msg := sameRows(ctx, db, "SELECT * FROM "+table, "SELECT *, NULL::text, NULL::int FROM ("+itemRowsSQL(1, 1, false)+
		") v1 UNION ALL "+itemRowsSQL(2, 2, true)+" UNION ALL SELECT *, NULL::text, NULL::int FROM ("+itemRowsSQL(4, 4, false)+") v1"); !ok {
		t.Fatal(msg)
	}
}

// TestCDCTypeChangeNeverAlters: a field whose type changes (qty, integer in the replica,
// arrives as a string) keeps its column's type: PostgreSQL casts the value ("12" into
// integer works), and a value it refuses ("many") is poison, dead-lettered with
// PostgreSQL's reason; the column is never altered.
func TestCDCTypeChangeNeverAlters(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	replica, positions := testbed.Schema(t, e), testbed.Schema(t, e)
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if err := sink.Migrate(ctx, e.DatabaseURL, positions); err != nil {
		t.Fatal(err)
	}
	p := newPlugin(t, e, replica, positions, cdc.Config{Create: true, Evolve: cdc.EvolveAddColumns})
	retyped := func(id int64, qty string) testbed.Msg {
		m := itemEvent("items", id, true)
		s := strings.Replace(string(m.Value), `{"type":"int32","optional":true,"field":"qty"}`, `{"type":"string","optional":true,"field":"qty"}`, 2)
		s = strings.Replace(s, fmt.Sprintf(`"qty":%d`, id%7), `"qty":"`+qty+`"`, 1)
		m.Value = []byte(s)
		return m
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	res, err := engine.WriteBatch(ctx, tx, p, records(0, itemEvent("items", 1, true), retyped(2, "12"), retyped(3, "many")),
		engine.WriteOptions{Isolate: true, Schema: positions, Pipeline: "ddl"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res.Applied != 2 || len(res.DeadLettered) != 1 || !strings.Contains(res.DeadLettered[0].Err.Error(), "invalid input syntax for type integer") {
		t.Fatalf("applied %d, dead-lettered %v; want 2, and offset 2 for its integer", res.Applied, res.DeadLettered)
	}
	table := pgx.Identifier{replica, "items"}.Sanitize()
	cols, _ := columnTypes(t, ctx, db, table)
	if cols[len(cols)-1] != "qty integer" {
		t.Fatalf("columns %v: qty was altered", cols)
	}
	var qty []int
	rows, _ := db.Query(ctx, "SELECT qty FROM "+table+" ORDER BY id")
	if qty, err = pgx.CollectRows(rows, pgx.RowTo[int]); err != nil || !slices.Equal(qty, []int{1, 12}) {
		t.Fatalf("qty %v, %v; want [1 12]", qty, err)
	}
	t.Logf("qty stays integer; %q dead-lettered: %v", "many", res.DeadLettered[0].Err)
}
