package cdc

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/sink"
)

// Source lag: how far the replica is behind its source in time, as PostgreSQL's replay_lag
// is for a standby. A change event's source.ts_ms is when the source transaction committed
// (for a snapshot read: when it was read), while a record's Kafka timestamp is when Kafka
// Connect produced it, after Debezium's own delay; the sink's eosink_partition_lag_seconds
// measures from the latter. Per partition the plugin exports:
//
//   - eosink_cdc_source_lag_seconds: at the COMMIT that applied a batch (or a set's
//     transaction), now minus the newest source commit time among the changes it applied:
//     the age of the newest source change the replica held when it applied it. It stays
//     at that value until the next commit, so an idle replica shows its last value.
//   - eosink_cdc_source_applied_timestamp_seconds: that newest source commit time, as a
//     unix time; time() - it is the replica's age at any moment, idle or not.
//
// A write records the newest commit time of each partition it applied (the rewind check's
// watch already holds it: no cost per record); Committed (sink.CommitObserver) makes it
// the applied one. A write that fails records nothing; one whose transaction rolls back
// is replaced by the next write of the same offsets (a retry, a poison isolation writing
// parts again), which starts at or before the offsets it recorded.

// sourceLag holds, per partition, the newest source commit time written and not yet
// committed, and the one applied at the last commit.
type sourceLag struct {
	mu    sync.Mutex
	parts map[sink.Partition]*partLag // Epoch and NextOffset zero: topic and partition only

	lagDesc, appliedDesc *prometheus.Desc
}

// partLag is one partition's source lag state.
type partLag struct {
	pending           bool
	first, last, tsMs int64 // the written records' first and last offsets, their newest ts_ms

	applied    bool
	appliedMs  int64   // the newest ts_ms committed since the partition came to this instance
	lagSeconds float64 // now minus appliedMs at the last commit
}

func newSourceLag() *sourceLag {
	labels := []string{"topic", "partition"}
	return &sourceLag{parts: map[sink.Partition]*partLag{},
		lagDesc: prometheus.NewDesc("eosink_cdc_source_lag_seconds", "At the commit that applied a cdc batch: now minus the "+
			"newest source commit time (Debezium source.ts_ms) among its changes; kept until the next commit.", labels, nil),
		appliedDesc: prometheus.NewDesc("eosink_cdc_source_applied_timestamp_seconds", "The newest source commit time "+
			"(Debezium source.ts_ms) the replica has applied, as a unix time: time() minus it is the replica's age, idle or not.", labels, nil)}
}

// written notes that a write of k's offsets first..last applied changes whose newest source
// commit time is tsMs (0: none carried one). A write that starts at or before the offsets
// noted is of a transaction that replaced theirs (rolled back): it replaces them.
func (l *sourceLag) written(k sink.Partition, first, last, tsMs int64) {
	if tsMs <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.parts[k]
	if e == nil {
		e = &partLag{}
		l.parts[k] = e
	}
	if !e.pending || first <= e.last {
		e.pending, e.first, e.tsMs = true, first, tsMs
	} else {
		e.tsMs = max(e.tsMs, tsMs)
	}
	e.last = last
}

// Committed makes the written commit time of each partition the applied one
// (sink.CommitObserver): offsets are the partitions' new stored next offsets.
func (p *CDC) Committed(offsets []sink.Offset) {
	l := p.lag
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range offsets {
		e := l.parts[sink.Partition{Topic: o.Topic, Partition: o.Partition}]
		if e == nil || !e.pending || e.last >= o.Next {
			continue // nothing written, or written past what committed (not this transaction's)
		}
		e.pending = false
		if !e.applied || e.tsMs > e.appliedMs {
			e.appliedMs = e.tsMs // never back: a replay of older changes leaves the replica's rows as new
		}
		e.applied = true
		e.lagSeconds = max(now.Sub(time.UnixMilli(e.appliedMs)).Seconds(), 0)
	}
}

// forget drops k's state: the partition left this instance.
func (l *sourceLag) forget(k sink.Partition) {
	l.mu.Lock()
	delete(l.parts, k)
	l.mu.Unlock()
}

// Collector returns the plugin's source lag gauges (sink.Instrumented).
func (p *CDC) Collector() prometheus.Collector { return p.lag }

// Describe implements prometheus.Collector.
func (l *sourceLag) Describe(ch chan<- *prometheus.Desc) {
	ch <- l.lagDesc
	ch <- l.appliedDesc
}

// Collect implements prometheus.Collector: the gauges of each partition with a commit.
func (l *sourceLag) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, e := range l.parts {
		if !e.applied {
			continue
		}
		part := strconv.Itoa(int(k.Partition))
		ch <- prometheus.MustNewConstMetric(l.lagDesc, prometheus.GaugeValue, e.lagSeconds, k.Topic, part)
		ch <- prometheus.MustNewConstMetric(l.appliedDesc, prometheus.GaugeValue, float64(e.appliedMs)/1000, k.Topic, part)
	}
}

// noteWritten records, after a write succeeded, each partition's newest source commit
// time among the changes the write saw (the rewind check's watches).
func (p *CDC) noteWritten(ws *watches) {
	for _, k := range ws.order {
		w := ws.by[k]
		if len(w.seen) == 0 {
			continue
		}
		p.lag.written(k, w.seen[0].offset, w.seen[len(w.seen)-1].offset, w.max.ts)
	}
}
