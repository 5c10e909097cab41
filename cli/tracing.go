package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/eosink/eosink/cli/internal/pipeline"
)

// tracingShutdownTimeout bounds the flush of the spans still queued when eosink run stops,
// so that a receiver that does not answer cannot hold the exit.
const tracingShutdownTimeout = 5 * time.Second

// exportErrorInterval is how often at most an export error is logged.
const exportErrorInterval = time.Minute

// newTracerProvider builds the TracerProvider of the tracing section: a batch span
// processor (its queue drops spans when full, so a slow or absent receiver never blocks a
// batch) exporting over OTLP/HTTP with protobuf, sampling parent-based at o.Sampling, with
// a resource of service.name and eosink.pipeline. Export errors are logged at most once a
// minute (with the count of the others), never with the headers. shutdown flushes the
// queued spans and stops the exporter, within tracingShutdownTimeout.
func newTracerProvider(o *pipeline.TracingOptions, pipelineName string, log *slog.Logger, redact func(string) string) (tp *sdktrace.TracerProvider, shutdown func(), err error) {
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpointURL(o.Endpoint),
		otlptracehttp.WithTimeout(o.Timeout),
	}
	// The section's headers replace OTEL_EXPORTER_OTLP_HEADERS; without them the variable's
	// apply (the exporter reads it).
	if len(o.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(o.Headers))
	}
	if o.CAFile != "" || o.CertFile != "" || o.InsecureSkipVerify {
		conf, err := tracingTLS(o)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, otlptracehttp.WithTLSClientConfig(conf))
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", o.ServiceName),
		attribute.String("eosink.pipeline", pipelineName),
	)
	otel.SetErrorHandler(&exportErrors{log: log, endpoint: o.Endpoint, redact: redact})
	tp = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.Sampling))),
	)
	shutdown = func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not flushed at exit", "endpoint", o.Endpoint, "err", redact(err.Error()))
		}
	}
	return tp, shutdown, nil
}

// tracingTLS is the exporter's TLS client configuration: tls.ca_file's authorities instead
// of the system's, tls.cert_file and tls.key_file as the client certificate.
func tracingTLS(o *pipeline.TracingOptions) (*tls.Config, error) {
	conf := &tls.Config{InsecureSkipVerify: o.InsecureSkipVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // off unless asked for
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tracing.tls: client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tracing.tls.ca_file: %w", err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tracing.tls.ca_file: %s holds no PEM certificate", o.CAFile)
		}
	}
	return conf, nil
}

// exportErrors is OpenTelemetry's error handler while eosink run traces: it logs the first
// error, then at most one a minute with the number left out since the last one.
type exportErrors struct {
	log      *slog.Logger
	endpoint string
	redact   func(string) string // the file's secrets (the headers' values) out of the text

	mu      sync.Mutex
	last    time.Time
	dropped int
}

func (h *exportErrors) Handle(err error) {
	h.mu.Lock()
	now := time.Now()
	if !h.last.IsZero() && now.Sub(h.last) < exportErrorInterval {
		h.dropped++
		h.mu.Unlock()
		return
	}
	skipped := h.dropped
	h.last, h.dropped = now, 0
	h.mu.Unlock()
	h.log.Warn("tracing: exporting spans failed; the pipeline goes on, spans may be lost",
		"endpoint", h.endpoint, "err", h.redact(err.Error()), "errors_not_logged", skipped, "next_log_after", exportErrorInterval)
}
