package offsets_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/internal/testbed"
)

// TestStopsHeartbeatsAndMoves: the statements beside the fence, as the operator's listing
// reads them back. A stop is recorded by the row's owner only and cleared under the epoch it
// runs again under; a heartbeat makes the owner alive, a stopped one does not; an operator's
// move bumps the epoch, names the fenced owner and clears the stop.
func TestStopsHeartbeatsAndMoves(t *testing.T) {
	t.Parallel()
	e, schema := migrated(t)
	ctx := context.Background()
	pool := testbed.Pool(t, e)
	owner := offsets.NewStore(pool, schema, "pipe", "owner", time.Second)
	other := offsets.NewStore(pool, schema, "pipe", "other", time.Second)
	ops := offsets.NewOperator(pool, schema)
	row := func() offsets.Row {
		t.Helper()
		rows, err := ops.List(ctx, "pipe")
		if err != nil || len(rows) != 1 {
			t.Fatalf("list: %+v %v", rows, err)
		}
		return rows[0]
	}
	cl, err := owner.Claim(ctx, "orders", 0, "", func() (int64, error) { return 4, nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := other.MarkStopped(ctx, "orders", 0, "fenced", "not the owner"); err != nil {
		t.Fatal(err)
	}
	if r := row(); r.Stopped != nil || r.OwnerAlive || r.NextOffset != 4 || r.Owner != "owner" {
		t.Fatalf("after a stop by another instance: %+v", r)
	}
	if err := owner.MarkStopped(ctx, "orders", 0, "handler", "boom"); err != nil {
		t.Fatal(err)
	}
	if r := row(); r.Stopped == nil || r.Stopped.Reason != "handler" || r.Stopped.Error != "boom" || r.Stopped.By != "owner" || r.Stopped.At.IsZero() {
		t.Fatalf("after the owner's stop: %+v %+v", r, r.Stopped)
	}
	if err := owner.ClearStopped(ctx, "orders", 0, cl.Epoch+1); err != nil {
		t.Fatal(err)
	}
	if row().Stopped == nil {
		t.Fatal("a clear under another epoch cleared the stop")
	}
	if err := owner.ClearStopped(ctx, "orders", 0, cl.Epoch); err != nil {
		t.Fatal(err)
	}
	if r := row(); r.Stopped != nil {
		t.Fatalf("stop not cleared: %+v", r.Stopped)
	}
	if err := owner.Heartbeat(ctx, false); err != nil {
		t.Fatal(err)
	}
	if !row().OwnerAlive {
		t.Fatal("owner not alive after its heartbeat")
	}
	if err := owner.Heartbeat(ctx, true); err != nil {
		t.Fatal(err)
	}
	if row().OwnerAlive {
		t.Fatal("owner alive after it stopped")
	}

	if err := owner.MarkStopped(ctx, "orders", 0, "handler", "boom"); err != nil {
		t.Fatal(err)
	}
	m := offsets.Move{Pipeline: "pipe", Topic: "orders", Partition: 0, To: 9}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := ops.DeclareAudit(ctx, tx, "alice", "test"); err != nil {
			return err
		}
		next, was, found, err := ops.Lock(ctx, tx, "pipe", "orders", 0)
		if err != nil || !found || next != 4 || was != "owner" {
			t.Fatalf("lock: %d %q %v %v", next, was, found, err)
		}
		if created, err := ops.Create(ctx, tx, m, "alice"); err != nil || created {
			t.Fatalf("create over an existing row: %v %v", created, err)
		}
		if err := ops.Set(ctx, tx, m, "alice", was); err != nil {
			return err
		}
		return offsets.Notify(ctx, tx, "pipe")
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(); r.NextOffset != 9 || r.Epoch != cl.Epoch+1 || r.Owner != offsets.ResetOwner("alice", "owner") || r.Stopped != nil {
		t.Fatalf("after the move: %+v", r)
	}
	if rows, err := ops.NextOffsets(ctx, "pipe", "orders", -1); err != nil || len(rows) != 1 || rows[0].NextOffset != 9 {
		t.Fatalf("next offsets: %+v %v", rows, err)
	}
}
