package sink

import (
	"errors"
	"log/slog"
	"testing"
)

// A worker told to stop on revoke whose last commit is fenced (the next owner came first)
// records no partition error: the partition is no longer this instance's. A fence while
// still assigned is recorded as before.
func TestFenceAfterRevokeIsNoPartitionError(t *testing.T) {
	cfg := validConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	s, err := New(cfg) // no I/O before Run
	if err != nil {
		t.Fatal(err)
	}
	fenced := &FencedError{Pipeline: "p", Topic: "t", Partition: 0, Epoch: 1, Start: 10}

	wcfg := &workerConfig{log: s.log, stops: s.stops, rechecks: s.poll.rechecks}
	revoked := newWorker(wcfg, "t", 0, 1, 10)
	close(revoked.stop)
	revoked.fail(fenced)
	if errs := s.PartitionErrors(); len(errs) != 0 {
		t.Fatalf("fence after revoke recorded: %v", errs)
	}

	assigned := newWorker(wcfg, "t", 1, 1, 10)
	assigned.fail(fenced)
	if errs := s.PartitionErrors(); len(errs) != 1 || !errors.Is(errs[0], ErrFenced) {
		t.Fatalf("fence while assigned: %v, want it recorded", errs)
	}
}
