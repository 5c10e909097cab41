package cli

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/cli/internal/pipeline"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/sinkhttp"
)

// runHTTPHandler is what eosink run's http section serves: /metrics, /healthz and /readyz,
// and with http.console the console's pages and API at / (docs/console.md), over a client
// of the pipeline's own database, schema and brokers. close ends the console's history and
// its database pool.
func runHTTPHandler(ctx context.Context, p *pipeline.Pipeline, s *sink.Sink, reg prometheus.Gatherer) (h http.Handler, close func(), err error) {
	probes := sinkhttp.Handler(s, reg)
	if !p.HTTPOptions.Console {
		return probes, func() {}, nil
	}
	tokens, err := consoleTokens(p)
	if err != nil {
		return nil, nil, err
	}
	o := opsFlags{file: p, dbURL: p.Config.DatabaseURL, schema: p.Config.Schema, brokers: p.Config.Brokers}
	c, closeDB, err := o.client(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: http.console: %w", p.File, err)
	}
	c.SetGroupSettings(o.groupSettings())
	c.SetRedactErrorValues(p.Config.RedactErrorValues)
	cctx, stop := context.WithCancel(ctx)
	ch, err := consoleHandler(cctx, p, c, tokens)
	if err != nil {
		stop()
		closeDB()
		return nil, nil, fmt.Errorf("%s: http.console: %w", p.File, err)
	}
	mux := http.NewServeMux()
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		mux.Handle(path, probes)
	}
	mux.Handle("/", ch)
	return mux, func() { stop(); closeDB() }, nil
}
