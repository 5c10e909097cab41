package sink

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Unit tests of the partition worker with a stand-in for its commit: batching, retries,
// isolation, failures and stopping. The commit itself (the fence, the transaction) is tested
// against the real broker and database in test/.

// call is one call of the stand-in commit.
type call struct {
	offsets       []int64
	attempt       int
	isolate       bool
	checkDeferred bool
}

// fakeCommit records calls and answers each with the result of answer (nil: success).
type fakeCommit struct {
	mu     sync.Mutex
	calls  []call
	answer func(c call) error
	called chan struct{} // one send per call, without blocking
}

func (f *fakeCommit) commit(batch []Record, t *tries) error {
	c := call{attempt: t.attempt, isolate: t.isolate, checkDeferred: t.checkDeferred}
	for _, r := range batch {
		c.offsets = append(c.offsets, r.Offset)
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	select {
	case f.called <- struct{}{}:
	default:
	}
	if f.answer == nil {
		return nil
	}
	return f.answer(c)
}

func (f *fakeCommit) snapshot() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// batchSizes returns the record count of each call.
func (f *fakeCommit) batchSizes() []int {
	var n []int
	for _, c := range f.snapshot() {
		n = append(n, len(c.offsets))
	}
	return n
}

type testWorker struct {
	*worker
	fake    *fakeCommit
	started bool
}

// failures are why the worker's partition stopped, as its stop ledger has them.
func (tw *testWorker) failures() []error { return tw.cfg.stops.errors() }

// testStops is a stop ledger that logs nothing and writes nowhere (no persistence goroutine).
func testStops() *stopLedger { return newStopLedger(&Config{}, slog.New(slog.DiscardHandler)) }

// start runs the worker goroutine; the test's cleanup aborts it and waits for it.
func (tw *testWorker) start() {
	tw.started = true
	go tw.run()
}

func newTestWorker(t *testing.T, lim batchLimits, answer func(call) error) *testWorker {
	t.Helper()
	if lim.maxBufferedBytes == 0 {
		lim.maxBufferedBytes = 1 << 20
	}
	cfg := &workerConfig{
		plugin:       handlerPlugin(func(context.Context, pgx.Tx, Batch) error { return nil }),
		limits:       lim,
		retryBackoff: time.Millisecond, maxRetryBackoff: 4 * time.Millisecond,
		m: &metrics{}, tracer: newTracer(nil), log: slog.New(slog.DiscardHandler), total: new(atomic.Int64),
		stops: testStops(), rechecks: newRechecks(),
	}
	fake := &fakeCommit{answer: answer, called: make(chan struct{}, 100)}
	w := newWorker(cfg, "t", 0, 1, 0)
	w.commitBatch = fake.commit
	tw := &testWorker{worker: w, fake: fake}
	t.Cleanup(func() {
		w.cancel()
		if tw.started {
			<-w.done
		}
	})
	return tw
}

// pushValues queues one record per value length, at consecutive offsets.
func (tw *testWorker) pushValues(sizes ...int) {
	for _, n := range sizes {
		tw.push(Record{Topic: "t", Offset: tw.fetchNext, Value: make([]byte, n)})
	}
}

func waitDone(t *testing.T, w *worker) {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not stop")
	}
}

func TestWorkerBatchesByRecordCountAndCommitsTheRestOnStop(t *testing.T) {
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 3, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour}, nil)
	tw.pushValues(1, 1, 1, 1, 1, 1, 1)
	tw.start()
	for range 2 {
		<-tw.fake.called
	}
	close(tw.stop) // the seventh, left over from a backlog, forms its batch at once or on the stop
	waitDone(t, tw.worker)
	if got, want := tw.fake.batchSizes(), []int{3, 3, 1}; !slices.Equal(got, want) {
		t.Fatalf("batch sizes %v, want %v", got, want)
	}
	if next := tw.fetchNext; next != 7 {
		t.Fatalf("fetchNext %d, want 7", next)
	}
	if b := tw.bufferedBytes(); b != 0 {
		t.Fatalf("buffered %d bytes after the last commit, want 0", b)
	}
}

