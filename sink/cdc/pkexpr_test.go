package cdc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/cdc"
)

// settingSets are sessions under which a key must read the same.
var settingSets = []string{
	"RESET ALL",
	"SET TimeZone = 'Asia/Kathmandu'; SET extra_float_digits = 0; SET IntervalStyle = 'sql_standard'; SET bytea_output = 'escape'; SET DateStyle = 'SQL, DMY'; SET lc_monetary = 'POSIX'",
	"SET TimeZone = 'America/St_Johns'; SET extra_float_digits = -15; SET IntervalStyle = 'iso_8601'; SET DateStyle = 'German'",
	"SET TimeZone = 'Pacific/Chatham'; SET extra_float_digits = 3; SET IntervalStyle = 'postgres_verbose'; SET DateStyle = 'Postgres, YMD'",
}

// keyTypesTable has a primary key of one column of each kind, and of types whose jsonb
// text never depended on settings; rows n = 1..200 hold assorted values, edge cases among
// them (BC, infinity, -0, NaN, 17-digit floats, negative money, mixed-sign intervals).
const keyTypesTable = `CREATE DOMAIN %[1]s.tsd AS timestamptz;
CREATE TYPE %[1]s.pair AS (at timestamptz, f float8);
CREATE TYPE %[1]s.color AS ENUM ('red', 'green');
CREATE TABLE %[1]s.k (n int, at timestamptz, f8 float8, f4 real, b bytea, m money, iv interval, d date, ts timestamp,
  tm time, tz timetz, num numeric, u uuid, ip inet, tx text, bo boolean, en %[1]s.color, ia int[], ta timestamptz[],
  fa float8[], pr %[1]s.pair, rg tstzrange, dm %[1]s.tsd,
  PRIMARY KEY (n, at, f8, f4, b, m, iv, d, ts, tm, tz, num, u, ip, tx, bo, en, ia, ta, fa, pr, rg, dm));
SET TimeZone = 'UTC';
INSERT INTO %[1]s.k SELECT n, at, f, CASE WHEN f IN ('NaN', 'Infinity', 0) OR abs(f) BETWEEN 1e-30 AND 1e30 THEN f::real ELSE 1.5 END, decode(md5(n::text), 'hex'), (n * 1234567 - 99999999)::numeric::money,
  make_interval(months => n %% 25 - 12, days => n %% 61 - 30, secs => (n * 7919.123456) - 700000),
  at::date, at::timestamp, fin::time, fin::timetz, (n * 1.5)::numeric, md5(n::text)::uuid, ('10.0.' || n %% 256 || '.1/24')::inet,
  'k' || n, n %% 2 = 0, (ARRAY['red', 'green'])[n %% 2 + 1]::%[1]s.color, ARRAY[n, -n], ARRAY[at, at + interval '1 s'],
  ARRAY[f, -f], ROW(at, f)::%[1]s.pair, tstzrange(at, at + interval '1 day'), at
FROM (SELECT n, CASE n WHEN 1 THEN '-infinity'::timestamptz WHEN 2 THEN 'infinity' WHEN 3 THEN '0044-03-15 12:00:00+00'::timestamptz - interval '1 year'
    ELSE timestamptz '1969-07-20 20:17:40.5+00' + n * interval '37 days 3 hours 17.123457 seconds' END AS at,
  CASE n WHEN 1 THEN '-0'::float8 WHEN 2 THEN 'NaN' WHEN 3 THEN 'Infinity' WHEN 4 THEN 0.1::float8 + 0.2::float8 WHEN 5 THEN 1e300 WHEN 6 THEN 5e-324
    ELSE (n * 0.1234567890123457)::float8 * power(10, n %% 40 - 20) END AS f
  FROM generate_series(1, 200) n) s, LATERAL (SELECT CASE WHEN isfinite(at) THEN at ELSE '2000-01-01 00:00:00+00' END AS fin) f;`

