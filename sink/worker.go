package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/eosink/eosink/internal/offsets"
)

// workerConfig is everything a partition worker uses. The Sink builds one in Run and shares it
// between its workers; a worker never sees the Sink. A field copied from Config carries the
// Config field's name.
type workerConfig struct {
	plugin Plugin
	db     txStarter      // the pool: one transaction per batch
	store  *offsets.Store // the offset fence (Advance) and the row read that settles a COMMIT

	limits            batchLimits
	isolationLevel    pgx.TxIsoLevel
	onPoison          PoisonPolicy
	schema            string // of the dead_letters table
	pipeline          string
	instance          string // resolved_by of the dead letters a batch applies (resolve.go)
	redactErrorValues bool   // for the dead letters' and spans' error texts
	// subscription names the pattern that matched a topic, for a *NoRouteError.
	subscription subscription

	// The dead-letter circuit breaker (breaker.go).
	maxDeadLetterRatio float64
	deadLetterWindow   int

	retryBackoff, maxRetryBackoff time.Duration
	claimTimeout                  time.Duration // how long settle reads the row back

	// total is the memory of records fetched and not yet committed summed over the sink's
	// partitions (every worker's buffered), for limits.maxTotalBufferedBytes: the Sink's, shared by its
	// workers.
	total *atomic.Int64
	// capPausing: the total has stayed at limits.maxTotalBufferedBytes for capGrace (capGate), so push pauses
	// a partition once it holds its fair share.
	capPausing atomic.Bool
	// active counts the workers that have not returned, for each one's fair share of
	// limits.maxTotalBufferedBytes (fairShare).
	active atomic.Int64

	m      *metrics
	tracer trace.Tracer
	log    *slog.Logger

	// kcommit is told each stored next offset after its COMMIT (the advisory Kafka commits,
	// Config.CommitToKafka); nil for none.
	kcommit *kafkaCommitter
	// stops records why the partition stopped (fail); rechecks asks the poll goroutine to
	// read a fenced partition's row again.
	stops    *stopLedger
	rechecks rechecks
}

// txStarter begins the transaction of a batch (*pgxpool.Pool): with BEGIN alone, or with
// BEGIN pipelined with the offset update (offsets.Store.Begin sends a batch).
type txStarter interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// batchLimits are the batching settings, named as in Config.
type batchLimits struct {
	maxBatchRecords  int
	maxBatchBytes    int
	maxBatchWait     time.Duration
	maxBufferedBytes int
	// maxTotalBufferedBytes caps the buffered bytes of all the sink's partitions together
	// (held in workerConfig.total); 0: no cap.
	maxTotalBufferedBytes int
}

// worker owns one assigned partition: it collects that partition's records into batches and
// commits them, one transaction at a time, in offset order. One goroutine per partition, so
// a slow partition never stalls the others.
//
// The poll goroutine pushes records (push) and decides on pause and resume; the worker
// goroutine (run) takes batches and commits them (commit.go). mu protects queue and
// buffered.
type worker struct {
	cfg       *workerConfig
	topic     string
	partition int32
	epoch     int64

	next      atomic.Int64 // stored next offset as of this worker's last commit
	fetchNext int64        // poll goroutine only: next offset expected from Kafka
	topicID   string       // stored at the claim, for the range check; "" when unknown
	// markersEnd is an end of the partition the poll goroutine saw: offsets below it that
	// were not delivered hold no committed record (poller_ranges.go).
	markersEnd atomic.Int64

	mu       sync.Mutex
	q        recordQueue // the records fetched and not yet in a batch (queue.go)
	queuedAt time.Time   // when the queue's oldest record was pushed: MaxBatchWait runs from it
	held     bool        // form the next batch without waiting: the partition paused, or a backlog is left
	buffered int         // memory of records fetched and not yet committed (queued plus in flight; memSize)
	closed   bool        // run has returned: push drops records, the buffer is given back (drop)
	spare    []Record    // the array of the last committed batch, empty, for the queue to move to
	// inflight is the whole array of the batch being applied, and inflightAt its first
	// record (worker goroutine only).
	inflight   []Record
	inflightAt *Record
	// flightTS is the Kafka timestamp of the in-flight batch's first record, zero when none
	// is in flight: for eosink_partition_lag_seconds (lag_seconds.go).
	flightTS time.Time

	wake   chan struct{} // a record was pushed (capacity 1)
	stop   chan struct{} // closed on revoke and shutdown: commit what is queued, then exit
	ctx    context.Context
	cancel context.CancelFunc // aborts the in-flight transaction: loss, timeouts
	done   chan struct{}      // closed when run returns
	dead   atomic.Bool        // run returned

	// Worker goroutine only: the outcomes of the partition's last records, for the dead-letter
	// circuit breaker (nil: off).
	deadLetters *deadLetterWindow
	panicLogged int64 // first offset + 1 of the batch whose panic's stack was logged (logPanic)
	// openDead is the highest offset of the partition's open dead letters at or above the
	// claimed position, noOpenDeadLetter for none (resolve.go).
	openDead int64

	// commitBatch runs one try of a batch: the commit method, or a stand-in in unit tests.
	commitBatch func(batch []Record, t *tries) error

	// Worker goroutine only, for the eosink.fetch span: when the batch being formed had its
	// first record queued (queuedAt), and when it was complete.
	waitStart, formedAt time.Time
}