func TestWorkerBacklogRestFormsAtOnce(t *testing.T) {
	// Four records queued, batches of three: the fourth has waited already, so its batch
	// forms right after the first commits, not MaxBatchWait (an hour) later.
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 3, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour}, nil)
	tw.pushValues(1, 1, 1, 1)
	tw.start()
	for i := range 2 {
		select {
		case <-tw.fake.called:
		case <-time.After(10 * time.Second):
			t.Fatalf("batch %d of the backlog not committed", i+1)
		}
	}
	if got := tw.fake.batchSizes(); !slices.Equal(got, []int{3, 1}) {
		t.Fatalf("batch sizes %v, want [3 1]", got)
	}
}

func TestWorkerBatchesByBytes(t *testing.T) {
	// 10 bytes per batch: two 4-byte values fit, a third does not; a record larger than the
	// limit goes alone.
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 100, maxBatchBytes: 10, maxBatchWait: time.Hour}, nil)
	tw.pushValues(4, 4, 4, 20, 4)
	tw.start()
	for range 3 {
		<-tw.fake.called
	}
	close(tw.stop)
	waitDone(t, tw.worker)
	if got, want := tw.fake.batchSizes(), []int{2, 1, 1, 1}; !slices.Equal(got, want) {
		t.Fatalf("batch sizes %v, want %v", got, want)
	}
}

func TestWorkerCommitsAPartialBatchAfterMaxBatchWait(t *testing.T) {
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 100, maxBatchBytes: 1 << 20, maxBatchWait: 20 * time.Millisecond}, nil)
	tw.start()
	tw.pushValues(1, 1)
	select {
	case <-tw.fake.called:
	case <-time.After(10 * time.Second):
		t.Fatal("a partial batch was not committed after MaxBatchWait")
	}
	if got := tw.fake.batchSizes(); !slices.Equal(got, []int{2}) {
		t.Fatalf("batch sizes %v, want [2]", got)
	}
}

func TestWorkerBatchWaitRunsFromTheFirstRecordsArrival(t *testing.T) {
	// A record that queued while the previous batch committed has waited already: once that
	// commit ends, its batch forms at once if MaxBatchWait has passed since it was pushed,
	// not MaxBatchWait after the commit.
	const wait = 2 * time.Second
	release := make(chan struct{})
	type seen struct{ released, waitStart, formed time.Time }
	second := make(chan seen, 1)
	var released time.Time // worker goroutine only
	var tw *testWorker
	tw = newTestWorker(t, batchLimits{maxBatchRecords: 2, maxBatchBytes: 1 << 20, maxBatchWait: wait}, func(c call) error {
		if c.offsets[0] == 0 {
			<-release // the first batch's commit takes longer than MaxBatchWait
			released = time.Now()
		} else {
			second <- seen{released, tw.waitStart, tw.formedAt}
		}
		return nil
	})
	tw.start()
	tw.pushValues(1, 1) // a full batch: its commit starts at once
	<-tw.fake.called
	pushed := time.Now()
	tw.pushValues(1) // queued during the commit
	time.Sleep(wait + 100*time.Millisecond)
	close(release)
	var got seen
	select {
	case got = <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the record queued during the commit was not committed")
	}
	close(tw.stop)
	waitDone(t, tw.worker)
	if got := tw.fake.batchSizes(); !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("batch sizes %v, want [2 1]", got)
	}
	if got.waitStart.Before(pushed) || !got.waitStart.Before(got.released) {
		t.Fatalf("the batch's wait started %v after the push and %v after the first commit ended; want when its record was pushed",
			got.waitStart.Sub(pushed), got.waitStart.Sub(got.released))
	}
	if d := got.formed.Sub(got.released); d >= wait {
		t.Fatalf("the batch formed %v after the first commit ended, want at once (its record had waited %v already)", d, got.released.Sub(pushed))
	}
}

