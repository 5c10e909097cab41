package cdc

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/migrator"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/cdc"
)

// migrateFirst applies the cdc plugin's migration 1 only: cdc_positions as eosink made it
// before position keys were normalised.
func migrateFirst(t *testing.T, dbURL string, p *cdc.CDC) {
	t.Helper()
	set := p.Migrations()[0]
	first := fstest.MapFS{}
	for _, name := range []string{"0001_cdc_positions.up.sql", "0001_cdc_positions.down.sql"} {
		b, err := fs.ReadFile(set.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		first[name] = &fstest.MapFile{Data: b}
	}
	m, err := migrator.Open(context.Background(), dbURL, migrator.Set{FS: first, Schema: set.Schema, Table: set.Table})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
}

// TestCDCKeysUpgrade: a replica and its cdc_positions as the old code left them, keyed by
// jsonb_build_array(<key columns>) under settings other than the defaults (and one row
// keyed twice, under two settings), then cdc migration 2 through the plugin's Migrations()
// and the project's migrator, then the old events replayed: no row reverts or comes back,
// and each row keeps one positions key. Positions of a dropped target and a truncate
// watermark are left as they are. Without the migration's rewrite the replay reverts rows.
func TestCDCKeysUpgrade(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	replica, positions := testbed.Schema(t, e), testbed.Schema(t, e)
	conn, err := pgx.Connect(ctx, e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	rs, ps := pgx.Identifier{replica}.Sanitize(), pgx.Identifier{positions}.Sanitize()
	table := pgx.Identifier{replica, "keys"}.Sanitize()
	exec("CREATE SCHEMA " + rs)
	exec(fmt.Sprintf(keysTable, table))
	p, err := cdc.New(cdc.Config{Table: replica + ".${source.table}", PositionsSchema: positions, TopicCheck: cdc.TopicCheckOff}) // records() uses one topic for every table
	if err != nil {
		t.Fatal(err)
	}
	migrateFirst(t, e.DatabaseURL, p)

	// The old code's state, after: 1 inserted at 100, deleted at 300; 2 inserted at 110,
	// updated at 310; 3 inserted at 120 (keyed under the defaults), updated at 320 (keyed
	// under other settings); 4 inserted at 130 as '1 mon', updated at 330 as '30 days'.
	row := func(id int, iv, v string) string {
		return fmt.Sprintf(`SELECT timestamptz '2024-06-01 12:00:00.123456+00', 0.30000000000000004::float8,
  '\x00ff41'::bytea || decode(lpad(to_hex(%[1]d), 2, '0'), 'hex'), '-1234.56'::money, interval '%[2]s', date '2024-02-03', %[1]d, '%[3]s'`, id, iv, v)
	}
	old := func(id int, iv string, lsn int64, deleted bool) {
		t.Helper()
		exec(fmt.Sprintf(`INSERT INTO %s.cdc_positions SELECT $1, jsonb_build_array(at, f, b, m, iv, d, id), $2, $2, $3 FROM (%s) r(at, f, b, m, iv, d, id, v)`,
			ps, row(id, iv, "")), `"`+replica+`"."keys"`, lsn, deleted)
	}
	settings := func(s string) {
		t.Helper()
		for _, set := range strings.Split(s, ";") {
			exec(set)
		}
	}
	settings("SET TimeZone = 'UTC'; SET extra_float_digits = 1; SET bytea_output = 'hex'; SET IntervalStyle = 'postgres'")
	old(3, "1 mon", 120, false)
	settings("SET TimeZone = 'Asia/Kathmandu'; SET bytea_output = 'escape'; SET IntervalStyle = 'iso_8601'; SET lc_monetary = 'POSIX'")
	old(1, "1 mon", 300, true)
	old(2, "1 mon", 310, false)
	old(4, "30 days", 330, false)
	settings("SET TimeZone = 'America/St_Johns'; SET extra_float_digits = 3; SET IntervalStyle = 'sql_standard'")
	old(3, "1 mon", 320, false)
	exec(fmt.Sprintf("INSERT INTO %s %s UNION ALL %s UNION ALL %s", table, row(2, "1 mon", "v2"), row(3, "1 mon", "v2"), row(4, "30 days", "v2")))
	exec(fmt.Sprintf(`INSERT INTO %s.cdc_positions VALUES ('"gone"."t"', '["2024-06-01T17:45:00+05:45"]', 5, 5, false),
  ('"gone"."t"', 'null', 6, 6, true)`, ps))
	settings("RESET ALL")
	var before string
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT string_agg(pk::text || ' ' || lsn, E'\\n' ORDER BY lsn) FROM %s.cdc_positions", ps)).Scan(&before); err != nil {
		t.Fatal(err)
	}
	t.Logf("positions before the migration:\n%s", before)

	if err := sink.MigratePlugin(ctx, e.DatabaseURL, p, nil); err != nil {
		t.Fatal(err)
	}
	var after string
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT string_agg(target || ' ' || pk::text || ' ' || lsn || ' ' || deleted, E'\\n' ORDER BY lsn) FROM %s.cdc_positions", ps)).Scan(&after); err != nil {
		t.Fatal(err)
	}
	t.Logf("positions after the migration:\n%s", after)

	// The old events again, under yet other settings.
	settings("SET TimeZone = 'Pacific/Chatham'; SET extra_float_digits = 2; SET bytea_output = 'escape'; SET IntervalStyle = 'postgres_verbose'")
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := records(0, keyEvent(1, "P1M", 100, "c", "v1"), keyEvent(2, "P1M", 110, "c", "v1"),
		keyEvent(3, "P1M", 120, "c", "v1"), keyEvent(4, "P1M", 130, "c", "v1"), keyEvent(2, "P1M", 310, "u", "v2"))
	b.Topic = "dbz.public.keys"
	if err := p.Write(ctx, tx, b); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, "SELECT id::text || '=' || v FROM "+table+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var keys, gone int
	if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE target = $1), count(*) FILTER (WHERE target = '"gone"."t"') FROM %s.cdc_positions`, ps),
		`"`+replica+`"."keys"`).Scan(&keys, &gone); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica after the replay: %v; positions keys: %d (dropped target: %d)", got, keys, gone)
	if fmt.Sprint(got) != "[2=v2 3=v2 4=v2]" {
		t.Errorf("replica rows %v after the replay, want [2=v2 3=v2 4=v2]: a row reverted or came back", got)
	}
	if keys != 4 || gone != 2 {
		t.Errorf("positions: %d keys for 4 rows, %d of the dropped target's 2 rows", keys, gone)
	}
	if !strings.Contains(after, `"gone"."t" ["2024-06-01T17:45:00+05:45"] 5 false`) {
		t.Errorf("the dropped target's key was changed")
	}
}