func newWorker(cfg *workerConfig, topic string, partition int32, epoch, next int64) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{
		cfg: cfg, topic: topic, partition: partition, epoch: epoch, fetchNext: next,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		ctx: ctx, cancel: cancel,
	}
	w.commitBatch = w.commit
	cfg.active.Add(1) // every worker runs; run's end (drop) takes it back
	if cfg.onPoison == DeadLetter {
		w.deadLetters = newDeadLetterWindow(cfg.deadLetterWindow, cfg.maxDeadLetterRatio)
	}
	w.next.Store(next)
	return w
}

func recordSize(r *Record) int { return len(r.Key) + len(r.Value) }

// recordOverhead approximates what a queued record costs besides its key and value: the
// Record itself, the slice headers, allocation rounding.
const recordOverhead = 160

// memSize is what a queued record holds in memory, for MaxBufferedBytes.
func memSize(r *Record) int {
	n := recordSize(r) + recordOverhead
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 40
	}
	return n
}

// push queues a record (poll goroutine). It drops a record below the expected position,
// which librdkafka may redeliver around a seek. It returns true when the partition's
// buffer is full and fetching should pause.
func (w *worker) push(r Record) (full bool) {
	if r.Offset < w.fetchNext {
		return false
	}
	w.fetchNext = r.Offset + 1
	size := memSize(&r)
	w.mu.Lock()
	if w.closed { // the worker is gone (revoked, stopped): the record is not ours to keep
		w.mu.Unlock()
		return false
	}
	if w.q.len() == 0 {
		w.queuedAt = time.Now()
	}
	w.q.push(r)
	w.buffered += size
	own := w.buffered
	full = own >= w.cfg.limits.maxBufferedBytes
	w.mu.Unlock()
	total := w.cfg.total.Add(int64(size))
	// At the sink-wide cap the poll loop stops taking records (capGate). When that lasts,
	// partitions stuck with most of the total would starve the others: a partition then
	// pauses once it holds its fair share, and the total stays under about twice the cap.
	full = full || (w.cfg.limits.maxTotalBufferedBytes > 0 && w.cfg.capPausing.Load() && total >= int64(w.cfg.limits.maxTotalBufferedBytes) && own >= w.fairShare())
	if full {
		// Fetching pauses: no more records come until this partition commits, so its batch
		// must not wait for MaxBatchWait to pass (nextBatch).
		w.mu.Lock()
		w.held = true
		w.mu.Unlock()
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return full
}

// canResume reports whether a paused partition has drained enough to fetch again: its own
// buffer under half of MaxBufferedBytes, and the sink's total under half of
// MaxTotalBufferedBytes or its own buffer under half of its fair share of it.
func (w *worker) canResume() bool {
	w.mu.Lock()
	own := w.buffered
	w.mu.Unlock()
	if own >= w.cfg.limits.maxBufferedBytes/2 {
		return false
	}
	lim := w.cfg.limits.maxTotalBufferedBytes
	return lim == 0 || w.cfg.total.Load() < int64(lim/2) || own < w.fairShare()/2
}

// fairShare is this partition's share of MaxTotalBufferedBytes: the cap over the workers.
func (w *worker) fairShare() int {
	return w.cfg.limits.maxTotalBufferedBytes / int(max(1, w.cfg.active.Load()))
}

// drop gives back what a worker that has returned still holds: records queued but never
// committed (an abort), so that the sink's total does not keep them.
func (w *worker) drop() {
	w.mu.Lock()
	w.closed = true
	size := w.buffered
	w.buffered, w.q = 0, recordQueue{}
	w.mu.Unlock()
	w.cfg.total.Add(-int64(size))
	w.cfg.active.Add(-1)
}

// settled is told that batch (of memory size) is done with: committed (ok) or abandoned.
// A committed batch's array, when no larger than keptCap, becomes the spare the queue may
// move to at the next batch (queueArray); the plugin has returned, and Record's contract
// lets no one keep the batch's memory.
func (w *worker) settled(batch []Record, size int, ok bool) {
	if ok && w.inflight != nil && len(batch) > 0 && w.inflightAt == &batch[0] && cap(w.inflight) <= w.keptCap() {
		arr := w.inflight[:cap(w.inflight)]
		clear(arr)
		w.mu.Lock()
		if w.spare == nil {
			w.spare = arr[:0]
		}
		w.mu.Unlock()
	}
	w.inflight, w.inflightAt = nil, nil
	w.mu.Lock()
	w.flightTS = time.Time{}
	w.mu.Unlock()
	w.release(size)
}

// keptCap bounds the capacity, in records, of a committed batch's array kept as the spare:
// MaxBatchRecords, what the partition's batches need. Arrays count in MaxBufferedBytes only
// for the records they hold (recordOverhead), and a queue grows far past a batch in a burst
// (a fetch of a partition's backlog): kept, such an array would stay sized for the
// partition's largest burst for its life, in every partition, 128 bytes a record; at 256
// partitions that was most of eosink run's heap (issue 26).
func (w *worker) keptCap() int { return max(1, w.cfg.limits.maxBatchRecords) }

// release gives back the memory of committed (or abandoned) records: size bytes of this
// partition's buffer and of the sink's total.
func (w *worker) release(size int) {
	w.mu.Lock()
	w.buffered -= size
	w.mu.Unlock()
	w.cfg.total.Add(-int64(size))
}

// bufferedBytes is the memory held for the partition (any goroutine).
func (w *worker) bufferedBytes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buffered
}

