// Package sinkhttp serves a sink's Prometheus metrics and its probes over HTTP, for
// orchestrators and Prometheus. `eosink run` serves it on the config file's http address; a
// program of its own mounts Handler on a server of its own.
package sinkhttp

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Probes is what Handler serves the probes from; *sink.Sink implements it.
type Probes interface {
	// Healthy returns an error while the sink is stuck (sink.Sink.Healthy).
	Healthy() error
	// Ready reports whether the sink is consuming (sink.Sink.Ready).
	Ready() bool
}

// Handler serves /metrics from gatherer (nil: no /metrics), /healthz (s.Healthy: 503 with
// its error's text when it fails) and /readyz (s.Ready: 503 when not consuming). Mount it on
// a server of your own, or use it as the server's handler.
func Handler(s Probes, gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	if gatherer != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.Healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.Ready() {
			http.Error(w, "not consuming", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
