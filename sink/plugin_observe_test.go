package sink

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// instrumented is a Plugin with a collector of its own.
type instrumented struct {
	handlerPlugin
	c prometheus.Collector
}

func (p instrumented) Collector() prometheus.Collector { return p.c }

// An Instrumented plugin's collector is registered with the sink's metrics and the
// pipeline label; one that cannot be registered (a name the sink's own metrics take) is a
// *ConfigError naming Registerer, and leaves the registry as it was.
func TestInstrumentedPluginRegistered(t *testing.T) {
	h := handlerPlugin(func(context.Context, pgx.Tx, Batch) error { return nil })
	cfg := func(reg prometheus.Registerer, c prometheus.Collector) Config {
		return Config{Brokers: "127.0.0.1:9092", GroupID: "g", Topics: []string{"t"}, Pipeline: "p",
			DatabaseURL: "postgres://u@127.0.0.1:5432/db", Plugin: instrumented{h, c}, Registerer: reg}
	}
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "eosink_test_plugin_gauge", Help: "a plugin's"})
	g.Set(7)
	if _, err := New(cfg(reg, g)); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "eosink_test_plugin_gauge" {
			m := mf.GetMetric()[0]
			found = m.GetGauge().GetValue() == 7 && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetName() == "pipeline" && m.GetLabel()[0].GetValue() == "p"
		}
	}
	if !found {
		t.Errorf("the plugin's gauge is not exported with value 7 and pipeline=\"p\": %v", mfs)
	}

	reg = prometheus.NewRegistry()
	clash := prometheus.NewCounter(prometheus.CounterOpts{Name: "eosink_records_applied_total", Help: "clash"})
	_, err = New(cfg(reg, clash))
	if ce := (*ConfigError)(nil); !errors.As(err, &ce) || ce.Field != "Registerer" {
		t.Fatalf("a clashing plugin collector: %v, want a *ConfigError for Registerer", err)
	}
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		t.Errorf("the failed New left %d families registered", len(mfs))
	}
}