func keysSchema(t *testing.T, e testbed.Env, conn *pgx.Conn) (schema string, p *cdc.CDC) {
	t.Helper()
	ctx := context.Background()
	schema = testbed.Schema(t, e)
	p, err := cdc.New(cdc.Config{PositionsSchema: schema, Table: "replica.${source.table}"}) // the plugin only migrates here
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.MigratePlugin(ctx, e.DatabaseURL, p, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(keyTypesTable, pgx.Identifier{schema}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	return schema, p
}

func settings(t *testing.T, conn *pgx.Conn, s string) {
	t.Helper()
	for _, set := range strings.Split(s, ";") {
		if _, err := conn.Exec(context.Background(), set); err != nil {
			t.Fatalf("%s: %v", set, err)
		}
	}
}

// TestPKExprSettings: the positions key of every row reads the same under four sessions
// with other TimeZone, extra_float_digits, IntervalStyle, bytea_output, DateStyle and
// lc_monetary; under the defaults it is jsonb_build_array of the columns (the key before
// cdc migration 2) but for money and interval; and values that PostgreSQL's equality takes
// as equal ('1 mon', '30 days', '720:00:00'; -0 and 0) get one key.
func TestPKExprSettings(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schema, _ := keysSchema(t, e, conn)
	table := pgx.Identifier{schema, "k"}
	pk, kinds, err := cdc.PKExpr(ctx, conn, table, schema, "k.")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kinds: %q", kinds)
	if want := `["" "timestamptz" "float" "float" "bytea" "money" "interval" "" "" "" "" "" "" "" "" "" "" "" "value" "value" "value" "value" "timestamptz"]`; fmt.Sprintf("%q", kinds) != want {
		t.Fatalf("kinds %q, want %s", kinds, want)
	}
	query := fmt.Sprintf("SELECT array_agg((%s)::text ORDER BY n) FROM %s k", pk, table.Sanitize())
	var first []string
	for i, s := range settingSets {
		settings(t, conn, s)
		var keys []string
		if err := conn.QueryRow(ctx, query).Scan(&keys); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if len(keys) != 200 {
			t.Fatalf("%d keys", len(keys))
		}
		if i == 0 {
			first = keys
			t.Logf("keys of rows 1, 4, 7: %s\n%s\n%s", keys[0], keys[3], keys[6])
			continue
		}
		diff := 0
		for j := range keys {
			if keys[j] != first[j] {
				if diff++; diff < 3 {
					t.Errorf("under %s, row %d: %s, under the defaults: %s", s, j+1, keys[j], first[j])
				}
			}
		}
		if diff > 0 {
			t.Errorf("under %s: %d of 200 keys differ", s, diff)
		}
	}
	// Under the defaults the old key, but for money (column 6) and interval (7).
	settings(t, conn, "RESET ALL; SET TimeZone = 'UTC'")
	var differ int
	if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s k, LATERAL (SELECT %s AS new,
  jsonb_build_array(n, at, f8, f4, b, 0, 0, d, ts, tm, tz, num, u, ip, tx, bo, en, ia, ta, fa, pr, rg, dm) AS old) y
WHERE (SELECT jsonb_agg(e ORDER BY i) FROM jsonb_array_elements(new) WITH ORDINALITY a(e, i) WHERE i NOT IN (6, 7))
   <> (SELECT jsonb_agg(e ORDER BY i) FROM jsonb_array_elements(old) WITH ORDINALITY a(e, i) WHERE i NOT IN (6, 7))`,
		table.Sanitize(), pk)).Scan(&differ); err != nil {
		t.Fatal(err)
	}
	if differ != 0 {
		t.Errorf("%d of 200 keys differ from jsonb_build_array of the columns under the defaults", differ)
	}

	// Equal values, one key: a one-column key of each kind over a VALUES list.
	for _, c := range []struct{ col, typ, values string }{
		{"iv", "interval", "('1 mon'), ('30 days'), ('720:00:00'), ('P1M'), ('1 mon 1 day -24:00:00')"},
		{"f8", "float8", "('0'), ('-0')"},
		{"f4", "real", "('NaN'), ('NaN')"},
		{"at", "timestamptz", "('2024-06-01 12:00:00+00'), ('2024-06-01 14:00:00+02'), ('2024-06-01 06:30:00-05:30')"},
		{"m", "money", "('12.34'), ('$12.34'), ('12.340')"},
	} {
		tb := pgx.Identifier{schema, "one_" + c.col}
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (%s %s PRIMARY KEY)", tb.Sanitize(), c.col, c.typ)); err != nil {
			t.Fatal(err)
		}
		pk, _, err := cdc.PKExpr(ctx, conn, tb, schema, "v.")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range settingSets[:2] {
			settings(t, conn, s)
			var keys []string
			if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT array_agg(DISTINCT (%s)::text) FROM (VALUES %s) w(x), LATERAL (SELECT x::%s AS %s) v",
				pk, c.values, c.typ, c.col)).Scan(&keys); err != nil {
				t.Fatal(err)
			}
			if len(keys) != 1 {
				t.Errorf("%s %s under %s: %d keys for equal values: %v", c.typ, c.values, s, len(keys), keys)
			}
		}
	}
}

// TestKeysMigration: positions keyed by the old expression (jsonb_build_array of the key
// columns) under four other sessions, rows 1..50 twice (two sessions, two positions), are
// rewritten by cdc migration 2 to the new key of each row, the newest position kept.
// The documented exceptions are not used here: extra_float_digits below 1 (rounded floats),
// and ranges written under a DateStyle other than ISO with a zone whose abbreviation does
// not read back (America/St_Johns in 1988 is NDDT), or under SQL with DMY.
func TestKeysMigration(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schema, p := keysSchema(t, e, conn)
	s := pgx.Identifier{schema}.Sanitize()
	table := pgx.Identifier{schema, "k"}
	pk, _, err := cdc.PKExpr(ctx, conn, table, schema, "k.")
	if err != nil {
		t.Fatal(err)
	}
	// Back to migration 1 (undoing 6's, 5's, 4's and 3's tables and 2's function), then the old keys.
	m := p.Migrations()[0]
	if _, err := conn.Exec(ctx, fmt.Sprintf("DROP TABLE %s.cdc_load_floors; DROP TABLE %s.cdc_positions_int; DROP TABLE %s.cdc_tx_watermarks; DROP TABLE %s.cdc_source_marks; DROP FUNCTION %s.cdc_key_json(anyelement); UPDATE %s.%s SET version = 1", s, s, s, s, s, s, pgx.Identifier{m.Table}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	sets := []string{
		"SET TimeZone = 'Asia/Kathmandu'; SET extra_float_digits = 1; SET IntervalStyle = 'sql_standard'; SET bytea_output = 'escape'; SET DateStyle = 'SQL, MDY'; SET lc_monetary = 'POSIX'",
		"SET TimeZone = 'Europe/Berlin'; SET extra_float_digits = 2; SET IntervalStyle = 'iso_8601'; SET DateStyle = 'German'",
		"SET TimeZone = 'Pacific/Chatham'; SET extra_float_digits = 3; SET IntervalStyle = 'postgres_verbose'; SET DateStyle = 'Postgres, YMD'",
		"SET TimeZone = 'America/St_Johns'",
	}
	old := fmt.Sprintf(`INSERT INTO %s.cdc_positions SELECT $1, jsonb_build_array(n, at, f8, f4, b, m, iv, d, ts, tm, tz, num, u, ip, tx, bo, en, ia, ta, fa, pr, rg, dm),
  $2 + n, 0, n %% 3 = 0 FROM %s WHERE n %% 4 = $3 OR $3 = 4 AND n <= 50`, s, table.Sanitize())
	for i, set := range sets {
		settings(t, conn, "RESET ALL; "+set)
		if _, err := conn.Exec(ctx, old, table.Sanitize(), 1000, i); err != nil {
			t.Fatalf("%s: %v", set, err)
		}
	}
	settings(t, conn, "RESET ALL; SET TimeZone = 'Asia/Tokyo'; SET bytea_output = 'escape'") // rows 1..50 again, newer, not deleted
	if _, err := conn.Exec(ctx, strings.Replace(old, "n % 3 = 0", "false", 1), table.Sanitize(), 2000, 4); err != nil {
		t.Fatal(err)
	}
	settings(t, conn, "RESET ALL")
	if err := sink.MigratePlugin(ctx, e.DatabaseURL, p, nil); err != nil {
		t.Fatal(err)
	}
	var rows, wrong, newest int
	if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), count(*) FILTER (WHERE p.pk IS DISTINCT FROM %s),
  count(*) FILTER (WHERE k.n <= 50 AND p.commit_lsn = 2000 + k.n AND NOT p.deleted)
FROM %s.cdc_positions p FULL JOIN %s k ON p.pk -> 0 = to_jsonb(k.n)`, pk, s, table.Sanitize())).Scan(&rows, &wrong, &newest); err != nil {
		t.Fatal(err)
	}
	t.Logf("after the migration: %d positions for 200 rows, %d not the new key, %d of rows 1..50 at their newest position", rows, wrong, newest)
	if rows != 200 || wrong != 0 || newest != 50 {
		t.Errorf("want 200 positions, 0 not the new key, 50 at the newest")
	}
}
