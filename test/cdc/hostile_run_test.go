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

// hostileEnvelope is a change event (op c) of source schema.table at lsn as the
// JsonConverter writes it with schemas on: fields are the after image's Connect field
// definitions, after its JSON, key the key's field definition and payload (id).
func hostileEnvelope(schema, table string, lsn int64, id int, fields []string, after string) testbed.Msg {
	defs := strings.Join(fields, ",")
	value := fmt.Sprintf(`{"schema":{"type":"struct","fields":[
{"type":"struct","optional":true,"field":"before","fields":[%[1]s]},
{"type":"struct","optional":true,"field":"after","fields":[%[1]s]},
{"type":"struct","optional":false,"field":"source","fields":[{"type":"string","field":"db"},{"type":"string","field":"schema"},{"type":"string","field":"table"},{"type":"int64","field":"lsn"}]},
{"type":"string","optional":false,"field":"op"}]},
"payload":{"before":null,"after":%[2]s,"source":{"db":"src","schema":%[3]q,"table":%[4]q,"lsn":%[5]d},"op":"c"}}`,
		defs, after, schema, table, lsn)
	key := fmt.Sprintf(`{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}]},"payload":{"id":%d}}`, id)
	return testbed.Msg{Key: []byte(key), Value: []byte(value)}
}

// Connect field definitions of the hostile events.
const (
	idDef   = `{"type":"int64","optional":false,"field":"id"}`
	nameDef = `{"type":"string","optional":true,"field":"name"}`
	varDec  = `{"type":"struct","optional":true,"name":"io.debezium.data.VariableScaleDecimal","version":1,"fields":[{"type":"int32","field":"scale"},{"type":"bytes","field":"value"}],"field":"amount"}`
)

func strDef(name string) string {
	return fmt.Sprintf(`{"type":"string","optional":true,"field":%q}`, name)
}

func decimalDef(scale string) string {
	return `{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"` + scale + `"},"field":"amount"}`
}

// hostile is one hostile change event: what it tries, the topic it is sent on (an index
// into the test's topics), the event, and what its dead letter's reason must say ("" for
// an event that must apply: a huge but valid schema).
type hostile struct {
	name  string
	topic string
	msg   testbed.Msg
	want  []string
}