// run is the worker goroutine. It opens the plugin for the partition, commits batches, and
// closes the plugin when it stops.
func (w *worker) run() {
	defer func() {
		w.dead.Store(true)
		w.drop()
		close(w.done)
	}()
	p := Partition{Topic: w.topic, Partition: w.partition, Epoch: w.epoch, NextOffset: w.next.Load()}
	// A topic that appeared under a pattern subscription may have no route: stop here,
	// before Open, rather than let the plugin see records it has nowhere to write.
	if err := checkRoute(w.cfg.plugin, w.topic, w.cfg.subscription.pattern(w.topic)); err != nil {
		w.fail(&PartitionError{Topic: w.topic, Partition: w.partition, Err: err})
		return
	}
	if err := w.restoreDeadLetters(); err != nil { // the breaker remembers across claims
		if w.ctx.Err() == nil {
			w.fail(&PartitionError{Topic: w.topic, Partition: w.partition, Err: err})
		}
		return
	}
	w.loadOpenDeadLetters()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.cfg.plugin.Close(ctx, p); err != nil {
			w.cfg.log.Warn("plugin close failed", "topic", w.topic, "partition", w.partition, "err", err)
		}
	}()
	if err := w.cfg.plugin.Open(w.ctx, p); err != nil {
		if w.ctx.Err() == nil {
			w.fail(&PartitionError{Topic: w.topic, Partition: w.partition, Err: fmt.Errorf("plugin open: %w", err)})
		}
		return
	}
	for {
		batch, stopping := w.nextBatch()
		if len(batch) == 0 && !stopping { // idle at the end of the partition
			if err := w.skipMarkers(); err != nil {
				if w.ctx.Err() == nil {
					w.fail(err)
				}
				return
			}
			continue
		}
		if len(batch) > 0 {
			size := 0
			for i := range batch {
				size += memSize(&batch[i])
			}
			err := w.apply(batch)
			w.settled(batch, size, err == nil)
			if err != nil {
				if w.ctx.Err() == nil {
					w.fail(err)
				} else { // an abort is not the partition's fault
					w.cfg.log.Info("in-flight batch rolled back: partition revoked or lost", "topic", w.topic,
						"partition", w.partition, "first_offset", batch[0].Offset, "records", len(batch))
				}
				return
			}
		}
		if stopping {
			return
		}
	}
}

