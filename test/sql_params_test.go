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

// TestSQLParamCasts runs `eosink run -config` with the sql plugin whose parameters take the
// columns' casts and defaults, against the real Kafka and PostgreSQL: a payment dated
// "yesterday", which PostgreSQL itself would read into @at::timestamptz as the day before,
// is dead-lettered with the parameter and the value named, and written nowhere; the good
// records are written with the exact timestamptz, a zone-less time as UTC whatever the
// session's TimeZone, and the defaults filled in.
func TestSQLParamCasts(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	ctx := context.Background()
	topic := testbed.Topic(t, e, 1)
	schema := testbed.Schema(t, e)
	db := testbed.Pool(t, e)
	s := pgx.Identifier{schema}.Sanitize()
	if _, err := db.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.payments (id int PRIMARY KEY,
  at timestamptz NOT NULL, booked timestamptz, currency text NOT NULL)`, s)); err != nil {
		t.Fatal(err)
	}
	// The session's TimeZone is far from UTC, so that a zone-less time read by PostgreSQL
	// rather than by the cast would land 14 hours off.
	url := e.DatabaseURL
	if strings.Contains(url, "?") {
		url += "&timezone=Pacific/Kiritimati"
	} else {
		url += "?timezone=Pacific/Kiritimati"
	}
	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	text := fmt.Sprintf(`kafka:
  brokers: %s
  group: %s
  topics: [%s]
database: {url: "%s", schema: %s, auto_migrate: true}
on_poison: dead-letter
sink:
  type: sql
  params:
    id: {from: value.id, required: true}
    at: {from: value.at, required: true, cast: rfc3339}
    booked: {from: value.booked_ms, cast: epoch_ms}
    currency: {from: value.currency, default: EUR}
  statements:
    - INSERT INTO %s.payments (id, at, booked, currency) VALUES (@id, @at::timestamptz, @booked, @currency)
`, e.Brokers, testbed.Name(t, "g"), topic, url, schema, schema)
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	// -validate shows the parameters with their casts and defaults.
	var out, errOut strings.Builder
	if code := cli.Run(ctx, []string{"run", "-validate", "-config", file}, &out, &errOut); code != 0 {
		t.Fatalf("-validate: exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"params:    @at       <- value.at (required, cast rfc3339)\n",
		"           @booked   <- value.booked_ms (cast epoch_ms)\n", "           @currency <- value.currency (default \"EUR\")\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-validate lacks %q:\n%s", want, out.String())
		}
	}

	values := []string{
		0: `{"id":1,"at":"2023-11-14T23:13:20.5+01:00","booked_ms":1700000000123,"currency":"USD"}`,
		1: `{"id":2,"at":"yesterday","booked_ms":1700000000123}`, // PostgreSQL would take it; the cast does not
		2: `{"id":3,"at":"2023-11-14 22:13:20.000001"}`,          // no zone: UTC; no booked_ms: NULL; the default currency
		3: `{"id":4,"at":"2023-11-14T22:13:20Z","booked_ms":"soon"}`,
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
	go func() { done <- cli.Run(runCtx, []string{"run", "-config", file}, io.Discard, &logs) }()
	count := func(q string) int {
		var n int
		_ = db.QueryRow(ctx, q).Scan(&n)
		return n
	}
	testbed.Eventually(t, 90*time.Second, "the records written or dead-lettered", func() (bool, string) {
		select {
		case code := <-done:
			t.Fatalf("eosink run exited %d: %s", code, lastLines(logs.String(), 5))
		default:
		}
		rows, dead := count("SELECT count(*) FROM "+s+".payments"), count("SELECT count(*) FROM "+s+".dead_letters")
		return rows+dead == len(values), fmt.Sprintf("%d rows, %d dead letters", rows, dead)
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("eosink run exited %d: %s", code, lastLines(logs.String(), 5))
	}

	check := func(id int, cond string) {
		t.Helper()
		var ok bool
		if err := db.QueryRow(ctx, "SELECT "+cond+" FROM "+s+".payments WHERE id = $1", id).Scan(&ok); err != nil || !ok {
			var row string
			_ = db.QueryRow(ctx, "SELECT p::text FROM "+s+".payments p WHERE id = $1", id).Scan(&row)
			t.Errorf("id %d: %s is not true (%v): row %s", id, cond, err, row)
		}
	}
	check(1, `at = '2023-11-14T22:13:20.5Z'::timestamptz AND booked = '2023-11-14T22:13:20.123Z'::timestamptz AND currency = 'USD'`)
	check(3, `at = '2023-11-14T22:13:20.000001Z'::timestamptz AND booked IS NULL AND currency = 'EUR'`)
	if n := count("SELECT count(*) FROM " + s + ".payments WHERE id IN (2, 4)"); n != 0 {
		t.Errorf("%d rows of the poison records written", n)
	}

	dead := strs(t, db, `SELECT "offset"::text || ' ' || error FROM `+s+`.dead_letters ORDER BY "offset"`)
	want := []string{
		`1 eosink: poison record ` + topic + `[0]@1: sql: parameter @at (value.at): cast rfc3339: "yesterday" is not an RFC 3339 timestamp`,
		`3 eosink: poison record ` + topic + `[0]@3: sql: parameter @booked (value.booked_ms): cast epoch_ms: "soon" is not a number`,
	}
	if len(dead) != len(want) {
		t.Fatalf("dead letters:\n%s\nwant:\n%s", strings.Join(dead, "\n"), strings.Join(want, "\n"))
	}
	for i, w := range want {
		if dead[i] != w {
			t.Errorf("dead letter %q, want %q", dead[i], w)
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "record dead-lettered") && strings.Contains(line, "offset=1") {
			if !strings.Contains(line, `parameter @at (value.at)`) || !strings.Contains(line, "yesterday") {
				t.Errorf("log line %q does not name the parameter and the value", line)
			}
			return
		}
	}
	t.Errorf("no dead-letter log line for offset 1:\n%s", logs.String())
}
