package sink

import "github.com/prometheus/client_golang/prometheus"

// CommitObserver is implemented by plugins that act once their writes have committed: the
// cdc plugin moves its source lag gauges (eosink_cdc_source_lag_seconds) there, since a
// Write's work may still roll back. Committed is called after each COMMIT that held the
// plugin's writes, a COMMIT whose unknown outcome was settled as committed included, with
// the new stored next offset of each partition the transaction moved: one for a batch, one
// or more for a set's transaction (Sequencer). It runs on the committing goroutine (a
// partition's, or the set's), before the next batch of those partitions begins, so it must
// be quick and must not block. It is never called for a transaction that rolled back.
type CommitObserver interface {
	Committed(offsets []Offset)
}

// Instrumented is implemented by plugins with Prometheus metrics of their own. With
// Config.Registerer, New registers the plugin's Collector there beside the sink's
// metrics, each of its metrics with the pipeline label the sink's carry; a registration
// error is New's *ConfigError, as for the sink's. Without a Registerer it is not called.
type Instrumented interface {
	Collector() prometheus.Collector
}

// notifyCommitted tells the plugin, when it is a CommitObserver, that offsets committed.
func notifyCommitted(p Plugin, offsets ...Offset) {
	if o, ok := p.(CommitObserver); ok {
		o.Committed(offsets)
	}
}
