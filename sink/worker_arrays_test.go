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
	if c := cap(tw.q.arr); c < 1000 {
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
	q, s := cap(tw.q.arr), cap(tw.spare)
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

func queueOf(n int) *recordQueue {
	q := &recordQueue{}
	for i := range n {
		q.push(Record{Offset: int64(i), Value: []byte{1}})
	}
	return q
}

func offsetsOf(rs []Record) (o []int64) {
	for _, r := range rs {
		o = append(o, r.Offset)
	}
	return o
}

func TestRecordQueueTake(t *testing.T) {
	// Part of the queue: copied out, the rest stays in place (no copy of the backlog).
	q := queueOf(1000)
	arr0 := &q.arr[0]
	batch, array, used := q.take(10, nil)
	if used || len(batch) != 10 || &array[0] != &batch[0] || batch[0].Offset != 0 || batch[9].Offset != 9 {
		t.Fatalf("partial take: %v used %t", offsetsOf(batch), used)
	}
	if q.len() != 990 || q.at(0).Offset != 10 || &q.arr[0] != arr0 || q.arr[0].Value != nil {
		t.Fatalf("rest: len %d first %d, same array %t, taken slot cleared %t", q.len(), q.at(0).Offset, &q.arr[0] == arr0, q.arr[0].Value == nil)
	}
	// The last of it: the queue's own array is the batch; the queue moves to a small one.
	spare := make([]Record, 0, 12)
	batch, array, used = q.take(990, spare)
	if len(batch) != 990 || batch[0].Offset != 10 || &array[0] != arr0 || used {
		t.Fatalf("take all: %d records from %d, own array %t, spare used %t", len(batch), batch[0].Offset, &array[0] == arr0, used)
	}
	if q.len() != 0 || cap(q.arr) != 990 {
		t.Fatalf("after the burst: len %d cap %d, want 0 and 990 (sized for the batch)", q.len(), cap(q.arr))
	}
	// A steady small rate reuses the spare.
	q = queueOf(5)
	_, _, used = q.take(5, spare)
	if !used || cap(q.arr) != 12 {
		t.Fatalf("steady: spare used %t, cap %d", used, cap(q.arr))
	}
}

func TestRecordQueuePushCompacts(t *testing.T) {
	q := &recordQueue{arr: make([]Record, 0, 8)}
	for i := range 8 {
		q.push(Record{Offset: int64(i)})
	}
	q.take(5, nil)
	arr0 := &q.arr[0]
	q.push(Record{Offset: 8}) // full, more than half taken: moves to the front
	if &q.arr[0] != arr0 || q.head != 0 || q.len() != 4 || q.at(0).Offset != 5 || q.at(3).Offset != 8 || cap(q.arr) != 8 {
		t.Fatalf("compaction: head %d len %d cap %d, same array %t", q.head, q.len(), cap(q.arr), &q.arr[0] == arr0)
	}
	for _, r := range q.arr[4:8] {
		if r.Offset != 0 || r.Value != nil {
			t.Fatal("slots past the queue not cleared")
		}
	}
}
