package sink

import (
	"errors"
	"time"
)

// tries is the isolate-and-retry loop of one batch (worker goroutine): how the batch is
// tried, one transaction a try (worker.commit), until it commits. What a failed try leads to
// is decided here, in next:
//
//   - poison in the write (a *PoisonError, SQLSTATE class 22 or 23, 54000), with OnPoison
//     DeadLetter: at once again, isolating the poison records in savepoints (isolate.go);
//   - a data error raised by COMMIT itself (a deferred constraint), with DeadLetter: at once
//     again, isolating with the deferred constraints checked at the end of each part;
//   - a transient error: again from the same position after the backoff (RetryBackoff
//     doubling to MaxRetryBackoff), isolating still if the try did;
//   - anything else (fenced, a handler error, poison that isolation cannot help, an abort):
//     the error that stops the partition.
//
// A try that meets poison asks isolates whether isolating comes next; it then ends with
// errIsolate or errIsolateAtCommit (the try's error, as its span records it), which next
// turns into the isolating try. Isolation is never counted as a retry.
type tries struct {
	attempt       int  // the try running, from 1
	isolate       bool // write in savepoints, dead-lettering poison records
	checkDeferred bool // with isolate: check the deferred constraints at the end of each part
	backoff       time.Duration
}

// isolates reports whether poison err, met by the try's write (atCommit false) or raised by
// its COMMIT (atCommit true), is isolated by the next try: only under DeadLetter, once for
// the write (isolate) and once for COMMIT (checkDeferred).
func (t *tries) isolates(policy PoisonPolicy, err error, atCommit bool) bool {
	if policy != DeadLetter || !IsPoison(err) {
		return false
	}
	if atCommit {
		return !t.checkDeferred
	}
	return !t.isolate
}

// next decides what follows the failed try that returned err: nil to try again, at once
// (isolating) or after the backoff, or the error that stops the partition.
func (t *tries) next(w *worker, batch []Record, err error) error {
	switch {
	case errors.Is(err, errIsolateAtCommit) && !t.checkDeferred:
		// A deferred constraint failed at COMMIT: isolate again, checking the deferred
		// constraints at the end of each part.
		w.cfg.log.Info("batch failed a deferred constraint at COMMIT; writing it again in savepoints with deferred constraints checked per part",
			"topic", w.topic, "partition", w.partition, "first_offset", batch[0].Offset, "records", len(batch))
		t.isolate, t.checkDeferred = true, true
		return nil
	case errors.Is(err, errIsolate) && !t.isolate:
		// Poison with the DeadLetter policy: at once, again, isolating it. A retry after
		// a transient error keeps isolating.
		w.cfg.log.Info("batch holds a poison record; writing it again in savepoints", "topic", w.topic,
			"partition", w.partition, "first_offset", batch[0].Offset, "records", len(batch))
		t.isolate = true
		return nil
	case !isRetryable(err) || w.ctx.Err() != nil:
		return err
	}
	w.cfg.log.Warn("batch failed, retrying", "topic", w.topic, "partition", w.partition,
		"first_offset", batch[0].Offset, "attempt", t.attempt, "backoff", t.backoff, "err", err)
	w.cfg.m.retry(err)
	return w.backoff(&t.backoff)
}

// apply commits one batch, retrying transient errors with backoff and isolating poison
// (tries) until it commits, the partition is fenced, the handler fails for good, or the
// worker is aborted.
func (w *worker) apply(batch []Record) error {
	t := tries{backoff: w.cfg.retryBackoff}
	for t.attempt = 1; ; t.attempt++ {
		err := w.commitBatch(batch, &t)
		if err == nil {
			return nil
		}
		if err := t.next(w, batch, err); err != nil {
			return err
		}
	}
}

// backoff waits *d, or less if the worker is aborted (then it returns the context's error),
// and doubles *d up to MaxRetryBackoff.
func (w *worker) backoff(d *time.Duration) error {
	t := time.NewTimer(*d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
	*d = min(2**d, w.cfg.maxRetryBackoff)
	return nil
}
