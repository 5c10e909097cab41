package test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/cli"
	"github.com/eosink/eosink/internal/testbed"
)

// castsFile writes a pipeline file reading topic into schema.target with the casts of
// docs/pipeline-config.md, dead-lettering poison, and returns its path.
func castsFile(t *testing.T, e testbed.Env, topic, schema, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	text := fmt.Sprintf(`kafka:
  brokers: %s
  group: %s
  topics: [%s]
database: {url: "%s", schema: %s, auto_migrate: true}
on_poison: dead-letter
sink:
  type: table
  table: %s.target
  columns:
    id: {from: value.id, required: true}
    at: {from: value.ts, cast: epoch_ms}
    at_us: {from: value.us, cast: epoch_us}
    at_s: {from: value.s, cast: epoch_s}
    seen: {from: value.seen, cast: rfc3339}
    seen_local: {from: value.local, cast: rfc3339}
    blob: {from: value.b64, cast: base64}
    doc: {from: value.payload, cast: json}
    region: {from: value.region, default: "eu"}
    qty: value.qty
%s`, e.Brokers, testbed.Name(t, "g"), topic, e.DatabaseURL, schema, schema, extra)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCastsLandExactValues: `eosink run -config` with casts writes each value exactly into
// real PostgreSQL columns (timestamptz to the microsecond, bytea bytes, jsonb), fills a
// default for a missing field and keeps an explicit null; a value that cannot be cast, a
// text into an integer column (a COPY type error) and a value that is not JSON are each
// dead-lettered, alone, with a reason that names the column (or says the value is not
// JSON), and the log says so too.
func TestCastsLandExactValues(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	ctx := context.Background()
	topic := testbed.Topic(t, e, 1)
	schema := testbed.Schema(t, e)
	db := testbed.Pool(t, e)
	if _, err := db.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.target (id int PRIMARY KEY,
  at timestamptz, at_us timestamptz, at_s timestamptz, seen timestamptz, seen_local timestamptz,
  blob bytea, doc jsonb, region text, qty int)`, pgx.Identifier{schema}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	good := `{"id":%d,"ts":1700000000123,"us":1700000000123456,"s":-1,"seen":"2023-11-14T23:13:20.5+01:00",
"local":"2023-11-14T22:13:20.000001","b64":"+/8AYf4=","payload":"{\"a\":{\"b\":[1,2,{\"c\":null}]}}","region":"us","qty":3}`
	values := []string{
		0: fmt.Sprintf(good, 1),
		1: `{"id":2,"ts":"253402300799999","b64":"-_8AYf4","payload":{"x":1},"qty":4}`, // region absent: the default
		2: `{"id":3,"ts":"abc"}`,                                                       // cannot be cast
		3: `{"id":4,"qty":"x"}`,                                                        // COPY: invalid input for integer
		4: `not json {"id":5}`,                                                         // not JSON at all
		5: `{"id":6,"region":null}`,                                                    // an explicit null stays NULL
		6: `{"id":7,"b64":"not base64!"}`,                                              // bad base64
		7: `{"id":8,"payload":"{\"a\":"}`,                                              // a string that is not JSON
		8: `{"id":9,"seen":"2023-11-14 25:00"}`,                                        // a bad timestamp
	}
	msgs := make([]testbed.Msg, len(values))
	for i, v := range values {
		msgs[i] = testbed.Msg{Value: []byte(v)}
	}
	testbed.Produce(t, e, topic, msgs)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan int, 1)
	var logs syncBuffer
	go func() {
		done <- cli.Run(runCtx, []string{"run", "-config", castsFile(t, e, topic, schema, "")}, io.Discard, &logs)
	}()
	deadLetters := fmt.Sprintf(`SELECT "offset"::text || ' ' || error FROM %s.dead_letters WHERE topic = '%s' ORDER BY "offset"`,
		pgx.Identifier{schema}.Sanitize(), topic)
	testbed.Eventually(t, 90*time.Second, "the records applied or dead-lettered", func() (bool, string) {
		select {
		case code := <-done:
			t.Fatalf("eosink run exited %d: %s", code, lastLines(logs.String(), 5))
		default:
		}
		var rows, dead int
		_ = db.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.target", pgx.Identifier{schema}.Sanitize())).Scan(&rows)
		_ = db.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.dead_letters WHERE topic = $1", pgx.Identifier{schema}.Sanitize()), topic).Scan(&dead)
		return rows+dead == len(values), fmt.Sprintf("%d rows, %d dead letters", rows, dead)
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("eosink run exited %d: %s", code, lastLines(logs.String(), 5))
	}

	// The values, compared in PostgreSQL with the exact literals.
	check := func(id int, cond string) {
		t.Helper()
		var ok bool
		if err := db.QueryRow(ctx, fmt.Sprintf("SELECT %s FROM %s.target WHERE id = $1", cond, pgx.Identifier{schema}.Sanitize()), id).Scan(&ok); err != nil || !ok {
			var row string
			_ = db.QueryRow(ctx, fmt.Sprintf("SELECT t::text FROM %s.target t WHERE id = $1", pgx.Identifier{schema}.Sanitize()), id).Scan(&row)
			t.Errorf("id %d: %s is not true (%v): row %s", id, cond, err, row)
		}
	}
	check(1, `at = '2023-11-14T22:13:20.123Z'::timestamptz AND extract(microseconds FROM at) = 20123000`)
	check(1, `at_us = '2023-11-14T22:13:20.123456Z'::timestamptz`)
	check(1, `at_s = '1969-12-31T23:59:59Z'::timestamptz`)
	check(1, `seen = '2023-11-14T22:13:20.5Z'::timestamptz`)
	check(1, `seen_local = '2023-11-14T22:13:20.000001Z'::timestamptz`) // no zone: UTC, not the session's
	check(1, `blob = '\xfbff0061fe'::bytea`)
	check(1, `doc = '{"a":{"b":[1,2,{"c":null}]}}'::jsonb AND jsonb_typeof(doc) = 'object'`)
	check(1, `region = 'us' AND qty = 3`)
	check(2, `at = '9999-12-31T23:59:59.999Z'::timestamptz AND blob = '\xfbff0061fe'::bytea AND doc = '{"x":1}'::jsonb`)
	check(2, `region = 'eu'`) // the default
	check(6, `region IS NULL AND at IS NULL AND blob IS NULL`)

	dead := strs(t, db, deadLetters)
	want := []struct {
		offset int
		parts  []string
	}{
		{2, []string{`poison record ` + topic + `[0]@2`, `column "at" (value.ts): cast epoch_ms: "abc" is not a number`}},
		{3, []string{`poison record ` + topic + `[0]@3`, `column qty: `, `invalid input syntax for type integer: "x" (SQLSTATE 22P02)`}},
		{4, []string{`poison record ` + topic + `[0]@4`, `mapping: value is not JSON: syntax error at byte 0`}},
		{6, []string{`column "blob" (value.b64): cast base64: "not base64!" is not base64`}},
		{7, []string{`column "doc" (value.payload): cast json: "{\"a\":" is not JSON (unexpected end)`}},
		{8, []string{`column "seen" (value.seen): cast rfc3339: "2023-11-14 25:00" is not an RFC 3339 timestamp`}},
	}
	if len(dead) != len(want) {
		t.Fatalf("dead letters:\n%s\nwant offsets 2, 3, 4, 6, 7, 8", strings.Join(dead, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(dead[i], fmt.Sprint(w.offset, " ")) {
			t.Errorf("dead letter %d: %s, want offset %d", i, dead[i], w.offset)
		}
		for _, p := range w.parts {
			if !strings.Contains(dead[i], p) {
				t.Errorf("dead letter %q lacks %q", dead[i], p)
			}
		}
	}
	// The log's dead-letter line says which record and which column.
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "record dead-lettered") && strings.Contains(line, "offset=3") {
			if !strings.Contains(line, "column qty") {
				t.Errorf("log line %q does not name the column", line)
			}
			return
		}
	}
	t.Errorf("no dead-letter log line for offset 3:\n%s", logs.String())
}

// TestHintsUseTheFilesWords: `eosink run -config` on a schema whose offsets table, or whose
// plugin's tables, were not migrated exits 1 with the remedy in the file's words: `eosink
// migrate up -config FILE` or database.auto_migrate.
func TestHintsUseTheFilesWords(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	topic := testbed.Topic(t, e, 1)
	schema := testbed.Schema(t, e)
	file := castsFile(t, e, topic, schema, "")
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	run := func(text string) (int, string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var errOut strings.Builder
		code := cli.Run(ctx, []string{"run", "-config", file}, io.Discard, &errOut)
		return code, errOut.String()
	}
	// No offsets table.
	manual := strings.Replace(string(text), "auto_migrate: true", "auto_migrate: false", 1)
	code, out := run(manual)
	want := fmt.Sprintf("eosink: run %s: eosink tables in schema %q are not migrated: run `eosink migrate up -config %s`, or set database.auto_migrate: true", file, schema, file)
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("exit %d:\n%s\nwant %q", code, out, want)
	}
	if strings.Contains(out, "AutoMigrate") {
		t.Errorf("the hint uses the Go field's name:\n%s", out)
	}
	// The operator commands say the same.
	for _, cmd := range [][]string{{"lag"}, {"dlq", "list"}} {
		var lout, lerr strings.Builder
		code := cli.Run(context.Background(), append(cmd, "-config", file), &lout, &lerr)
		want := "eosink: the schema is not migrated: run `eosink migrate up -config " + file + "`"
		if code != 1 || !strings.Contains(lerr.String(), want) {
			t.Errorf("%v: exit %d:\n%s\nwant %q", cmd, code, lerr.String(), want)
		}
	}
	// The offsets table, but not the inbox's tables.
	var mout, merr strings.Builder
	if code := cli.Run(context.Background(), []string{"migrate", "up", "-database-url", e.DatabaseURL, "-schema", schema}, &mout, &merr); code != 0 {
		t.Fatalf("migrate up: exit %d: %s", code, merr.String())
	}
	inbox := strings.Replace(manual, "sink:\n  type: table\n", "sink:\n  type: inbox\n  event_id: value.id\n  inner:\n    type: table\n", 1)
	inbox = strings.Replace(inbox, "\n  table: ", "\n    table: ", 1)
	inbox = strings.Replace(inbox, "\n  columns:\n", "\n    columns:\n", 1)
	inbox = strings.ReplaceAll(inbox, "\n    id: {from", "\n      id: {from")
	for _, col := range []string{"at", "at_us", "at_s", "seen", "seen_local", "blob", "doc", "region", "qty"} {
		inbox = strings.Replace(inbox, "\n    "+col+": ", "\n      "+col+": ", 1)
	}
	code, out = run(inbox)
	want = fmt.Sprintf("eosink: run %s: inbox tables in schema %q are not migrated: run `eosink migrate up -config %s`, or set database.auto_migrate: true", file, schema, file)
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("exit %d:\n%s\nwant %q\nfile:\n%s", code, out, want, inbox)
	}
}

