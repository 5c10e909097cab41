package relay

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the relay's Prometheus series, all labelled by shard where it applies.
type metrics struct {
	published    *prometheus.CounterVec // eosink_outbox_published_total{shard}
	transactions *prometheus.CounterVec // eosink_outbox_transactions_total{shard,result}
	depth        *prometheus.GaugeVec   // eosink_outbox_depth{shard}
	oldest       *prometheus.GaugeVec   // eosink_outbox_oldest_unpublished_seconds{shard}
	horizon      *prometheus.GaugeVec   // eosink_outbox_horizon_wait_seconds{shard}
	up           *prometheus.GaugeVec   // eosink_outbox_shard_publishing{shard}
	latency      prometheus.Histogram   // eosink_outbox_publish_latency_seconds
	cleaned      prometheus.Counter     // eosink_outbox_cleaned_total
	generations  prometheus.Counter     // eosink_outbox_generations_total
	stopped      *prometheus.GaugeVec   // eosink_outbox_shard_stopped{shard,reason}

	nPublished, nCommitted, nAborted atomic.Int64 // for Stats
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eosink_outbox_published_total",
			Help: "Outbox events published in committed Kafka transactions."}, []string{"shard"}),
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eosink_outbox_transactions_total",
			Help: "Kafka transactions of the relay by result (committed, aborted and retried)."}, []string{"shard", "result"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eosink_outbox_depth",
			Help: "Committed outbox rows not yet published."}, []string{"shard"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eosink_outbox_oldest_unpublished_seconds",
			Help: "Age of the oldest committed outbox row not yet published."}, []string{"shard"}),
		horizon: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eosink_outbox_horizon_wait_seconds",
			Help: "Age of the oldest committed outbox row held back because an older transaction is still in flight (never skipped)."}, []string{"shard"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eosink_outbox_shard_publishing",
			Help: "1 while this relay publishes the shard (its producer is initialised and its position read from Kafka)."}, []string{"shard"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "eosink_outbox_publish_latency_seconds",
			Help:    "From the outbox row's created_at to its Kafka transaction's commit.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		cleaned: prometheus.NewCounter(prometheus.CounterOpts{Name: "eosink_outbox_cleaned_total",
			Help: "Published outbox rows deleted by cleanup."}),
		generations: prometheus.NewCounter(prometheus.CounterOpts{Name: "eosink_outbox_generations_total",
			Help: "Generations committed in the database before a Kafka transaction (docs/outbox.md, \"Rewound databases\")."}),
		stopped: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eosink_outbox_shard_stopped",
			Help: "1 when this relay stopped the shard, by reason: database_rewound, fenced, position_lost, position_ahead, error."}, []string{"shard", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.published, m.transactions, m.depth, m.oldest, m.horizon, m.up, m.latency, m.cleaned, m.generations, m.stopped)
	}
	return m
}

func (m *metrics) stats() Stats {
	return Stats{Published: m.nPublished.Load(), Transactions: m.nCommitted.Load(), Aborted: m.nAborted.Load()}
}
