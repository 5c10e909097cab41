package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestHalfOpenCommitIsSettled (issue 11, finding 9): a COMMIT's connection is cut on the
// client's side only, never forwarded, while the server's side stays open: the old session
// stays idle in transaction holding the offset row, and the caller's pool sets no
// idle_in_transaction_session_timeout. Reading the row back fails (lock timeouts) for as long
// as that session lives; the sink must end that known backend instead of retrying for hours,
// settle the outcome (not committed) and go on, every event applied once.
func TestHalfOpenCommitIsSettled(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 600, 141)
	proxy, proxied := testbed.StartPGProxy(t, p.Env.DatabaseURL)
	pc, err := pgxpool.ParseConfig(proxied)
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.RuntimeParams["application_name"] = "settle-test-" + p.Group
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	base := app.Handler(p.Schema)
	var calls atomic.Int64
	h := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		if err := base(ctx, tx, b); err != nil {
			return err
		}
		if calls.Add(1) == 3 {
			proxy.Arm(testbed.CutHalfOpen) // the next COMMIT on the wire is this batch's
		}
		return nil
	}
	cfg := p.config(t, h)
	cfg.DatabaseURL = ""
	cfg.Pool = pool
	cfg.LockTimeout = time.Second
	cfg.ClaimTimeout = 30 * time.Second
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), &logs), nil))
	r := startSink(t, cfg)
	p.WaitCaughtUp(t, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if proxy.Fired.Load() != 1 {
		t.Fatalf("the proxy cut %d connections, want 1", proxy.Fired.Load())
	}
	if st := r.s.Stats(); st.UnknownCommits != 1 {
		t.Fatalf("unknown commits = %d, want 1 (stats %+v)", st.UnknownCommits, st)
	}
	for _, want := range []string{"reading the offset row back failed", "ended the old session of the COMMIT", "commit outcome settled: not committed"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no %q in the log", want)
		}
	}
	if errs := r.s.PartitionErrors(); len(errs) != 0 {
		t.Fatalf("partition errors: %v", errs)
	}
}

// TestUnsettledCommitStopsThePartition (issue 11, finding 9): the database becomes
// unreachable as a batch's COMMIT is sent, and stays so. Reading the row back is retried,
// each failure logged, for ClaimTimeout only; then the partition stops loudly with
// ErrCommitUnsettled instead of retrying forever, and nothing of the batch is stored.
func TestUnsettledCommitStopsThePartition(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 300, 142)
	proxy, proxied := testbed.StartPGProxy(t, p.Env.DatabaseURL)
	base := app.Handler(p.Schema)
	var calls atomic.Int64
	h := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		if err := base(ctx, tx, b); err != nil {
			return err
		}
		if calls.Add(1) == 3 {
			proxy.Down(true) // the COMMIT that follows fails on the connection
		}
		return nil
	}
	cfg := p.config(t, h)
	cfg.DatabaseURL = proxied
	cfg.ClaimTimeout = 3 * time.Second
	cfg.MaxRetryBackoff = 500 * time.Millisecond
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), &logs), nil))
	r := startSink(t, cfg)
	testbed.Eventually(t, 60*time.Second, "the partition to stop with ErrCommitUnsettled", func() (bool, string) {
		for _, err := range r.s.PartitionErrors() {
			if errors.Is(err, sink.ErrCommitUnsettled) {
				return true, ""
			}
		}
		return false, fmt.Sprint(r.s.PartitionErrors())
	})
	if n := strings.Count(logs.String(), "reading the offset row back failed"); n < 2 {
		t.Errorf("%d failed reads logged, want each of them", n)
	}
	proxy.Down(false)
	if next, _ := p.stored(t, 0); next != 100 {
		t.Fatalf("stored next offset %d, want 100 (two batches of 50; the third never committed)", next)
	}
	_ = r.stop(t)
}
