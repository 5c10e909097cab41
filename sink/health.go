package sink

import (
	"fmt"
	"time"
)

// Ready reports whether Run is consuming: connected to PostgreSQL and Kafka, subscribed, and
// not shutting down. Use it for a readiness probe. Safe to call from any goroutine.
func (s *Sink) Ready() bool { return s.running.Load() }

// Healthy returns an error when the poll loop has not turned for longer than a rebalance
// callback may legitimately block (the larger of RevokeTimeout and ClaimTimeout, plus 10s),
// which means the sink is stuck. Before Run and after it returns, it returns nil. Use it for
// a liveness probe. With Config.UnhealthyOnStoppedPartition it also fails while a partition
// is stopped on this instance, naming the partition and the stop reason only (never the
// error's text, which can hold record values). Safe to call from any goroutine.
func (s *Sink) Healthy() error {
	if !s.running.Load() {
		return nil
	}
	limit := max(s.cfg.RevokeTimeout, s.cfg.ClaimTimeout) + 10*time.Second
	if since := s.clock.since(); since > limit {
		return fmt.Errorf("eosink: the consumer loop has not turned for %s (limit %s)", since.Round(time.Second), limit)
	}
	if s.cfg.UnhealthyOnStoppedPartition {
		// Only the partition and the reason: the error's text can hold record values, and
		// /healthz is served without authentication. PartitionErrors has the whole error.
		for k, st := range s.stops.stoppedPartitions() {
			return fmt.Errorf("eosink: partition %s[%d] stopped (%s); eosink status shows why", k.topic, k.partition, st.reason)
		}
	}
	return nil
}

// clockStart is the origin of the poll loop's timestamps. Durations measured from it use the
// monotonic clock, so that a wall-clock step never makes Healthy fail or pass wrongly.
var clockStart = time.Now()
