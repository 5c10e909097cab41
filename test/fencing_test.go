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

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

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