// TestCDCHostileEventsRun sends each hostile change event of issue 22 through `eosink run`
// (the cdc plugin, the default template ${source.schema}.${source.table} with schemas:
// [<replica>], create, evolve add-columns with max_columns: 5, topic_check on, on_poison:
// dead-letter), one at a time: each must be dead-lettered with a reason naming the problem,
// the process must stay alive, and a good change sent after it (on the accounts topic) must
// apply. Huge schemas (16 unique ones of 800 KB, 12.8 MB in all, past the schema cache's
// 8 MiB) must apply. At the end the replica holds exactly the good rows, accounts keeps its three
// columns, cdc_positions holds only accounts' keys (no watermark), and no table exists
// outside the replica schema. The Avro ones (reused named records, 1 MiB of empty records)
// are covered below the binary, in sink/internal/schemaformat/hostile_test.go.
func TestCDCHostileEventsRun(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	replica, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	accounts := pgx.Identifier{replica, "accounts"}.Sanitize()
	if _, err := db.Exec(ctx, fmt.Sprintf("CREATE SCHEMA %s; CREATE TABLE %s (id bigint PRIMARY KEY, name text, amount numeric)",
		pgx.Identifier{replica}.Sanitize(), accounts)); err != nil {
		t.Fatal(err)
	}
	evil := testbed.Name(t, "evil")
	long := strings.Repeat("l", 64)
	prefix := testbed.Name(t, "dbz")
	topics := map[string]string{}
	for _, st := range [][2]string{{replica, "accounts"}, {replica, "items"}, {offsets, "cdc_positions"}, {"pg_catalog", "pg_class"},
		{"information_schema", "tables"}, {"public", evil}, {replica, long}} {
		topics[st[0]+"."+st[1]] = testbed.NamedTopic(t, e, prefix+"."+st[0]+"."+st[1], 1)
	}
	acc := replica + ".accounts"

	// The hostile events, in the order sent; lsn 1000+i.
	amount := func(id int, def, value string) testbed.Msg {
		return hostileEnvelope(replica, "accounts", int64(1000+id), 900+id, []string{idDef, nameDef, def},
			fmt.Sprintf(`{"id":%d,"name":"evil","amount":%s}`, 900+id, value))
	}
	extra := func(id int, fields ...string) testbed.Msg {
		defs := []string{idDef, nameDef}
		after := fmt.Sprintf(`{"id":%d,"name":"evil"`, 900+id)
		for _, f := range fields {
			defs = append(defs, strDef(f))
			after += fmt.Sprintf(",%q:\"junk\"", f)
		}
		return hostileEnvelope(replica, "accounts", int64(1000+id), 900+id, defs, after+"}")
	}
	plain := func(id int, amount string) testbed.Msg { // JSON without schemas
		m := hostileEnvelope(replica, "accounts", int64(1000+id), 900+id, nil, "")
		m.Value = []byte(fmt.Sprintf(`{"before":null,"after":{"id":%d,"name":"evil","amount":%s},"source":{"db":"src","schema":%q,"table":"accounts","lsn":%d},"op":"c"}`,
			900+id, amount, replica, 1000+id))
		return m
	}
	other := func(id int, schema, table string) testbed.Msg {
		return hostileEnvelope(schema, table, int64(1000+id), 900+id, []string{idDef, nameDef}, fmt.Sprintf(`{"id":%d,"name":"evil"}`, 900+id))
	}
	maxLSN := int64(1<<63 - 1)
	watermark := hostileEnvelope(offsets, "cdc_positions", 1000, 0, []string{strDef("target"), strDef("pk"),
		`{"type":"int64","field":"commit_lsn"}`, `{"type":"int64","field":"lsn"}`, `{"type":"boolean","field":"deleted"}`},
		fmt.Sprintf(`{"target":%q,"pk":"null","commit_lsn":%d,"lsn":%d,"deleted":true}`, accounts, maxLSN, maxLSN))
	deep := amount(14, decimalDef("2"), `"AQ=="`)
	deep.Value = []byte(strings.Replace(string(deep.Value), `"parameters":{"scale":"2"}`,
		`"parameters":{"scale":"2"},"doc":`+strings.Repeat("[", 10001)+strings.Repeat("]", 10001), 1))
	events := []hostile{
		{"decimal without schema, scale -2^63", acc, plain(1, `{"scale":-9223372036854775808,"value":"AQ=="}`),
			[]string{`field "amount"`, "scale -9223372036854775808"}},
		{"decimal without schema, scale 3e8", acc, plain(2, `{"scale":300000000,"value":"AQ=="}`), []string{`field "amount"`, "scale 300000000"}},
		{"VariableScaleDecimal, scale -2^63", acc, amount(3, varDec, `{"scale":-9223372036854775808,"value":"AQ=="}`),
			[]string{`field "amount"`, "scale -9223372036854775808"}},
		{"VariableScaleDecimal, scale -2^31", acc, amount(4, varDec, `{"scale":-2147483648,"value":"AQ=="}`), []string{`field "amount"`, "scale -2147483648"}},
		{"VariableScaleDecimal, scale 3e8", acc, amount(5, varDec, `{"scale":300000000,"value":"AQ=="}`), []string{`field "amount"`, "scale 300000000"}},
		{"Connect Decimal, scale parameter -2^63", acc, amount(6, decimalDef("-9223372036854775808"), `"AQ=="`), []string{`field "amount"`, "scale -9223372036854775808"}},
		{"Connect Decimal, scale parameter 3e8", acc, amount(7, decimalDef("300000000"), `"AQ=="`), []string{`field "amount"`, "scale 300000000"}},
		{"eosink's own schema: cdc_positions watermark", offsets + ".cdc_positions", watermark, []string{"schema " + offsets + " is eosink's own schema"}},
		{"pg_catalog", "pg_catalog.pg_class", other(8, "pg_catalog", "pg_class"), []string{"schema pg_catalog is a PostgreSQL system schema"}},
		{"information_schema", "information_schema.tables", other(9, "information_schema", "tables"), []string{"schema information_schema is a PostgreSQL system schema"}},
		{"a schema outside schemas:", "public." + evil, other(10, "public", evil), []string{"schema public is not one of schemas: [" + replica + "]"}},
		{"topic/source mismatch (topic_check)", replica + ".items", other(11, replica, "accounts"),
			[]string{"the event's source table " + replica + ".accounts is not the one its topic " + topics[replica+".items"] + " names"}},
		{"table name over 63 bytes", replica + "." + long, other(12, replica, long), []string{"its table name is 64 bytes long"}},
		{"column name over 63 bytes (evolve)", acc, extra(13, long), []string{`field "` + long + `" cannot be a column: it is 64 bytes long`}},
		{"deeply nested JSON schema", acc, deep, []string{"max depth"}},
		{"system column xmin (evolve)", acc, extra(15, "xmin"), []string{`field "xmin" cannot be a column: it is the name of a PostgreSQL system column`}},
		{"system column ctid (evolve)", acc, extra(16, "ctid"), []string{`field "ctid" cannot be a column: it is the name of a PostgreSQL system column`}},
		{"staging column eosink_commit (evolve)", acc, extra(17, "eosink_commit"), []string{`field "eosink_commit" cannot be a column: it begins with eosink_`}},
		{"staging column eosink_lsn (evolve)", acc, extra(18, "eosink_lsn"), []string{`field "eosink_lsn" cannot be a column: it begins with eosink_`}},
		{"evolve past max_columns", acc, extra(19, "c1", "c2", "c3"), []string{"6 columns would exceed max_columns (5)"}},
	}
	// Huge schemas: 16 unique schemas of 800 KB (a 400 KB doc on the name field, in before
	// and after), valid.
	for i := range 16 {
		doc := fmt.Sprintf(`{"type":"string","optional":true,"doc":"%d %s","field":"name"}`, i, strings.Repeat("x", 400<<10))
		events = append(events, hostile{fmt.Sprintf("huge schema %d of 800 KB (valid)", i+1), acc,
			hostileEnvelope(replica, "accounts", int64(2000+i), 800+i, []string{idDef, doc}, fmt.Sprintf(`{"id":%d,"name":"huge"}`, 800+i)), nil})
	}

	pipeline := testbed.Name(t, "p")
	config := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`pipeline: %s
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
  max_columns: 5
`, pipeline, e.Brokers, testbed.Name(t, "g"), strings.ReplaceAll(prefix, ".", `\.`), e.DatabaseURL, offsets, replica)), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "migrate", "up", "-config", config)
	run := testbed.StartProcess(t, eosinkBin, "eosink run", []string{"run", "-config", config})
	o := pgx.Identifier{offsets}.Sanitize()
	good := func(n int) testbed.Msg {
		return hostileEnvelope(replica, "accounts", int64(5000+n), n, []string{idDef, nameDef, decimalDef("2")},
			fmt.Sprintf(`{"id":%d,"name":"good %d","amount":"AQ=="}`, n, n))
	}
	alive := func(after string) {
		t.Helper()
		if run.Exited() {
			t.Fatalf("eosink run exited after %s:\n%s", after, run.Output())
		}
	}
	var report []string
	for i, h := range events {
		var before int64 // the newest dead letter's id before this event
		if err := db.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM "+o+".dead_letters WHERE pipeline = $1", pipeline).Scan(&before); err != nil {
			t.Fatal(err)
		}
		testbed.Produce(t, e, topics[h.topic], []testbed.Msg{h.msg})
		if h.want != nil {
			var reason string
			testbed.Eventually(t, 60*time.Second, "the dead letter of "+h.name, func() (bool, string) {
				// One statement: a dead letter of this topic newer than any before the event.
				err := db.QueryRow(ctx, `SELECT error FROM `+o+`.dead_letters WHERE pipeline = $1 AND topic = $2 AND id > $3 ORDER BY id DESC LIMIT 1`,
					pipeline, topics[h.topic], before).Scan(&reason)
				if run.Exited() {
					t.Fatalf("eosink run exited on %s:\n%s", h.name, run.Output())
				}
				return err == nil, fmt.Sprint("no new dead letter: ", err)
			})
			for _, w := range h.want {
				if !strings.Contains(reason, w) {
					t.Errorf("%s: dead letter %q, want it to say %q", h.name, reason, w)
				}
			}
			report = append(report, fmt.Sprintf("%-45s dead letter: %s", h.name, reason))
		}
		// A good change after it applies, on the accounts topic.
		n := i + 1
		testbed.Produce(t, e, topics[acc], []testbed.Msg{good(n)})
		testbed.Eventually(t, 60*time.Second, fmt.Sprintf("good change %d applied after %s", n, h.name), func() (bool, string) {
			var ok bool
			err := db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+accounts+" WHERE id = $1)", n).Scan(&ok)
			alive(h.name)
			return err == nil && ok, fmt.Sprint(err)
		})
		alive(h.name)
		if h.want == nil {
			report = append(report, fmt.Sprintf("%-45s applied", h.name))
		}
	}
	caughtUp(t, e.DatabaseURL, e.Brokers, offsets, pipeline)
	alive("the last event")
	t.Logf("each hostile event, then a good change that applied, the process alive:\n  %s", strings.Join(report, "\n  "))
	// The process's peak memory (VmHWM) after the huge schemas: under the chart's 512 MiB limit.
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", run.Cmd.Process.Pid)); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			var kb int64
			if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
				t.Logf("eosink run's peak resident memory: %d MiB", kb>>10)
				if kb > 512<<10 {
					t.Errorf("eosink run's peak resident memory %d MiB is over 512 MiB", kb>>10)
				}
			}
		}
	}
	if s := run.Output(); strings.Contains(s, "panic") {
		t.Errorf("the process logged a panic:\n%s", s)
	}
	run.StopClean(60 * time.Second)

	q := func(sql string, args ...any) []string {
		t.Helper()
		rows, err := db.Query(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := q("SELECT topic || ': ' || stopped_error FROM " + o + ".offsets WHERE stopped_reason IS NOT NULL"); len(got) > 0 {
		t.Errorf("stopped partitions: %q", got)
	}
	var want []string
	for n := 1; n <= len(events); n++ {
		want = append(want, fmt.Sprintf("%d good %d 0.01", n, n))
	}
	for i := range 16 {
		want = append(want, fmt.Sprintf("%d huge ", 800+i))
	}
	got := q("SELECT id || ' ' || coalesce(name, '') || ' ' || coalesce(amount::text, '') FROM " + accounts + " ORDER BY id")
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("accounts holds %q\nwant the good rows %q", got, want)
	}
	if cols, _ := columnTypes(t, ctx, db, accounts); len(cols) != 3 {
		t.Errorf("accounts' columns: %q, want id, name, amount", cols)
	}
	if got := q("SELECT target || ' ' || pk::text FROM "+o+".cdc_positions WHERE target <> $1 OR pk = 'null'::jsonb "+
		"UNION ALL SELECT target || ' ' || pk FROM "+o+".cdc_positions_int WHERE target <> $1", accounts); len(got) > 0 {
		t.Errorf("cdc_positions holds %q", got)
	}
	if got := q(`SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname = $1 OR c.relname LIKE 'llll%' OR (n.nspname = $2 AND c.relname NOT IN ('accounts', 'accounts_pkey'))`,
		evil, replica); len(got) > 0 {
		t.Errorf("tables made outside the confinement: %q", got)
	}
	if got := q("SELECT DISTINCT pipeline FROM "+o+".offsets WHERE pipeline <> $1", pipeline); len(got) > 0 {
		t.Errorf("offsets of other pipelines: %q", got)
	}
}
