package test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/rebalance"
	"github.com/eosink/eosink/sink"
)

// TestStoreFencesOlderClaim: two owners of one partition. The later claim wins; the earlier
// owner's conditional update matches no row and nothing it wrote commits.
func TestStoreFencesOlderClaim(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	schema := testbed.Schema(t, e)
	ctx := context.Background()
	if err := sink.Migrate(ctx, e.DatabaseURL, schema); err != nil {
		t.Fatal(err)
	}
	pool := testbed.Pool(t, e)
	a := rebalance.NewStore(pool, schema, "pipe", "owner-a", time.Second)
	b := rebalance.NewStore(pool, schema, "pipe", "owner-b", time.Second)
	start := func() (int64, error) { return 0, nil }

	ca, err := a.Claim(ctx, "orders", 3, "", start)
	if err != nil || ca.Epoch != 1 || ca.NextOffset != 0 || !ca.Created {
		t.Fatalf("claim a: %+v %v", ca, err)
	}
	// A commits one batch while it is the owner.
	advance := func(s *rebalance.Store, r rebalance.Range) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return s.Advance(ctx, tx, r) })
	}
	if err := advance(a, rebalance.Range{Topic: "orders", Partition: 3, Epoch: ca.Epoch, Start: 0, End: 10}); err != nil {
		t.Fatalf("a advance as owner: %v", err)
	}
	cb, err := b.Claim(ctx, "orders", 3, "", start)
	if err != nil || cb.Epoch != 2 || cb.NextOffset != 10 {
		t.Fatalf("claim b: %+v %v", cb, err)
	}
	// A, now a zombie, tries its next batch.
	err = advance(a, rebalance.Range{Topic: "orders", Partition: 3, Epoch: ca.Epoch, Start: 10, End: 20})
	var fe *rebalance.FencedError
	if !errors.Is(err, sink.ErrFenced) || !errors.As(err, &fe) || fe.Epoch != 1 || fe.Start != 10 {
		t.Fatalf("zombie advance: want *FencedError for epoch 1 at 10, got %v", err)
	}
	// Right epoch, wrong start (a replayed batch) is fenced too.
	if err := advance(b, rebalance.Range{Topic: "orders", Partition: 3, Epoch: cb.Epoch, Start: 0, End: 10}); !errors.Is(err, sink.ErrFenced) {
		t.Fatalf("replayed range: want ErrFenced, got %v", err)
	}
	if err := advance(b, rebalance.Range{Topic: "orders", Partition: 3, Epoch: cb.Epoch, Start: 10, End: 20}); err != nil {
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
	if err := b.Advance(ctx, tx, rebalance.Range{Topic: "orders", Partition: 3, Epoch: 2, Start: 20, End: 30}); err != nil {
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

// TestZombieProcessIsFenced: a sink process is frozen (SIGSTOP) while it holds an open
// transaction, past the group's session timeout. A second process takes over: the server
// ends the zombie's idle transaction, the new owner claims and finishes the stream. When the
// zombie wakes (SIGCONT) its commit is rejected, and no event is applied twice.
func TestZombieProcessIsFenced(t *testing.T) {
	t.Parallel()
	const events = 3000
	p := newPipeline(t, 2)
	p.Produce(t, events, 21)

	zombieArgs := p.Args("-batch-records", "100", "-idle-tx-timeout", "4s", "-commit-to-kafka=false")
	zombie := startChild(t, "zombie", zombieArgs, "EOSINK_FAILPOINTS=before-commit=sleep(3s)@3")
	zombie.WaitOutput("failpoint fired: before-commit sleep", 60*time.Second)
	if err := zombie.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := true
	defer func() {
		if frozen {
			_ = zombie.Cmd.Process.Signal(syscall.SIGCONT)
		}
	}()

	heir := startChild(t, "heir", p.Args("-batch-records", "100", "-lock-timeout", "1s"))
	rep := p.WaitCaughtUp(t, 120*time.Second)
	if rep.Applied != events {
		t.Fatalf("applied %d of %d", rep.Applied, events)
	}

	_ = zombie.Cmd.Process.Signal(syscall.SIGCONT)
	frozen = false
	// Its in-flight commits fail: fenced by the epoch, or rolled back because its session
	// was ended and the partition lost. Either way, nothing it did commits.
	testbed.Eventually(t, 60*time.Second, "the zombie's commit to be rejected", func() (bool, string) {
		return zombie.Contains("partition fenced") || zombie.Contains("in-flight batch rolled back"), "not yet"
	})

	// Give the zombie's other goroutines their chance to do harm, then check again.
	zombie.StopClean(60 * time.Second)
	heir.StopClean(60 * time.Second)
	if rep := p.Verify(t); !rep.OK() || rep.Lag != 0 {
		t.Fatalf("after the zombie woke: %+v", rep)
	}
	if !strings.Contains(heir.Output(), "partition claimed") {
		t.Fatal("heir never claimed a partition")
	}
	// Evidence that the zombie's open transaction was ended, and how.
	var evidence []string
	for who, out := range map[string]string{"heir": heir.Output(), "zombie": zombie.Output()} {
		for _, sign := range []string{"terminated a stalled session", "commit outcome unknown", "25P03", "57P01", "broken pipe",
			"in-flight batch rolled back"} {
			if strings.Contains(out, sign) {
				evidence = append(evidence, who+": "+sign)
			}
		}
	}
	if len(evidence) == 0 {
		t.Fatal("no sign that the zombie's open transaction ended without committing (terminated by the heir or the server, or rolled back on loss)")
	}
	t.Logf("zombie's transaction ended: %v", evidence)
}

// TestTransientErrorsAreRetried: the handler's connection is killed in the middle of a
// batch (pg_terminate_backend), and a batch hits a serialization failure. Both are retried
// without advancing the offset, and every event is applied once.
func TestTransientErrorsAreRetried(t *testing.T) {
	t.Parallel()
	const events = 500
	p := newPipeline(t, 1)
	p.Produce(t, events, 31)
	base := p.config(t, nil).Handler
	var calls atomic.Int64
	h := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		switch calls.Add(1) {
		case 2:
			_, err := tx.Exec(ctx, "SELECT pg_terminate_backend(pg_backend_pid())")
			return err
		case 4:
			if err := base(ctx, tx, b); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'injected'; END $$")
			return err
		}
		return base(ctx, tx, b)
	}
	r := startSink(t, p.config(t, h))
	p.WaitCaughtUp(t, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st := r.s.Stats(); st.Retries < 2 {
		t.Fatalf("retries = %d, want at least 2 (stats %+v)", st.Retries, st)
	}
}

// TestHandlerErrorStopsPartition: a non-transient handler error rolls the batch back and
// stops the partition with a *HandlerError; the stored offset does not move.
func TestHandlerErrorStopsPartition(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 120, 41)
	base := p.config(t, nil).Handler
	boom := errors.New("boom")
	var calls atomic.Int64
	h := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		if err := base(ctx, tx, b); err != nil {
			return err
		}
		if calls.Add(1) == 2 {
			return boom
		}
		// A handler cannot end the framework's transaction.
		if err := tx.Commit(ctx); !errors.Is(err, sink.ErrTxOwned) {
			return fmt.Errorf("Commit returned %v, want ErrTxOwned", err)
		}
		return nil
	}
	r := startSink(t, p.config(t, h))
	waitPartitionError(t, r, boom)
	_ = r.stop(t)
	var he *sink.HandlerError
	errs := r.s.PartitionErrors()
	if len(errs) != 1 || !errors.As(errs[0], &he) || he.FirstOffset != 50 {
		t.Fatalf("partition errors %v, want one *HandlerError from offset 50", errs)
	}
	if next, _ := p.stored(t, 0); next != 50 {
		t.Fatalf("stored next offset %d, want 50", next)
	}
	if n, _, hi := p.ledgerOffsets(t); n != 50 || hi != 49 {
		t.Fatalf("ledger %d rows up to %d, want 50 up to 49", n, hi)
	}
}