// TestThreePluginMistakes: `eosink run -validate -config` on a file whose sink section has
// three mistakes reports all three, each at its sink. path and line, and exits 1.
func TestThreePluginMistakes(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	file := castsFile(t, e, "orders", "s", "")
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.NewReplacer(
		"at: {from: value.ts, cast: epoch_ms}", "at: {from: value.ts, cast: epoch_millis}",
		"region: {from: value.region, default: \"eu\"}", "region: {from: value.region, default: \"eu\", required: true}",
		"qty: value.qty", "qty: {from: value.qty, requird: true}",
	).Replace(string(text))
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	code := cli.Run(context.Background(), []string{"run", "-validate", "-config", file}, &out, &errOut)
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	want := []string{
		file + `: sink.columns.at.cast: unknown cast "epoch_millis" (want epoch_s, epoch_ms, epoch_us, rfc3339, base64 or json) (line 12)`,
		file + `: sink.columns.region.default: a default and required: true exclude each other (required refuses what the default fills in) (line 19)`,
		file + `: sink.columns.qty.requird: unknown key (sink.columns.qty has from, expr, required, cast, default); did you mean required? (line 20)`,
	}
	if code != 1 || len(lines) != len(want) {
		t.Fatalf("exit %d:\n%s\nwant:\n%s", code, errOut.String(), strings.Join(want, "\n"))
	}
	for i, w := range want {
		if lines[i] != "eosink: "+w {
			t.Errorf("line %d:\n%s\nwant\neosink: %s", i, lines[i], w)
		}
	}
}

