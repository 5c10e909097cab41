package testbed

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/offsets"
)

// ResetWithRowLocked applies an operator's reset (admin.Reset, one attempt) of a partition
// to target, and takes the offset row's lock in a transaction of its own before a running
// sink can claim the partition again: a first transaction holds the row, the reset queues
// behind it, the returned transaction queues behind the reset, then the first one ends.
// PostgreSQL grants a row to its waiters in order, so a sink's re-claim, which starts only
// once the reset has committed, waits behind the returned transaction. The caller ends it.
func ResetWithRowLocked(t testing.TB, e Env, offsetsSchema, pipeline, topic string, partition int32, target admin.Target) (pgx.Tx, admin.Change) {
	t.Helper()
	return resetWithRowLocked(t, e, offsetsSchema, pipeline, topic, partition, target, 1)
}

func resetWithRowLocked(t testing.TB, e Env, offsetsSchema, pipeline, topic string, partition int32, target admin.Target, tries int) (pgx.Tx, admin.Change) {
	t.Helper()
	ctx := context.Background()
	ops := offsets.NewOperator(nil, offsetsSchema) // Lock runs in the transactions below only
	lockRow := func(tx pgx.Tx) error {
		_, _, found, err := ops.Lock(ctx, tx, pipeline, topic, partition)
		if err == nil && !found {
			err = pgx.ErrNoRows
		}
		return err
	}
	watch := conn(t, e)
	first := conn(t, e)
	tx0, err := first.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lockRow(tx0); err != nil {
		t.Fatalf("lock the offset row: %v", err)
	}
	type result struct {
		changes []admin.Change
		err     error
	}
	reset := make(chan result, 1)
	go func() {
		c := admin.New(Pool(t, e), offsetsSchema, kafka.ConfigMap{"bootstrap.servers": e.Brokers})
		ch, err := c.Reset(ctx, admin.Selector{Pipeline: pipeline, Topic: topic, Partition: &partition},
			target, "test-operator", "reset while the row is locked", 1)
		reset <- result{ch, err}
	}()
	WaitBlockedBy(t, watch, first.PgConn().PID(), "")

	second := conn(t, e)
	tx1, err := second.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	locked := make(chan error, 1)
	go func() { locked <- lockRow(tx1) }()
	Eventually(t, 10*time.Second, "the second lock to queue behind the reset", func() (bool, string) {
		var waiting bool
		err := watch.QueryRow(ctx, `SELECT cardinality(pg_blocking_pids($1::int)) > 0`, int64(second.PgConn().PID())).Scan(&waiting)
		return err == nil && waiting, fmt.Sprint(err)
	})
	if err := tx0.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-reset
	var pe *pgconn.PgError
	if errors.As(r.err, &pe) && pe.Code == "55P03" && tries < 3 {
		// The reset's own lock_timeout (10 s) ran out while this set-up queued the second
		// lock: a loaded machine. Nothing moved; set it up again.
		<-locked
		_ = tx1.Rollback(ctx)
		t.Logf("reset while the row is locked: the reset's lock timed out during the set-up (%v); again", r.err)
		return resetWithRowLocked(t, e, offsetsSchema, pipeline, topic, partition, target, tries+1)
	}
	if r.err != nil || len(r.changes) != 1 {
		t.Fatalf("reset: %v %v", r.changes, r.err)
	}
	if err := <-locked; err != nil {
		t.Fatalf("lock the offset row behind the reset: %v", err)
	}
	return tx1, r.changes[0]
}

// WaitBlockedBy waits until a session (with application_name app, unless app is empty) waits
// for a lock held by backend pid.
func WaitBlockedBy(t testing.TB, c *pgx.Conn, pid uint32, app string) {
	t.Helper()
	Eventually(t, 20*time.Second, fmt.Sprintf("a session %q to wait for backend %d", app, pid), func() (bool, string) {
		var n int
		err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE ($2 = '' OR application_name = $2) AND $1::int = ANY (pg_blocking_pids(pid))`, int64(pid), app).Scan(&n)
		if err != nil || n > 0 {
			return err == nil, fmt.Sprint(err)
		}
		// Say what the sessions of app are doing instead.
		var doing string
		_ = c.QueryRow(context.Background(), `SELECT coalesce(string_agg(format('%s %s %s %s', pid, state, wait_event, left(query, 80)), '; '), 'none')
			FROM pg_stat_activity WHERE $1 = '' OR application_name = $1`, app).Scan(&doing)
		return false, doing
	})
}

func conn(t testing.TB, e Env) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), e.DatabaseURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}
