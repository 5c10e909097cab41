package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/sink"
)

// skipper reports skip records of every batch skipped, and fails with err.
type skipper struct {
	skip int
	err  error
}

func (skipper) Open(context.Context, sink.Partition) error  { return nil }
func (skipper) Close(context.Context, sink.Partition) error { return nil }
func (p skipper) Write(ctx context.Context, _ pgx.Tx, _ sink.Batch) error {
	sink.Skipped(ctx, p.skip)
	return p.err
}

// TestWriteBatchIsTheEnginesWriteStep: WriteBatch reaches package sink's write step, which
// counts what the plugin reports skipped and returns the plugin's error.
func TestWriteBatchIsTheEnginesWriteStep(t *testing.T) {
	res, err := engine.WriteBatch(context.Background(), nil, skipper{skip: 2}, sink.Batch{Records: make([]sink.Record, 5)}, engine.WriteOptions{})
	if err != nil || res.Applied != 3 || res.Skipped != 2 || len(res.DeadLettered) != 0 {
		t.Fatalf("WriteBatch = %+v, %v; want 3 applied and 2 skipped", res, err)
	}
	bad := errors.New("bad")
	res, err = engine.WriteBatch(context.Background(), nil, skipper{skip: 1, err: bad}, sink.Batch{Records: make([]sink.Record, 2)}, engine.WriteOptions{})
	if !errors.Is(err, bad) || res.Applied != 0 || res.Skipped != 0 || res.DeadLettered != nil {
		t.Fatalf("WriteBatch of a failing plugin = %+v, %v; want no result and its error", res, err)
	}
}

// TestCountSkipped: sink.Skipped counts into the count CountSkipped returns.
func TestCountSkipped(t *testing.T) {
	ctx, n := engine.CountSkipped(context.Background())
	sink.Skipped(ctx, 2)
	sink.Skipped(ctx, 1)
	if *n != 3 {
		t.Fatalf("counted %d, want 3", *n)
	}
}

// TestStopRemedyNamesEveryReason: each stop reason but the catch-all has a remedy of its own.
func TestStopRemedyNamesEveryReason(t *testing.T) {
	fallback := engine.StopRemedy(sink.StopOther)
	for _, r := range []string{sink.StopFenced, sink.StopOutOfRange, sink.StopTopicRecreated, sink.StopNoPosition,
		sink.StopNoRoute, sink.StopPoison, sink.StopTooManyDeadLetters, sink.StopHandler, sink.StopSourceRewound, sink.StopDecimal} {
		if rem := engine.StopRemedy(r); rem == "" || rem == fallback {
			t.Errorf("StopRemedy(%q) = %q, want a remedy of its own", r, rem)
		}
	}
}
