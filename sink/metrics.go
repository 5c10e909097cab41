package sink

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
)

// counter is a count kept for Stats and, when Config.Registerer is set, exported to
// Prometheus as well.
type counter struct {
	n atomic.Int64
	c prometheus.Counter
}

func (c *counter) add(v int64) {
	c.n.Add(v)
	if c.c != nil {
		c.c.Add(float64(v))
	}
}

func (c *counter) load() int64 { return c.n.Load() }

// metrics are the sink's counters and, with a Registerer, its Prometheus collectors. All
// metric names start with eosink_ and carry a pipeline label.
type metrics struct {
	records, bytes, batches, retries, fenced, unknownCommits, claims, pauses, capWaits, deadLetters, breakerTrips counter

	retriesByCause *prometheus.CounterVec
	rebalances     *prometheus.CounterVec
	batchRecords   prometheus.Histogram
	commitSeconds  prometheus.Histogram
	lag, buffered  *prometheus.Desc
	lagSeconds     *prometheus.Desc
}

func newMetrics(s *Sink, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{}
	if reg == nil {
		return m, nil
	}
	labels := prometheus.Labels{"pipeline": s.cfg.Pipeline}
	newCounter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "eosink_" + name, Help: help, ConstLabels: labels})
	}
	m.records.c = newCounter("records_applied_total", "Records committed to the database.")
	m.bytes.c = newCounter("bytes_applied_total", "Key and value bytes of the records committed.")
	m.batches.c = newCounter("batches_committed_total", "Transactions committed.")
	m.retries.c = newCounter("batch_retries_total", "Batches retried after a transient error.")
	m.fenced.c = newCounter("fenced_commits_total", "Commits rejected because another claim owns the partition.")
	m.unknownCommits.c = newCounter("unknown_commits_total", "COMMITs whose outcome was settled by reading the offset row back.")
	m.claims.c = newCounter("claims_total", "Partitions claimed (epoch bumps).")
	m.deadLetters.c = newCounter("dead_letters_total", "Poison records written to the dead-letter table.")
	m.breakerTrips.c = newCounter("dead_letter_breaker_trips_total", "Batches refused by the dead-letter circuit breaker, each stopping its partition (reason too_many_dead_letters).")
	m.pauses.c = newCounter("partition_pauses_total", "Times a partition's fetching was paused on a full buffer.")
	m.capWaits.c = newCounter("buffer_cap_waits_total", "Times the sink stopped taking records at the sink-wide buffer cap until commits freed memory.")
	m.retriesByCause = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eosink_batch_retries_by_cause_total",
		Help: "Batch retries by cause: a SQLSTATE, connection, or transient (a plugin's sink.Transient).", ConstLabels: labels}, []string{"cause"})
	m.rebalances = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eosink_rebalance_events_total",
		Help: "Partitions assigned, revoked and lost.", ConstLabels: labels}, []string{"event"})
	m.batchRecords = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "eosink_batch_records",
		Help: "Records per committed batch.", ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(1, 4, 8)})
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "eosink_commit_seconds",
		Help: "Time from BEGIN to the end of COMMIT of a batch.", ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)})
	m.lag = prometheus.NewDesc("eosink_partition_lag", "High watermark last seen by the consumer minus the stored next offset "+
		"(includes transaction markers; frozen while the partition is paused; `eosink lag` is exact).", []string{"topic", "partition"}, labels)
	m.lagSeconds = prometheus.NewDesc("eosink_partition_lag_seconds", "Age of the oldest record fetched and not yet committed: now minus its "+
		"Kafka timestamp (CreateTime or LogAppendTime, by the topic); 0 when none is held. `eosink lag` reads it from the stored position.",
		[]string{"topic", "partition"}, labels)
	m.buffered = prometheus.NewDesc("eosink_partition_buffered_bytes", "Memory of fetched records held, not yet committed (key, value, headers and bookkeeping).",
		[]string{"topic", "partition"}, labels)
	stopped := &stopCollector{s, prometheus.NewDesc("eosink_partition_stopped", "1 for each partition stopped on this instance "+
		"(refused at claim, fenced, handler error, out of range, topic recreated, ...), by reason; `eosink status` shows the remedy.",
		[]string{"topic", "partition", "reason"}, labels)}
	cs := []prometheus.Collector{stopped, m.records.c, m.bytes.c, m.batches.c, m.retries.c, m.fenced.c, m.unknownCommits.c,
		m.claims.c, m.pauses.c, m.capWaits.c, m.deadLetters.c, m.breakerTrips.c, m.retriesByCause, m.rebalances, m.batchRecords, m.commitSeconds, &partitionCollector{s, m}}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, &ConfigError{Field: "Registerer", Reason: "register metrics (one Sink per pipeline per registry): " + err.Error()}
		}
	}
	if in, ok := s.plugin.(Instrumented); ok { // the plugin's own (plugin_observe.go), with the pipeline label
		if err := prometheus.WrapRegistererWith(labels, reg).Register(in.Collector()); err != nil {
			for _, done := range cs {
				reg.Unregister(done)
			}
			return nil, &ConfigError{Field: "Registerer", Reason: "register the plugin's metrics: " + err.Error()}
		}
	}
	return m, nil
}

func (m *metrics) retry(err error) {
	m.retries.add(1)
	if m.retriesByCause == nil {
		return
	}
	cause := "connection"
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		cause = pe.Code
	} else if errors.Is(err, ErrTransient) {
		cause = "transient" // a plugin's Transient error
	}
	m.retriesByCause.WithLabelValues(cause).Inc()
}

func (m *metrics) rebalance(event string, n int) {
	if m.rebalances != nil {
		m.rebalances.WithLabelValues(event).Add(float64(n))
	}
}

func (m *metrics) committed(records, bytes int, seconds float64) {
	m.records.add(int64(records))
	m.bytes.add(int64(bytes))
	m.batches.add(1)
	if m.batchRecords != nil {
		m.batchRecords.Observe(float64(records))
		m.commitSeconds.Observe(seconds)
	}
}

// partitionCollector exports per-partition gauges at scrape time: lag (the broker's high
// watermark, as last seen by the consumer, minus the stored next offset), lag in seconds
// (the age of the oldest record held, lag_seconds.go) and the bytes held in memory for the
// partition.
type partitionCollector struct {
	s *Sink
	m *metrics
}

func (c *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.lag
	ch <- c.m.lagSeconds
	ch <- c.m.buffered
}

func (c *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	now := time.Now()
	for _, w := range s.poll.liveWorkers() {
		p := strconv.Itoa(int(w.partition))
		ch <- prometheus.MustNewConstMetric(c.m.buffered, prometheus.GaugeValue, float64(w.bufferedBytes()), w.topic, p)
		ch <- prometheus.MustNewConstMetric(c.m.lagSeconds, prometheus.GaugeValue, w.lagSeconds(now), w.topic, p)
		s.consumerMu.RLock() // Run closes the consumer only under the write lock
		if cons := s.scraped; cons != nil {
			if _, high, err := cons.GetWatermarkOffsets(w.topic, w.partition); err == nil && high >= 0 {
				ch <- prometheus.MustNewConstMetric(c.m.lag, prometheus.GaugeValue, float64(max(high-w.next.Load(), 0)), w.topic, p)
			}
		}
		s.consumerMu.RUnlock()
	}
}
