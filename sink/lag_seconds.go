package sink

import "time"

// Lag in seconds (eosink_partition_lag_seconds): the age of the oldest record of a partition
// that this instance has fetched and not yet committed, the batch in flight's first record or
// else the first queued one: now minus its Kafka timestamp (CreateTime, the producer's, or
// LogAppendTime, the broker's, by the topic's message.timestamp.type). Like PostgreSQL's
// replay_lag, it measures how far behind the applied state is in time rather than in records;
// it is 0 when the partition holds no fetched record (caught up, or its first fetch after a
// claim has not arrived yet: `eosink lag` reads the record at the stored position instead).

// oldestHeld is the Kafka timestamp of the oldest record the worker holds, fetched and not
// yet committed; zero when it holds none or that record has no timestamp. Any goroutine.
func (w *worker) oldestHeld() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.flightTS.IsZero() {
		return w.flightTS
	}
	if w.q.len() > 0 {
		return w.q.at(0).Timestamp
	}
	return time.Time{}
}

// lagSeconds is the age, as of now, of the oldest record the worker holds (oldestHeld), 0
// when it holds none; a timestamp ahead of now (a producer's clock, an explicit CreateTime)
// counts as 0.
func (w *worker) lagSeconds(now time.Time) float64 {
	ts := w.oldestHeld()
	if ts.IsZero() {
		return 0
	}
	return max(now.Sub(ts).Seconds(), 0)
}
