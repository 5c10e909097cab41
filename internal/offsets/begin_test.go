package offsets_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestBeginFences: Begin (BEGIN, the lease check and the offset updates in one round trip)
// fences as BeginTx then CheckLease then Advance do: a zombie's stale epoch, a replayed start
// and a lost lease all fail, and leave nothing changed; the owner's batch commits; and the
// pool's connections are all given back whatever the outcome.
func TestBeginFences(t *testing.T) {
	t.Parallel()
	e, schema := migrated(t)
	ctx := context.Background()
	pool := testbed.Pool(t, e)
	a := offsets.NewStore(pool, schema, "pipe", "owner-a", time.Second)
	b := offsets.NewStore(pool, schema, "pipe", "owner-b", time.Second)
	start := func() (int64, error) { return 0, nil }
	opts := pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

	commit := func(s *offsets.Store, lease *offsets.LeaseCheck, rs ...offsets.Range) error {
		tx, err := s.Begin(ctx, pool, opts, lease, rs...)
		if err != nil {
			if tx != nil {
				t.Fatal("Begin returned a transaction with its error")
			}
			return err
		}
		if st := tx.Conn().PgConn().TxStatus(); st != 'T' {
			t.Fatalf("after Begin the session is %q, not in a transaction", st)
		}
		return tx.Commit(ctx)
	}
	ca, err := a.Claim(ctx, "orders", 3, "", start)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Claim(ctx, "orders", 4, "", start); err != nil {
		t.Fatal(err)
	}
	if err := commit(a, nil, offsets.Range{Topic: "orders", Partition: 3, Epoch: ca.Epoch, Start: 0, End: 10}); err != nil {
		t.Fatalf("owner's batch: %v", err)
	}
	cb, err := b.Claim(ctx, "orders", 3, "", start)
	if err != nil || cb.NextOffset != 10 {
		t.Fatalf("claim b: %+v %v", cb, err)
	}
	var fe *offsets.FencedError
	err = commit(a, nil, offsets.Range{Topic: "orders", Partition: 3, Epoch: ca.Epoch, Start: 10, End: 20})
	if !errors.Is(err, sink.ErrFenced) || !errors.As(err, &fe) || fe.Epoch != ca.Epoch || fe.Start != 10 {
		t.Fatalf("zombie: want *FencedError for epoch %d at 10, got %v", ca.Epoch, err)
	}
	if err := commit(b, nil, offsets.Range{Topic: "orders", Partition: 3, Epoch: cb.Epoch, Start: 0, End: 10}); !errors.Is(err, sink.ErrFenced) {
		t.Fatalf("replayed range: want ErrFenced, got %v", err)
	}
	// Two rows, the first of which (in partition order) is stale: neither moves.
	err = commit(a, nil, offsets.Range{Topic: "orders", Partition: 4, Epoch: 1, Start: 0, End: 7},
		offsets.Range{Topic: "orders", Partition: 3, Epoch: ca.Epoch, Start: 10, End: 20})
	if !errors.As(err, &fe) || fe.Partition != 3 {
		t.Fatalf("stale row among two: want *FencedError for partition 3, got %v", err)
	}
	if pos, _, _ := a.Read(ctx, "orders", 4); pos.NextOffset != 0 {
		t.Fatalf("partition 4 moved to %d with a fenced partition 3 in the same transaction", pos.NextOffset)
	}
	if err := commit(b, nil, offsets.Range{Topic: "orders", Partition: 3, Epoch: cb.Epoch, Start: 10, End: 20}); err != nil {
		t.Fatalf("new owner's batch: %v", err)
	}

	// The lease: checked in the same round trip, first.
	la, ok, err := a.TakeLease(ctx, "set", time.Minute)
	if err != nil || !ok {
		t.Fatalf("take: %+v %v %v", la, ok, err)
	}
	if err := commit(a, &offsets.LeaseCheck{Name: "set", Epoch: la.Epoch}, offsets.Range{Topic: "orders", Partition: 4, Epoch: 1, Start: 0, End: 7}); err != nil {
		t.Fatalf("holder's batch: %v", err)
	}
	err = commit(a, &offsets.LeaseCheck{Name: "set", Epoch: la.Epoch + 1}, offsets.Range{Topic: "orders", Partition: 4, Epoch: 1, Start: 7, End: 9})
	if !errors.Is(err, offsets.ErrLeaseLost) {
		t.Fatalf("a lease not held: want ErrLeaseLost, got %v", err)
	}
	if pos, _, _ := a.Read(ctx, "orders", 4); pos.NextOffset != 7 {
		t.Fatalf("partition 4 at %d, want 7: a batch without the lease moved it", pos.NextOffset)
	}
	if _, err := a.Begin(ctx, pool, opts, nil, offsets.Range{Topic: "orders", Partition: 4, Epoch: 1, Start: 9, End: 8}); err == nil {
		t.Fatal("a range that ends before it starts began")
	}
	if st := pool.Stat(); st.AcquiredConns() != 0 {
		t.Fatalf("%d pooled connections still acquired", st.AcquiredConns())
	}
	if pos, _, _ := b.Read(ctx, "orders", 3); pos.NextOffset != 20 || pos.Epoch != cb.Epoch {
		t.Fatalf("partition 3 stored %+v, want next 20 epoch %d", pos, cb.Epoch)
	}
}
