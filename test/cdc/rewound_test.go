package cdc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

// waitReplayed waits until standby has replayed everything primary wrote so far.
func waitReplayed(t *testing.T, primary *pgx.Conn, standby *pgCluster) {
	t.Helper()
	var target string
	if err := primary.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&target); err != nil {
		t.Fatal(err)
	}
	s := connect(t, standby.url("postgres"))
	testbed.Eventually(t, 30*time.Second, "the standby replayed "+target, func() (bool, string) {
		var ok bool
		var at string
		err := s.QueryRow(context.Background(), `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn, pg_last_wal_replay_lsn()::text`, target).Scan(&ok, &at)
		return err == nil && ok, fmt.Sprint(at, err)
	})
	s.Close(context.Background())
}

func lagText(t *testing.T, e testbed.Env, schema, pipeline string) string {
	t.Helper()
	out := cli(t, "lag", "-database-url", e.DatabaseURL, "-brokers", e.Brokers, "-schema", schema, "-pipeline", pipeline)
	return strings.Join(strings.Fields(out), " ")
}
