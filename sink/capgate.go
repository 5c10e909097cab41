package sink

import (
	"sync/atomic"
	"time"
)

// capGate decides what the poll loop does at MaxTotalBufferedBytes (the sink-wide total of
// buffered records, workerConfig.total).
//
// At the cap the loop stops taking records from the consumer until commits bring the total
// under it; librdkafka keeps what it prefetched, within its own bounded queue, and fetches
// again once that queue has room. Pausing partitions costs more with librdkafka: a pause
// drops the partition's prefetched records, and a resumed partition waits for its broker
// thread to decide to fetch again, up to a second when every partition was paused, so that
// large records whose buffers fill in a batch or two would lose much of their rate to it.
//
// When the total stays at the cap for capGrace, a partition stuck in a slow handler holds it
// and the others must not wait on it: pausing turns on, and push pauses a partition once it
// holds its fair share, as before; the loop polls again. Pausing turns off when the total is
// under half of the cap. Owned by the poll goroutine; pausing is read by push.
type capGate struct {
	since   time.Time // when the total reached the cap; zero when under it
	pausing *atomic.Bool
}

// hold reports whether the poll loop should not take records now.
func (g *capGate) hold(total, limit int64, now time.Time) bool {
	if limit <= 0 {
		return false
	}
	if total < limit {
		g.since = time.Time{}
		if total < limit/2 {
			g.pausing.Store(false)
		}
		return false
	}
	if g.pausing.Load() {
		return false // stuck partitions are paused on their share; the others go on
	}
	if g.since.IsZero() {
		g.since = now
	}
	if now.Sub(g.since) < capGrace {
		return true
	}
	g.pausing.Store(true)
	return false
}
