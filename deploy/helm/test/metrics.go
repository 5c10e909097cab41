package charttest

import (
	"context"
	"fmt"
	"regexp"
	"sync"

	"github.com/eosink/eosink/sink"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// This file finds the metrics eosink's sink exports, from the code: it registers them the
// way `eosink run` does (sink.New with a Registerer) and reads what was registered, so that
// the dashboard and the alert rules are checked against the sink this checkout builds, not a
// copy of its list.

var (
	exportedOnce sync.Once
	exported     map[string]string // series name: its family's type (counter, gauge, histogram, ...)
	exportedErr  error
)

// ExportedMetrics returns the names a query can select from the sink's metrics, each with the
// type of its family. A histogram's family gives NAME_bucket, NAME_sum and NAME_count (not
// NAME); the others give their own name.
func ExportedMetrics() (map[string]string, error) {
	exportedOnce.Do(func() { exported, exportedErr = exportedMetrics() })
	return exported, exportedErr
}

// recorder is a Registerer that keeps the collectors registered through it.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// fqName reads a Desc's name from its String form, the one place client_golang shows it.
var fqName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

func exportedMetrics() (map[string]string, error) {
	rec := &recorder{Registry: prometheus.NewRegistry()}
	// A config that validates; New does no I/O.
	_, err := sink.New(sink.Config{
		Brokers: "127.0.0.1:9092", GroupID: "g", Topics: []string{"t"}, Pipeline: "p",
		DatabaseURL: "postgres://u@127.0.0.1:5432/db",
		Handler:     func(context.Context, pgx.Tx, sink.Batch) error { return nil },
		Registerer:  rec,
	})
	if err != nil {
		return nil, fmt.Errorf("sink.New: %w", err)
	}
	// The families a scrape shows with no partitions and no events (the plain counters and
	// histograms), for their types.
	mfs, err := rec.Gather()
	if err != nil {
		return nil, err
	}
	types := map[string]dto.MetricType{}
	for _, mf := range mfs {
		types[mf.GetName()] = mf.GetType()
	}
	out := map[string]string{}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				return nil, fmt.Errorf("no name in %s", d)
			}
			name := m[1]
			switch t, ok := types[name]; {
			case ok && t == dto.MetricType_HISTOGRAM:
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					out[name+s] = "histogram"
				}
			case ok && t == dto.MetricType_SUMMARY:
				out[name], out[name+"_sum"], out[name+"_count"] = "summary", "summary", "summary"
			case ok:
				out[name] = map[dto.MetricType]string{dto.MetricType_COUNTER: "counter", dto.MetricType_GAUGE: "gauge"}[t]
			default: // a vector or a collector that shows series only once it has some: not a histogram here
				out[name] = "counter or gauge"
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the sink registered no metrics")
	}
	return out, nil
}
