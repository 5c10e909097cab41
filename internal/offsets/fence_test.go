package offsets_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestStoreFencesOlderClaim: two owners of one partition. The later claim wins; the earlier
// owner's conditional update matches no row and nothing it wrote commits.
func TestStoreFencesOlderClaim(t *testing.T) {
	t.Parallel()
	e, schema := migrated(t)
	ctx := context.Background()
	pool := testbed.Pool(t, e)
	a := offsets.NewStore(pool, schema, "pipe", "owner-a", time.Second)
	b := offsets.NewStore(pool, schema, "pipe", "owner-b", time.Second)
	start := func() (int64, error) { return 0, nil }

	ca, err := a.Claim(ctx, "orders", 3, "", start)
	if err != nil || ca.Epoch != 1 || ca.NextOffset != 0 || !ca.Created {
		t.Fatalf("claim a: %+v %v", ca, err)
	}
	// A commits one batch while it is the owner.
	advance := func(s *offsets.Store, r offsets.Range) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return s.Advance(ctx, tx, r) })
	}
	if err := advance(a, offsets.Range{Topic: "orders", Partition: 3, Epoch: ca.Epoch, Start: 0, End: 10}); err != nil {
		t.Fatalf("a advance as owner: %v", err)
	}
	cb, err := b.Claim(ctx, "orders", 3, "", start)
	if err != nil || cb.Epoch != 2 || cb.NextOffset != 10 {
		t.Fatalf("claim b: %+v %v", cb, err)
	}
	// A, now a zombie, tries its next batch.
	err = advance(a, offsets.Range{Topic: "orders", Partition: 3, Epoch: ca.Epoch, Start: 10, End: 20})
	var fe *offsets.FencedError
	if !errors.Is(err, sink.ErrFenced) || !errors.As(err, &fe) || fe.Epoch != 1 || fe.Start != 10 {
		t.Fatalf("zombie advance: want *FencedError for epoch 1 at 10, got %v", err)
	}
	// Right epoch, wrong start (a replayed batch) is fenced too.
	if err := advance(b, offsets.Range{Topic: "orders", Partition: 3, Epoch: cb.Epoch, Start: 0, End: 10}); !errors.Is(err, sink.ErrFenced) {
		t.Fatalf("replayed range: want ErrFenced, got %v", err)
	}
	if err := advance(b, offsets.Range{Topic: "orders", Partition: 3, Epoch: cb.Epoch, Start: 10, End: 20}); err != nil {
		t.Fatalf("b advance: %v", err)
	}
	if pos, _, _ := b.Read(ctx, "orders", 3); pos.NextOffset != 20 || pos.Epoch != 2 {
		t.Fatalf("stored %+v, want next 20 epoch 2", pos)
	}

	// A zombie holding the row lock in an open transaction delays a claim by at most
	// lock_timeout, and the claim fails with a transient error, to be retried.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := b.Advance(ctx, tx, offsets.Range{Topic: "orders", Partition: 3, Epoch: 2, Start: 20, End: 30}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = a.Claim(ctx, "orders", 3, "", start)
	if err == nil || pgerr.Classify(err) != pgerr.Transient {
		t.Fatalf("claim against a held lock: want a transient lock timeout, got %v", err)
	}
	if waited := time.Since(began); waited > 5*time.Second {
		t.Fatalf("claim waited %s, want about the 1s lock timeout", waited)
	}
}

// TestStaleClaimAtIsAbandoned: the claim a rebalance callback makes (Store.ClaimAt) is
// conditional on the epochs read when the callback began. A callback that read the rows,
// stalled, and claims after the next owner did takes nothing: ErrClaimTaken, the next
// owner's epoch and commits intact. A missing row read at the start counts as epoch 0.
func TestStaleClaimAtIsAbandoned(t *testing.T) {
	t.Parallel()
	e, schema := migrated(t)
	ctx := context.Background()
	pool := testbed.Pool(t, e)
	stale := offsets.NewStore(pool, schema, "pipe", "stale", time.Second)
	heir := offsets.NewStore(pool, schema, "pipe", "heir", time.Second)
	start := func() (int64, error) { return 0, nil }

	// Both read the missing row (no epoch); the heir creates and claims it first.
	read, err := stale.Epochs(ctx, []string{"orders", "orders"}, []int32{1, 2})
	if err != nil || len(read) != 0 {
		t.Fatalf("epochs of missing rows: %v %v", read, err)
	}
	if c, err := heir.ClaimAt(ctx, "orders", 1, "", 0, false, start); err != nil || c.Epoch != 1 || !c.Created {
		t.Fatalf("heir's first claim: %+v %v", c, err)
	}
	if _, err := stale.ClaimAt(ctx, "orders", 1, "", 0, false, start); !errors.Is(err, offsets.ErrClaimTaken) {
		t.Fatalf("stale claim of a row created meanwhile: want ErrClaimTaken, got %v", err)
	}
	if c, err := stale.ClaimAt(ctx, "orders", 2, "", 0, false, start); err != nil || c.Epoch != 1 {
		t.Fatalf("claim of a row nobody took: %+v %v", c, err)
	}

	// The stale callback reads epoch 1 of partition 1, stalls; the heir claims it again and commits.
	read, err = stale.Epochs(ctx, []string{"orders"}, []int32{1})
	if err != nil || read["orders"][1] != 1 {
		t.Fatalf("epochs: %v %v", read, err)
	}
	hc, err := heir.ClaimAt(ctx, "orders", 1, "", 1, true, start)
	if err != nil || hc.Epoch != 2 {
		t.Fatalf("heir's claim: %+v %v", hc, err)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return heir.Advance(ctx, tx, offsets.Range{Topic: "orders", Partition: 1, Epoch: hc.Epoch, Start: 0, End: 5})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.ClaimAt(ctx, "orders", 1, "", read["orders"][1], true, start); !errors.Is(err, offsets.ErrClaimTaken) {
		t.Fatalf("stale claim: want ErrClaimTaken, got %v", err)
	}
	pos, _, err := heir.Peek(ctx, "orders", 1)
	if err != nil || pos.Epoch != 2 || pos.Owner != "heir" || pos.NextOffset != 5 {
		t.Fatalf("after the stale claim the row must be the heir's: %+v %v", pos, err)
	}
	// The heir goes on committing under its epoch.
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return heir.Advance(ctx, tx, offsets.Range{Topic: "orders", Partition: 1, Epoch: hc.Epoch, Start: 5, End: 9})
	}); err != nil {
		t.Fatalf("heir fenced by an abandoned claim: %v", err)
	}
}
