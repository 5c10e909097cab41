package cdc

import (
	"testing"

	"github.com/eosink/eosink/sink"
)

// The source lag's bookkeeping: a commit applies what was written below its next offset;
// a write that starts again at offsets already noted (the transaction was rolled back and
// retried, or isolated again) replaces them; parts of one transaction keep the newest;
// the applied time never goes back (a replay); a partition that left is forgotten.
func TestSourceLagBookkeeping(t *testing.T) {
	p, err := New(Config{Schemas: []string{"public"}})
	if err != nil {
		t.Fatal(err)
	}
	k := sink.Partition{Topic: "dbz.public.items", Partition: 3}
	applied := func() (int64, bool) {
		p.lag.mu.Lock()
		defer p.lag.mu.Unlock()
		e := p.lag.parts[k]
		if e == nil || !e.applied {
			return 0, false
		}
		return e.appliedMs, true
	}
	commit := func(next int64) { p.Committed([]sink.Offset{{Topic: k.Topic, Partition: k.Partition, Next: next}}) }

	p.lag.written(k, 0, 9, 5000)
	if _, ok := applied(); ok {
		t.Fatal("applied before a commit")
	}
	p.lag.written(k, 0, 4, 3000) // rolled back, written again in a part: replaces
	p.lag.written(k, 6, 9, 4000) // the next part of the same transaction: the newest of both
	commit(10)
	if ms, _ := applied(); ms != 4000 {
		t.Errorf("applied %d, want 4000 (the rolled-back write's 5000 replaced)", ms)
	}
	p.lag.written(k, 10, 19, 9000)
	commit(10) // a commit below the write (not its transaction): nothing moves
	if ms, _ := applied(); ms != 4000 {
		t.Errorf("applied %d after a commit below the write, want 4000", ms)
	}
	commit(20)
	if ms, _ := applied(); ms != 9000 {
		t.Errorf("applied %d, want 9000", ms)
	}
	p.lag.written(k, 20, 29, 0) // no source.ts_ms: nothing noted
	p.lag.written(k, 20, 29, 7000)
	commit(30) // a replay of older changes: the replica's newest stays
	if ms, _ := applied(); ms != 9000 {
		t.Errorf("applied %d after an older commit time, want 9000", ms)
	}
	if err := p.Close(t.Context(), sink.Partition{Topic: k.Topic, Partition: k.Partition, Epoch: 4}); err != nil {
		t.Fatal(err)
	}
	if _, ok := applied(); ok {
		t.Error("a closed partition keeps its gauges")
	}
}
