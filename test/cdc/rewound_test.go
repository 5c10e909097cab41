package cdc

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/testbed"
)

// resync is the SQL of docs/cdc.md's resync: in one transaction, empty the replica tables
// and forget their positions and the partitions' source marks.
func resync(t *testing.T, db *pgxpool.Pool, schema, pipeline, table string, topics []string) {
	t.Helper()
	s := pgx.Identifier{schema}.Sanitize()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{
		"TRUNCATE " + table,
		"DELETE FROM " + s + ".cdc_positions WHERE target = '" + table + "'",
		"DELETE FROM " + s + ".cdc_positions_int WHERE target = '" + table + "'",
		"DELETE FROM " + s + ".cdc_load_floors WHERE target = '" + table + "'",
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	if _, err := tx.Exec(ctx, "DELETE FROM "+s+".cdc_source_marks WHERE pipeline = $1 AND topic = ANY($2)", pipeline, topics); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func execAll(t *testing.T, c interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, sqls ...string) {
	t.Helper()
	for _, q := range sqls {
		if _, err := c.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func lagText(t *testing.T, e testbed.Env, schema, pipeline string) string {
	t.Helper()
	out := cli(t, "lag", "-database-url", e.DatabaseURL, "-brokers", e.Brokers, "-schema", schema, "-pipeline", pipeline)
	return strings.Join(strings.Fields(out), " ")
}