// TestStaleClaimAtIsAbandoned: the claim a rebalance callback makes (Store.ClaimAt) is
// conditional on the epochs read when the callback began. A callback that read the rows,
// stalled, and claims after the next owner did takes nothing: ErrClaimTaken, the next
// owner's epoch and commits intact. A missing row read at the start counts as epoch 0.
func TestStaleClaimAtIsAbandoned(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	schema := testbed.Schema(t, e)
	ctx := context.Background()
	if err := sink.Migrate(ctx, e.DatabaseURL, schema); err != nil {
		t.Fatal(err)
	}
	pool := testbed.Pool(t, e)
	stale := rebalance.NewStore(pool, schema, "pipe", "stale", time.Second)
	heir := rebalance.NewStore(pool, schema, "pipe", "heir", time.Second)
	start := func() (int64, error) { return 0, nil }

	// Both read the missing row (no epoch); the heir creates and claims it first.
	read, err := stale.Epochs(ctx, []string{"orders", "orders"}, []int32{1, 2})
	if err != nil || len(read) != 0 {
		t.Fatalf("epochs of missing rows: %v %v", read, err)
	}
	if c, err := heir.ClaimAt(ctx, "orders", 1, "", 0, false, start); err != nil || c.Epoch != 1 || !c.Created {
		t.Fatalf("heir's first claim: %+v %v", c, err)
	}
	if _, err := stale.ClaimAt(ctx, "orders", 1, "", 0, false, start); !errors.Is(err, rebalance.ErrClaimTaken) {
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
		return heir.Advance(ctx, tx, rebalance.Range{Topic: "orders", Partition: 1, Epoch: hc.Epoch, Start: 0, End: 5})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.ClaimAt(ctx, "orders", 1, "", read["orders"][1], true, start); !errors.Is(err, rebalance.ErrClaimTaken) {
		t.Fatalf("stale claim: want ErrClaimTaken, got %v", err)
	}
	pos, _, err := heir.Peek(ctx, "orders", 1)
	if err != nil || pos.Epoch != 2 || pos.Owner != "heir" || pos.NextOffset != 5 {
		t.Fatalf("after the stale claim the row must be the heir's: %+v %v", pos, err)
	}
	// The heir goes on committing under its epoch.
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return heir.Advance(ctx, tx, rebalance.Range{Topic: "orders", Partition: 1, Epoch: hc.Epoch, Start: 5, End: 9})
	}); err != nil {
		t.Fatalf("heir fenced by an abandoned claim: %v", err)
	}
}
