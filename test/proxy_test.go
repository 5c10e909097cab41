package test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestUnknownCommitOutcomeIsSettled cuts the database connection around a COMMIT, once after
// the server received it and once before. The sink cannot tell from the error whether the
// batch committed; it reads the offset row back, resumes from what is stored, and every
// event is applied exactly once either way.
func TestUnknownCommitOutcomeIsSettled(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode testbed.CutMode
	}{{"server committed", testbed.CutAfterForward}, {"server never saw commit", testbed.CutBeforeSend}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPipeline(t, 1)
			p.Produce(t, 600, 61)
			proxy, proxied := testbed.StartPGProxy(t, p.Env.DatabaseURL)
			base := app.Handler(p.Schema)
			var calls atomic.Int64
			h := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
				if err := base(ctx, tx, b); err != nil {
					return err
				}
				if calls.Add(1) == 3 {
					proxy.Arm(tc.mode) // the next COMMIT on the wire is this batch's
				}
				return nil
			}
			cfg := p.config(t, h)
			cfg.DatabaseURL = proxied
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
		})
	}
}