func TestWorkerPushReportsAFullBuffer(t *testing.T) {
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 100, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour, maxBufferedBytes: 1000}, nil)
	if full := tw.push(Record{Offset: 0, Value: make([]byte, 500)}); full {
		t.Fatal("full after 660 of 1000 bytes")
	}
	if full := tw.push(Record{Offset: 1, Value: make([]byte, 500)}); !full {
		t.Fatal("not full after 1320 of 1000 bytes")
	}
	if tw.canResume() {
		t.Fatal("can resume above half the buffer")
	}
	if full := tw.push(Record{Offset: 1, Value: make([]byte, 500)}); full || tw.bufferedBytes() != 2*(500+recordOverhead) {
		t.Fatal("a record below the fetch position was queued")
	}
}

func TestWorkerRetriesTransientErrorsWithTheSameBatch(t *testing.T) {
	serialization := &pgconn.PgError{Code: "40001", Message: "could not serialize access"}
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 2, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour}, func(c call) error {
		if c.attempt < 3 {
			return serialization
		}
		return nil
	})
	tw.pushValues(1, 1)
	tw.start()
	for range 3 {
		<-tw.fake.called
	}
	close(tw.stop)
	waitDone(t, tw.worker)
	calls := tw.fake.snapshot()
	if len(calls) != 3 {
		t.Fatalf("%d commit calls, want 3", len(calls))
	}
	for i, c := range calls {
		if c.attempt != i+1 || c.isolate || !slices.Equal(c.offsets, []int64{0, 1}) {
			t.Fatalf("call %d: %+v, want attempt %d of offsets [0 1] without isolation", i, c, i+1)
		}
	}
	if n := tw.cfg.m.retries.load(); n != 2 {
		t.Fatalf("retries %d, want 2", n)
	}
	if errs := tw.failures(); len(errs) != 0 {
		t.Fatalf("partition failed: %v", errs)
	}
}

func TestWorkerIsolatesAPoisonBatchAtOnce(t *testing.T) {
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 2, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour}, func(c call) error {
		if !c.isolate {
			return errIsolate
		}
		return nil
	})
	tw.pushValues(1, 1)
	tw.start()
	<-tw.fake.called
	<-tw.fake.called
	close(tw.stop)
	waitDone(t, tw.worker)
	want := []call{{offsets: []int64{0, 1}, attempt: 1}, {offsets: []int64{0, 1}, attempt: 2, isolate: true}}
	if got := tw.fake.snapshot(); !slices.EqualFunc(got, want, func(a, b call) bool {
		return a.attempt == b.attempt && a.isolate == b.isolate && slices.Equal(a.offsets, b.offsets)
	}) {
		t.Fatalf("calls %+v, want %+v", got, want)
	}
	if n := tw.cfg.m.retries.load(); n != 0 {
		t.Fatalf("isolation counted as %d retries", n)
	}
}

func TestWorkerStopsThePartitionOnAHandlerError(t *testing.T) {
	herr := &HandlerError{Topic: "t", Partition: 0, FirstOffset: 0, LastOffset: 0, Err: errors.New("boom")}
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 1, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour}, func(call) error { return herr })
	tw.pushValues(1, 1, 1)
	tw.start()
	waitDone(t, tw.worker) // without a stop: the error ends the worker
	if errs := tw.failures(); len(errs) != 1 || !errors.Is(errs[0], herr) {
		t.Fatalf("failures %v, want the handler error", errs)
	}
	if got := tw.fake.batchSizes(); !slices.Equal(got, []int{1}) {
		t.Fatalf("batch sizes %v: the records after the failed batch were committed", got)
	}
	if n := tw.next.Load(); n != 0 {
		t.Fatalf("position moved to %d after a failed batch", n)
	}
}

