package sink

import (
	"testing"
	"time"
)

// A burst far longer than a batch (a fetch of a partition's backlog) must not leave the
// worker with arrays sized for it: every partition of a many-partition sink kept two, and
// at 256 partitions they were most of eosink run's heap (issue 26).
func TestWorkerKeepsNoBurstSizedArrays(t *testing.T) {
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 10, maxBatchBytes: 1 << 20, maxBatchWait: time.Millisecond}, nil)
	burst := make([]int, 1000)
	for i := range burst {
		burst[i] = 1
	}
	tw.pushValues(burst...)
	if c := cap(tw.queue); c < 1000 {
		t.Fatalf("queue capacity %d before any batch, want the burst's", c)
	}
	tw.start()
	deadline := time.Now().Add(10 * time.Second)
	committed := func() (n int) {
		for _, b := range tw.fake.batchSizes() {
			n += b
		}
		return n
	}
	for committed() < 1000 {
		if time.Now().After(deadline) {
			t.Fatalf("burst not committed: %d records", committed())
		}
		time.Sleep(time.Millisecond)
	}
	// Steady state: a few records a batch.
	for range 5 {
		tw.pushValues(1, 1)
		want := int(tw.fetchNext)
		for committed() < want {
			if time.Now().After(deadline) {
				t.Fatal("steady records not committed")
			}
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(5 * time.Millisecond) // the last batch settled
	tw.mu.Lock()
	q, s := cap(tw.queue), cap(tw.spare)
	tw.mu.Unlock()
	if q > 10 || s > 10 {
		t.Errorf("after the burst: queue capacity %d, spare %d; want at most MaxBatchRecords (10)", q, s)
	}
	if got := tw.fake.batchSizes(); len(got) < 100 {
		t.Errorf("%d batches for 1,010 records in batches of 10", len(got))
	}
}

// A probe in flight when the sink stops asks the broker about no further partition: the
// poll goroutine waits for it before the consumer closes (closeRanges).
func TestProbeRangesStopsWhenQuit(t *testing.T) {
	quit := make(chan struct{})
	close(quit)
	probes := []rangeProbe{{k: partitionKey{"t", 0}}, {k: partitionKey{"t", 1}}}
	// A nil consumer: a query would panic.
	for _, p := range probeRanges(nil, nil, probes, quit) {
		if p.err != errProbeStopped {
			t.Errorf("partition %d: err %v, want errProbeStopped", p.k.partition, p.err)
		}
	}
}

func TestQueueArray(t *testing.T) {
	spare := make([]Record, 0, 100)
	for _, c := range []struct {
		name    string
		spare   []Record
		rest, n int
		reuse   bool
		wantCap int
	}{
		{"fits", spare, 60, 10, true, 100},
		{"too large for a slow partition", spare, 0, 20, false, 20},
		{"too small for the rest", spare, 150, 10, false, 150},
		{"no spare", nil, 0, 3, false, minQueueCap},
		{"at twice the need", spare, 0, 50, true, 100},
	} {
		got := queueArray(c.spare, c.rest, c.n)
		if len(got) != 0 || cap(got) != c.wantCap {
			t.Errorf("%s: len %d cap %d, want 0 and %d", c.name, len(got), cap(got), c.wantCap)
		}
		if reused := cap(got) > 0 && cap(c.spare) > 0 && &got[:1][0] == &c.spare[:1][0]; reused != c.reuse {
			t.Errorf("%s: reused %t, want %t", c.name, reused, c.reuse)
		}
	}
}
