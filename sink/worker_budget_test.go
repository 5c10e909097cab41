package sink

import (
	"sync/atomic"
	"testing"
	"time"
)

// twoWorkers are two partitions' workers sharing one workerConfig, as a Sink's do.
func twoWorkers(t *testing.T, lim batchLimits) (*testWorker, *testWorker) {
	t.Helper()
	a := newTestWorker(t, lim, nil)
	b := newWorker(a.cfg, "t", 1, 1, 0)
	b.commitBatch = a.fake.commit
	tb := &testWorker{worker: b, fake: a.fake}
	t.Cleanup(func() {
		b.cancel()
		if tb.started {
			<-b.done
		}
	})
	return a, tb
}

func TestWorkerTotalBudgetPausesEveryPartition(t *testing.T) {
	// 660 bytes a record (500 + overhead): each partition may hold 10 000, all together 1 500
	// (750 each while there are two).
	a, b := twoWorkers(t, batchLimits{maxBatchRecords: 100, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour, maxBufferedBytes: 10_000, maxTotalBufferedBytes: 1500})
	// Until the total has stayed at the cap for capGrace, the poll loop holds off instead
	// (capGate) and push pauses no partition on the total.
	b.push(Record{Offset: 0, Value: make([]byte, 500)})
	b.push(Record{Offset: 1, Value: make([]byte, 500)})
	if full := b.push(Record{Offset: 2, Value: make([]byte, 500)}); full {
		t.Fatal("paused on the total before pausing was turned on")
	}
	b.release(3 * 660)
	b.q, b.fetchNext = recordQueue{}, 0
	a.cfg.capPausing.Store(true)
	if full := a.push(Record{Offset: 0, Value: make([]byte, 500)}); full {
		t.Fatal("full after 660 of 1500 bytes in all")
	}
	if full := b.push(Record{Offset: 0, Value: make([]byte, 500)}); full {
		t.Fatal("full after 1320 of 1500 bytes in all")
	}
	// Partition b holds 1320 bytes, far below its own 10 000: the total pauses it.
	if full := b.push(Record{Offset: 1, Value: make([]byte, 500)}); !full {
		t.Fatal("not full with 1980 bytes in all, above the 1500-byte total")
	}
	if got := a.cfg.total.Load(); got != 3*660 {
		t.Fatalf("total %d bytes, want %d", got, 3*660)
	}
	if a.canResume() || b.canResume() {
		t.Fatal("a partition can resume while the total is above half of its cap")
	}
	// A partition under half of its fair share (1500 / 3 workers) resumes all the same:
	// others stuck with most of the total must not stop it for good, and it is not paused
	// on the total before it holds its share.
	c := newWorker(a.cfg, "t", 2, 1, 0)
	if !c.canResume() {
		t.Fatal("a partition with nothing buffered cannot resume while others hold the total")
	}
	if full := c.push(Record{Offset: 0, Value: make([]byte, 200)}); full {
		t.Fatal("paused on the total with 360 bytes, under its 500-byte share")
	}
	if full := c.push(Record{Offset: 1, Value: make([]byte, 200)}); !full {
		t.Fatal("not paused on the total with 720 bytes, over its 500-byte share")
	}
	c.release(2 * 360)
	// b commits its two records: the total falls to 660, under half of 1500.
	b.start()
	close(b.stop)
	waitDone(t, b.worker)
	if got := a.cfg.total.Load(); got != 660 {
		t.Fatalf("total %d bytes after b committed, want 660", got)
	}
	if !a.canResume() {
		t.Fatal("a cannot resume with the total under half of its cap")
	}
}

func TestWorkerGivesBackItsBufferWhenItStops(t *testing.T) {
	a, b := twoWorkers(t, batchLimits{maxBatchRecords: 100, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour, maxBufferedBytes: 1 << 20, maxTotalBufferedBytes: 1 << 20})
	a.pushValues(100, 100, 100)
	b.pushValues(100)
	// a is aborted before it commits anything (a lost partition): its queued records must
	// leave the total, or the sink would stay paused for good.
	a.cancel()
	a.start()
	waitDone(t, a.worker)
	if got := a.cfg.total.Load(); got != 100+recordOverhead {
		t.Fatalf("total %d bytes after a stopped, want b's %d", got, 100+recordOverhead)
	}
	if full := a.push(Record{Offset: 10, Value: make([]byte, 100)}); full || a.bufferedBytes() != 0 {
		t.Fatal("a stopped worker queued a record")
	}
	if got := a.cfg.total.Load(); got != 100+recordOverhead {
		t.Fatalf("total %d bytes after a push to a stopped worker, want %d", got, 100+recordOverhead)
	}
}

func TestCapGateHoldsThenPausesStuckPartitions(t *testing.T) {
	var pausing atomic.Bool
	g := capGate{pausing: &pausing}
	t0 := time.Unix(1000, 0)
	if g.hold(900, 1000, t0) {
		t.Fatal("holds under the cap")
	}
	if g.hold(5000, 0, t0) {
		t.Fatal("holds with no cap")
	}
	if !g.hold(1000, 1000, t0) || !g.hold(1200, 1000, t0.Add(capGrace/2)) {
		t.Fatal("does not hold at the cap")
	}
	if pausing.Load() {
		t.Fatal("pausing before capGrace")
	}
	// Commits bring the total under the cap: the wait starts again.
	if g.hold(999, 1000, t0.Add(capGrace-time.Millisecond)) {
		t.Fatal("holds under the cap")
	}
	if !g.hold(1000, 1000, t0.Add(capGrace)) {
		t.Fatal("the wait did not start again at the cap")
	}
	// At the cap for capGrace: a partition holds the total; pausing turns on, polling goes on.
	if g.hold(1000, 1000, t0.Add(2*capGrace)) || !pausing.Load() {
		t.Fatal("still holding after capGrace at the cap, or pausing off")
	}
	if g.hold(1500, 1000, t0.Add(3*capGrace)) {
		t.Fatal("holds while pausing is on")
	}
	// Pausing stays on until the total is under half of the cap.
	g.hold(600, 1000, t0.Add(4*capGrace))
	if !pausing.Load() {
		t.Fatal("pausing off above half of the cap")
	}
	g.hold(499, 1000, t0.Add(5*capGrace))
	if pausing.Load() {
		t.Fatal("pausing still on under half of the cap")
	}
}