// fail reports why the partition stopped: fenced, a handler error, a failed Open, out of
// range (worker goroutine, or the poll goroutine for a worker that has stopped).
func (w *worker) fail(err error) {
	if errors.Is(err, ErrFenced) && w.stopping() {
		// Told to stop on revoke while committing what was queued, and the next owner came
		// first: the partition is no longer ours, so this is no error of ours.
		w.cfg.log.Info("queued batch fenced after the partition was revoked; the new owner applies it", "topic", w.topic,
			"partition", w.partition, "epoch", w.epoch)
		return
	}
	w.cfg.stops.record(w.topic, w.partition, err) // logs it, with the remedy
	if errors.Is(err, ErrFenced) {
		w.cfg.rechecks.request(partitionKey{w.topic, w.partition}) // an operator's reset is claimed again
	}
}

// stopping reports whether the worker was told to stop (revoke, shutdown).
func (w *worker) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// nextBatch waits for a full batch, MaxBatchWait after the first queued record was pushed
// (records that queued while the previous batch committed have waited already), a paused
// partition or a backlog left by the previous batch (held: at once), or a stop.
// stopping is true when the worker should exit after committing the returned batch. It
// returns no batch and stopping false when nothing is queued and the position can move past
// trailing markers (skipMarkers).
func (w *worker) nextBatch() (batch []Record, stopping bool) {
	lim := &w.cfg.limits
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var timeout <-chan time.Time
	expired := false
	w.waitStart = time.Time{}
	for {
		select {
		case <-w.stop:
			stopping = true
		default:
		}
		if w.ctx.Err() != nil {
			return nil, true
		}
		w.mu.Lock()
		n, bytes := 0, 0
		for n < w.q.len() && n < lim.maxBatchRecords {
			sz := recordSize(w.q.at(n))
			if n > 0 && bytes+sz > lim.maxBatchBytes {
				break
			}
			bytes += sz
			n++
		}
		full := n == lim.maxBatchRecords || n < w.q.len() || bytes >= lim.maxBatchBytes || w.held
		if n == 0 && !stopping && w.markersEnd.Load() > w.next.Load() {
			w.mu.Unlock()
			return nil, false // nothing queued: move past the markers at the end (worker_markers.go)
		}
		if n > 0 && w.waitStart.IsZero() {
			w.waitStart = w.queuedAt
		}
		if n > 0 && !expired && !full && !stopping {
			// MaxBatchWait runs from the oldest record's push, not from now: a record that
			// arrived while the previous batch committed has waited that long already.
			if left := time.Until(w.queuedAt.Add(lim.maxBatchWait)); left <= 0 {
				expired = true
			} else if timer == nil {
				timer = time.NewTimer(left)
				timeout = timer.C
			}
		}
		if n > 0 && (full || expired || stopping) {
			w.formedAt = time.Now()
			w.held = false
			// The batch is the queue's array, or a copy in the last committed batch's
			// (settled), so that batches at a steady rate cost no allocation (queue.go).
			var used bool
			batch, w.inflight, used = w.q.take(n, w.spare)
			w.inflightAt, w.flightTS = &batch[0], batch[0].Timestamp
			if used {
				w.spare = nil
			}
			more := w.q.len() > 0
			if more {
				// A backlog: its records came before now and have waited already, so its
				// batch forms at once after this one; its span starts here.
				w.queuedAt, w.held = w.formedAt, true
			}
			w.mu.Unlock()
			// Stopping with more queued: return this batch, come back for the rest.
			return batch, stopping && !more
		}
		w.mu.Unlock()
		if stopping {
			return nil, true
		}
		select {
		case <-w.wake:
		case <-timeout:
			expired = true
		case <-w.stop:
		case <-w.ctx.Done():
		}
	}
}
