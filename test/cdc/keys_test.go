package cdc

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/cdc"
)

// keysTable has a primary key of every column type whose jsonb text depends on a session
// setting (and a date, whose does not), in a replica schema.
const keysTable = `CREATE TABLE %s (at timestamptz, f float8, b bytea, m money, iv interval, d date, id int,
  v text, PRIMARY KEY (at, f, b, m, iv, d, id))`

// keyEvent is a change event (JSON without schemas) of table keys, row id, at source
// position lsn; op d deletes it. iv is the interval as Debezium's interval.handling.mode=string
// writes it (ISO 8601): "P1M" and "P30D" are equal intervals, so the same row.
func keyEvent(id int, iv string, lsn int64, op string, v string) testbed.Msg {
	key := fmt.Sprintf(`{"at":"2024-06-01T12:00:00.123456Z","f":0.30000000000000004,"b":%q,"m":"-1234.56","iv":%q,"d":"2024-02-03","id":%d}`,
		base64.StdEncoding.EncodeToString([]byte{0, 0xff, 'A', byte(id)}), iv, id)
	row := key[:len(key)-1] + fmt.Sprintf(`,"v":%q}`, v)
	before, after := "null", row
	if op == "d" {
		before, after = row, "null"
	}
	value := fmt.Sprintf(`{"before":%s,"after":%s,"source":{"db":"src","schema":"public","table":"keys","lsn":%d},"op":%q}`, before, after, lsn, op)
	return testbed.Msg{Key: []byte(key), Value: []byte(value)}
}

// TestCDCKeysIndependentOfSettings: three instances of the plugin, each with its own
// connection to one database, under other settings (ALTER DATABASE ... SET for the first,
// PGTZ for the second, the defaults for the third), write the same rows of one target. Each
// row has one positions key, and old events republished through another instance neither
// resurrect a deleted row nor revert an updated one. Before position keys were normalised,
// each instance keyed the row differently, and the republished events were applied.
func TestCDCKeysIndependentOfSettings(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	dbURL, dbName := testbed.SourceDatabase(t, e, "keys")
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	exec := func(sql string) {
		t.Helper()
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE SCHEMA replica")
	exec(fmt.Sprintf(keysTable, "replica.keys"))
	c := cdc.Config{Table: "replica.${source.table}", PositionsSchema: "positions", TopicCheck: cdc.TopicCheckOff} // records() uses one topic for every table
	instance := func() *cdc.CDC {
		p, err := cdc.New(c)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pa, pb, pc := instance(), instance(), instance()
	if err := sink.MigratePlugin(ctx, dbURL, pa, nil); err != nil {
		t.Fatal(err)
	}
	db := pgx.Identifier{dbName}.Sanitize()
	// lc_monetary: this machine may have C locales only; money's key does not read it.
	exec("ALTER DATABASE " + db + " SET timezone = 'Asia/Kathmandu'")
	exec("ALTER DATABASE " + db + " SET extra_float_digits = 0")
	exec("ALTER DATABASE " + db + " SET intervalstyle = 'sql_standard'")
	exec("ALTER DATABASE " + db + " SET bytea_output = 'escape'")
	exec("ALTER DATABASE " + db + " SET datestyle = 'SQL, DMY'")
	exec("ALTER DATABASE " + db + " SET lc_monetary = 'POSIX'")
	ca, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	exec("ALTER DATABASE " + db + " RESET ALL")
	t.Setenv("PGTZ", "America/St_Johns")
	cb, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	t.Setenv("PGTZ", "UTC")
	cc, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close(ctx)
	for _, conn := range []*pgx.Conn{ca, cb, cc} {
		var s string
		_ = conn.QueryRow(ctx, "SELECT concat_ws(' ', current_setting('TimeZone'), current_setting('extra_float_digits'), current_setting('IntervalStyle'), current_setting('bytea_output'), current_setting('DateStyle'))").Scan(&s)
		t.Logf("session: %s", s)
	}
	write := func(p *cdc.CDC, conn *pgx.Conn, msgs ...testbed.Msg) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		b := records(0, msgs...)
		b.Topic = "dbz.public.keys"
		if err := p.Write(ctx, tx, b); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Row 1 is inserted by a, deleted by b; row 2 inserted by a, updated by b (as "P30D",
	// the same interval as "P1M"); row 3 inserted by c, updated by a.
	write(pa, ca, keyEvent(1, "P1M", 100, "c", "v1"), keyEvent(2, "P1M", 110, "c", "v1"))
	write(pc, cc, keyEvent(3, "P1M", 120, "c", "v1"))
	write(pb, cb, keyEvent(1, "P1M", 300, "d", ""), keyEvent(2, "P30D", 310, "u", "v2"))
	write(pa, ca, keyEvent(3, "P1M", 320, "u", "v2"))
	// The old events again, each through another instance than its first.
	write(pc, cc, keyEvent(1, "P1M", 100, "c", "v1"), keyEvent(2, "P1M", 110, "c", "v1"))
	write(pb, cb, keyEvent(1, "P1M", 100, "c", "v1"), keyEvent(3, "P1M", 120, "c", "v1"))
	write(pa, ca, keyEvent(2, "P30D", 110, "c", "v1"))

	rows, err := cc.Query(ctx, "SELECT id::text || '=' || v FROM replica.keys ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var keys int
	if err := cc.QueryRow(ctx, `SELECT count(*) FROM positions.cdc_positions WHERE target = '"replica"."keys"'`).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica: %v; positions keys: %d", got, keys)
	if fmt.Sprint(got) != "[2=v2 3=v2]" {
		t.Errorf("replica rows %v, want [2=v2 3=v2]: an old event republished through another instance resurrected or reverted a row", got)
	}
	if keys != 3 {
		t.Errorf("%d positions keys for 3 rows: the instances keyed one row differently", keys)
	}
}