// TestCastsInUpsert: the upsert plugin takes casts and defaults from the same mapping: a
// key column cast from base64 merges and, on a tombstone, deletes by the cast key; a bad
// cast and a COPY type error into the staging table are dead-lettered naming the column.
func TestCastsInUpsert(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	ctx := context.Background()
	topic := testbed.Topic(t, e, 1)
	schema := testbed.Schema(t, e)
	db := testbed.Pool(t, e)
	if _, err := db.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.target (id bytea PRIMARY KEY, at timestamptz, qty int, region text)`,
		pgx.Identifier{schema}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	msg := func(key, value string) testbed.Msg {
		m := testbed.Msg{Key: []byte(key), Value: []byte(value)}
		if value == "" {
			m.Value = nil
		}
		return m
	}
	testbed.Produce(t, e, topic, []testbed.Msg{
		0: msg("QUJD", `{"ts":1700000000123,"qty":1}`),
		1: msg("REVG", `{"ts":1,"qty":2,"region":"us"}`),
		2: msg("QUJD", ""), // deletes ABC
		3: msg("R0hJ", `{"ts":"soon"}`),
		4: msg("SktM", `{"ts":2,"qty":"many"}`),
		5: msg("REVG", `{"ts":1700000000999,"qty":3}`), // region absent: the default replaces us
	})
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	text := fmt.Sprintf(`kafka: {brokers: %s, group: %s, topics: [%s]}
database: {url: "%s", schema: %s, auto_migrate: true}
on_poison: dead-letter
sink:
  type: upsert
  table: %s.target
  key: [id]
  delete_on_tombstone: true
  columns:
    id: {from: key, cast: base64}
    at: {from: value.ts, cast: epoch_ms}
    qty: value.qty
    region: {from: value.region, default: eu}
`, e.Brokers, testbed.Name(t, "g"), topic, e.DatabaseURL, schema, schema)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan int, 1)
	var logs syncBuffer
	go func() { done <- cli.Run(runCtx, []string{"run", "-config", path}, io.Discard, &logs) }()
	rows := func() []string {
		return strs(t, db, fmt.Sprintf(`SELECT encode(id, 'escape') || ' ' || to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || ' ' || qty || ' ' || region FROM %s.target ORDER BY id`,
			pgx.Identifier{schema}.Sanitize()))
	}
	deadSQL := fmt.Sprintf(`SELECT "offset"::text || ' ' || error FROM %s.dead_letters WHERE topic = '%s' ORDER BY "offset"`, pgx.Identifier{schema}.Sanitize(), topic)
	testbed.Eventually(t, 90*time.Second, "the batch merged", func() (bool, string) {
		select {
		case code := <-done:
			t.Fatalf("eosink run exited %d: %s", code, lastLines(logs.String(), 5))
		default:
		}
		var dead int
		_ = db.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.dead_letters WHERE topic = $1", pgx.Identifier{schema}.Sanitize()), topic).Scan(&dead)
		r := rows()
		return dead == 2 && len(r) == 1 && strings.Contains(r[0], " 3 "), fmt.Sprintf("rows %q, %d dead letters", r, dead)
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("eosink run exited %d: %s", code, lastLines(logs.String(), 5))
	}
	if got := rows(); len(got) != 1 || got[0] != "DEF 2023-11-14T22:13:20.999000 3 eu" {
		t.Fatalf("rows %q", got)
	}
	dead := strs(t, db, deadSQL)
	if len(dead) != 2 || !strings.HasPrefix(dead[0], "3 ") || !strings.Contains(dead[0], `column "at" (value.ts): cast epoch_ms: "soon" is not a number`) ||
		!strings.HasPrefix(dead[1], "4 ") || !strings.Contains(dead[1], `column qty: ERROR: invalid input syntax for type integer: "many"`) {
		t.Fatalf("dead letters:\n%s", strings.Join(dead, "\n"))
	}
}
