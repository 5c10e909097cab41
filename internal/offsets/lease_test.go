package offsets_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/internal/testbed"
)

// TestLease: one holder at a time; a standby takes a released or expired lease with a new
// epoch; the old holder's renewals and commit checks then fail with ErrLeaseLost; a
// release under a stale epoch does nothing; leases are per pipeline.
func TestLease(t *testing.T) {
	e, schema := migrated(t)
	ctx := context.Background()
	pool := testbed.Pool(t, e)
	a := offsets.NewStore(pool, schema, "p", "a", time.Second)
	b := offsets.NewStore(pool, schema, "p", "b", time.Second)
	other := offsets.NewStore(pool, schema, "q", "b", time.Second)
	const ttl = 2 * time.Second

	la, ok, err := a.TakeLease(ctx, "set", ttl)
	if err != nil || !ok || la.Epoch != 1 || la.Holder != "a" {
		t.Fatalf("first take: %+v %v %v", la, ok, err)
	}
	lb, ok, err := b.TakeLease(ctx, "set", ttl)
	if err != nil || ok || lb.Holder != "a" || lb.Epoch != 1 {
		t.Fatalf("a standby took a live lease: %+v %v %v", lb, ok, err)
	}
	if lq, ok, err := other.TakeLease(ctx, "set", ttl); err != nil || !ok || lq.Epoch != 1 {
		t.Fatalf("another pipeline's lease of the same name: %+v %v %v", lq, ok, err)
	}
	if err := a.RenewLease(ctx, "set", la.Epoch); err != nil {
		t.Fatal(err)
	}
	if err := b.RenewLease(ctx, "set", la.Epoch); !errors.Is(err, offsets.ErrLeaseLost) {
		t.Fatalf("a non-holder renewed: %v", err)
	}

	// A commit's check renews the lease.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CheckLease(ctx, tx, "set", la.Epoch); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// Expired: the standby takes it with a new epoch; the old holder is fenced.
	time.Sleep(ttl + 500*time.Millisecond)
	lb, ok, err = b.TakeLease(ctx, "set", ttl)
	if err != nil || !ok || lb.Epoch != 2 || lb.Holder != "b" {
		t.Fatalf("take of an expired lease: %+v %v %v", lb, ok, err)
	}
	if err := a.RenewLease(ctx, "set", la.Epoch); !errors.Is(err, offsets.ErrLeaseLost) {
		t.Fatalf("the old holder renewed after a takeover: %v", err)
	}
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CheckLease(ctx, tx, "set", la.Epoch); !errors.Is(err, offsets.ErrLeaseLost) {
		t.Fatalf("the old holder's commit check passed after a takeover: %v", err)
	}
	_ = tx.Rollback(ctx)

	// Released: taken at once, epoch 3. A release under a stale epoch does nothing.
	if err := a.ReleaseLease(ctx, "set", la.Epoch); err != nil {
		t.Fatal(err)
	}
	if l, err := a.ReadLease(ctx, "set"); err != nil || l.Holder != "b" {
		t.Fatalf("a stale release moved the lease: %+v %v", l, err)
	}
	if err := b.ReleaseLease(ctx, "set", lb.Epoch); err != nil {
		t.Fatal(err)
	}
	la, ok, err = a.TakeLease(ctx, "set", time.Hour)
	if err != nil || !ok || la.Epoch != 3 {
		t.Fatalf("take of a released lease: %+v %v %v", la, ok, err)
	}
	// The same instance takes its own lease again at once (a restart), with a new epoch.
	la2, ok, err := a.TakeLease(ctx, "set", time.Hour)
	if err != nil || !ok || la2.Epoch != 4 {
		t.Fatalf("retake by the holder: %+v %v %v", la2, ok, err)
	}
	if err := a.RenewLease(ctx, "set", la.Epoch); !errors.Is(err, offsets.ErrLeaseLost) {
		t.Fatalf("the holder's previous ownership renewed: %v", err)
	}
}