func TestWorkerFencedIsNotRetried(t *testing.T) {
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 1, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour}, func(call) error {
		return &FencedError{Pipeline: "p", Topic: "t", Partition: 0, Epoch: 1, Start: 0}
	})
	tw.pushValues(1)
	tw.start()
	waitDone(t, tw.worker)
	if errs := tw.failures(); len(errs) != 1 || !errors.Is(errs[0], ErrFenced) {
		t.Fatalf("failures %v, want ErrFenced", errs)
	}
	if n := len(tw.fake.snapshot()); n != 1 {
		t.Fatalf("%d commit calls, want 1", n)
	}
}

func TestWorkerAbortIsNotAPartitionFailure(t *testing.T) {
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 1, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour}, nil)
	tw.fake.answer = func(call) error {
		<-tw.ctx.Done() // an in-flight transaction until the revoke aborts it
		return tw.ctx.Err()
	}
	tw.pushValues(1)
	tw.start()
	<-tw.fake.called
	tw.cancel()
	waitDone(t, tw.worker)
	if errs := tw.failures(); len(errs) != 0 {
		t.Fatalf("an abort was reported as a failure: %v", errs)
	}
}

func TestAwaitWorkersAbortsPastTheTimeout(t *testing.T) {
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 1, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour}, nil)
	tw.fake.answer = func(call) error {
		<-tw.ctx.Done()
		return tw.ctx.Err()
	}
	tw.pushValues(1)
	tw.start()
	<-tw.fake.called
	close(tw.stop) // a graceful stop: the in-flight batch may finish within the timeout
	progress := 0
	awaitWorkers([]*worker{tw.worker}, false, 20*time.Millisecond, tw.cfg.log, func() { progress++ })
	select {
	case <-tw.done:
	default:
		t.Fatal("awaitWorkers returned before the aborted worker stopped")
	}
	if progress != 1 || tw.ctx.Err() == nil {
		t.Fatalf("progress %d, context %v: want one worker done, aborted", progress, tw.ctx.Err())
	}
	if errs := tw.failures(); len(errs) != 0 {
		t.Fatalf("an abort was reported as a failure: %v", errs)
	}
}

func TestAwaitWorkersLeavesAWorkerThatIgnoresCancellation(t *testing.T) {
	defer func(g time.Duration) { stopGrace = g }(stopGrace)
	stopGrace = 20 * time.Millisecond
	release := make(chan struct{})
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 1, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour}, func(call) error {
		<-release // ignores its context
		return nil
	})
	tw.pushValues(1)
	tw.start()
	<-tw.fake.called
	close(tw.stop)
	awaitWorkers([]*worker{tw.worker}, false, 20*time.Millisecond, tw.cfg.log, func() {})
	select {
	case <-tw.done:
		t.Fatal("the worker stopped although its commit never returned")
	default:
	}
	close(release) // let the test's cleanup end it
}

// A deferred constraint that fails at COMMIT, first without isolation and then while
// isolating, leads to one more isolated attempt with the deferred constraints checked per
// part; a third COMMIT failure stops the partition.
func TestWorkerChecksDeferredConstraintsOnlyAfterACommitFailure(t *testing.T) {
	var checked []bool
	tw := newTestWorker(t, batchLimits{maxBatchRecords: 2, maxBatchBytes: 1 << 20, maxBatchWait: time.Hour}, func(c call) error {
		checked = append(checked, c.checkDeferred)
		switch {
		case !c.isolate:
			return errIsolate // poison at a statement: isolate, deferred constraints as declared
		case !c.checkDeferred:
			return errIsolateAtCommit
		}
		return errIsolateAtCommit // still failing: not isolated a third time
	})
	tw.pushValues(1, 1)
	tw.start()
	waitDone(t, tw.worker)
	errs := tw.failures()
	if !slices.Equal(checked, []bool{false, false, true}) || len(errs) != 1 || !errors.Is(errs[0], errIsolate) {
		t.Fatalf("checkDeferred per attempt %v, failures %v; want [false false true] and the isolation error", checked, errs)
	}
}
