package cdc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink/cdc"
)

// itemChange is a change event of table items (itemFieldsV1) at source position lsn: op c
// or u with name, d, or t (a truncate, with no key).
func itemChange(op string, id, lsn int64, name string) testbed.Msg {
	before, after := "null", "null"
	row := fmt.Sprintf(`{"id":%d,"name":%q,"amount":null,"at":null,"doc":null}`, id, name)
	switch op {
	case "c", "u":
		after = row
	case "d":
		before = fmt.Sprintf(`{"id":%d,"name":null,"amount":null,"at":null,"doc":null}`, id)
	}
	value := fmt.Sprintf(`{"schema":{"type":"struct","name":"dbz.public.items.Envelope","fields":[
{"type":"struct","optional":true,"name":"dbz.public.items.Value","field":"before","fields":[%[1]s]},
{"type":"struct","optional":true,"name":"dbz.public.items.Value","field":"after","fields":[%[1]s]},
{"type":"struct","optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source","fields":[
 {"type":"string","field":"db"},{"type":"string","field":"schema"},{"type":"string","field":"table"},{"type":"int64","optional":true,"field":"lsn"}]},
{"type":"string","optional":false,"field":"op"}]},
"payload":{"before":%[2]s,"after":%[3]s,"source":{"db":"src","schema":"public","table":"items","lsn":%[4]d},"op":"%[5]s"}}`,
		itemFieldsV1, before, after, lsn, op)
	if op == "t" {
		return testbed.Msg{Value: []byte(value)}
	}
	key := fmt.Sprintf(`{"schema":{"type":"struct","name":"dbz.public.items.Key","fields":[{"type":"int64","optional":false,"field":"id"}]},"payload":{"id":%d}}`, id)
	return testbed.Msg{Key: []byte(key), Value: []byte(value)}
}

// itemsReplica makes a replica schema holding an items table (itemFieldsV1's columns) and a
// positions schema, both dropped when the test ends; table is the quoted replica table.
func itemsReplica(t *testing.T, e testbed.Env, db *pgxpool.Pool) (replica, positions, table string) {
	t.Helper()
	replica, positions = testbed.Schema(t, e), testbed.Schema(t, e)
	table = pgx.Identifier{replica, "items"}.Sanitize()
	if _, err := db.Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize()+"; CREATE TABLE "+table+
		" (id bigint PRIMARY KEY, name text, amount numeric(10,2), at timestamp, doc jsonb)"); err != nil {
		t.Fatal(err)
	}
	return replica, positions, table
}

// interleave runs first's Write in transaction A (partition 0) and leaves it open; then
// second's Write in transaction B (partition 1), which must either finish or block on a
// lock of A's; then commits A, waits for B's Write and commits B.
func interleave(t *testing.T, ctx context.Context, db *pgxpool.Pool, p *cdc.CDC, first, second testbed.Msg) (blocked string) {
	t.Helper()
	a, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Rollback(ctx)
	if err := p.Write(ctx, a, records(0, first)); err != nil {
		t.Fatal(err)
	}
	b, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Rollback(ctx)
	pid := b.Conn().PgConn().PID()
	done := make(chan error, 1)
	go func() { done <- p.Write(ctx, b, records(1, second)) }()
	var finished bool
	testbed.Eventually(t, 10*time.Second, "the second partition's Write blocked on the first's locks, or done", func() (bool, string) {
		select {
		case err := <-done:
			done <- err
			finished = true
			return true, "done"
		default:
		}
		var wait string
		_ = db.QueryRow(ctx, "SELECT coalesce(wait_event_type || ':' || wait_event, '') FROM pg_stat_activity WHERE pid = $1", pid).Scan(&wait)
		blocked = wait
		return len(wait) > 5 && wait[:5] == "Lock:", wait
	})
	if finished {
		blocked = "not blocked"
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the second partition's Write: %v", err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return blocked
}

// TestCDCMergeConcurrentPartitions: two partitions feed one target, and the second's batch
// runs while the first's transaction is open; in every interleaving, the replica ends as
// the newer change says:
//   - a newer delete of a key that the other partition's open transaction inserts;
//   - a newer update of such a key, and one whose name is unavailable (the placeholder),
//     which must keep the inserted row's name;
//   - a newer truncate while the other partition's open transaction inserts a key;
//   - an older insert while the other partition's open transaction truncates.
func TestCDCMergeConcurrentPartitions(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	for _, c := range []struct {
		name          string
		first, second testbed.Msg
		want          string // the replica's rows
	}{
		{"delete after an uncommitted insert", itemChange("c", 1, 100, "a"), itemChange("d", 1, 200, ""), ""},
		{"update after an uncommitted insert", itemChange("c", 1, 100, "a"), itemChange("u", 1, 200, "b"), "1 b"},
		{"update keeping an unavailable value after an uncommitted insert", itemChange("c", 1, 100, "a"),
			itemChange("u", 1, 200, cdc.DefaultUnavailablePlaceholder), "1 a"},
		{"truncate after an uncommitted insert", itemChange("c", 1, 100, "a"), itemChange("t", 0, 200, ""), ""},
		{"insert before an uncommitted truncate", itemChange("t", 0, 200, ""), itemChange("c", 1, 100, "a"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			replica, positions, table := itemsReplica(t, e, db)
			p := newPlugin(t, e, replica, positions, cdc.Config{Truncate: true})
			blocked := interleave(t, ctx, db, p, c.first, c.second)
			var got string
			if err := db.QueryRow(ctx, "SELECT coalesce(string_agg(id || ' ' || name, ', ' ORDER BY id), '') FROM "+table).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("the replica holds %q, want %q (the second Write: %s)", got, c.want, blocked)
			}
			t.Logf("replica %q as wanted; the second Write: %s", got, blocked)
		})
	}
}
