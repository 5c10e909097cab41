package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eosink/eosink/cli/internal/pipeline"
	"github.com/eosink/eosink/sink"
)

// runCmd: eosink run -config FILE [-validate] [-progress DURATION].
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eosink run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "pipeline config file (YAML; see docs/pipeline-config.md)")
	validate := fs.Bool("validate", false, "check the file and build its plugin without connecting; print a summary and exit. "+
		"An unset ${VAR} is a warning here (an error for run)")
	progress := time.Duration(-1)
	fs.Func("progress", "log a progress line (records per second, lag, dead letters) at this `interval`; 0 turns it off "+
		"(default: the file's log.progress, else 30s)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return fmt.Errorf("%q is not a duration of 0 or more (such as 30s, 1m; 0 turns the line off)", s)
		}
		progress = d
		return nil
	})
	h := help{usage: "eosink run -config FILE [-validate] [-progress DURATION]",
		desc: "Run the pipeline FILE describes until SIGTERM or SIGINT, then drain (in-flight batches commit) and exit 0."}
	fs.Usage = func() { h.print(fs.Output(), fs) }
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("run: unexpected arguments %v", fs.Args())}
	}
	if *config == "" {
		fs.Usage()
		return usageError{errors.New("run: -config is required")}
	}
	// -validate checks a file where it is written, often without the environment it runs in:
	// an unset variable is a warning there, and its field goes unchecked.
	p, err := pipeline.Load(*config, pipeline.Options{LogOutput: stderr, AllowUnset: *validate})
	if err != nil {
		return err
	}
	if *validate {
		for _, w := range p.Warnings {
			fmt.Fprintf(stderr, "eosink: warning: %s\n", w)
		}
		// sink.New validates the Config once more and does no I/O without a Registerer. With
		// unset variables the load checked what it could (sink.Config.Validate without the
		// fields they leave empty), and sink.New would only refuse those fields.
		if len(p.Warnings) == 0 {
			if _, err := p.NewSink(nil); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "%s: valid\n", p.File)
		if len(p.Warnings) > 0 {
			fmt.Fprintf(stdout, "(unchecked: %d field(s) with unset environment variables; run needs them set)\n", len(p.Warnings))
		}
		return p.Summary(stdout)
	}
	if progress < 0 {
		progress = p.Progress
	}

	log := p.Logger
	if p.Tracing != nil {
		tp, shutdown, err := newTracerProvider(p.Tracing, p.Config.Pipeline, log, p.Redact)
		if err != nil {
			return fmt.Errorf("%s: %w", p.File, err)
		}
		// Deferred first, so it runs last: after the drain and the HTTP server, it flushes
		// the spans of the last batches.
		defer shutdown()
		p.Config.TracerProvider = tp
		log.Info("tracing: exporting spans over OTLP/HTTP", "endpoint", p.Tracing.Endpoint, "sampling", p.Tracing.Sampling,
			"service_name", p.Tracing.ServiceName)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s, err := p.NewSink(reg)
	if err != nil {
		return err
	}
	if p.HTTP != "" {
		ln, err := net.Listen("tcp", p.HTTP)
		if err != nil {
			return fmt.Errorf("%s: http: %w", p.File, err)
		}
		handler, closeHandler, err := runHTTPHandler(ctx, p, s, reg)
		if err != nil {
			ln.Close()
			return err
		}
		defer closeHandler()
		srv, err := newHTTPServer(p.HTTPOptions, defaultHTTPLimits.with(p.HTTPOptions), handler)
		if err != nil {
			ln.Close()
			return fmt.Errorf("%s: %w", p.File, err)
		}
		served := make(chan struct{})
		go func() {
			defer close(served)
			var err error
			if srv.TLSConfig != nil {
				err = srv.ServeTLS(ln, "", "")
			} else {
				err = srv.Serve(ln)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server stopped", "addr", ln.Addr().String(), "err", err)
			}
		}()
		o := p.HTTPOptions
		auth := "none"
		switch {
		case o.BearerToken != "":
			auth = "bearer token"
		case o.Username != "":
			auth = "basic"
		}
		log.Info("serving /metrics, /healthz and /readyz", "addr", ln.Addr().String(), "tls", o.TLSCertFile != "", "metrics_auth", auth, "console", o.Console)
		if auth != "none" && o.TLSCertFile == "" {
			log.Warn("http: /metrics credentials travel in clear without http.tls")
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			<-served
		}()
	}
	if pct, ok := runGCPercent(os.Getenv("GOGC")); ok {
		debug.SetGCPercent(pct)
	}
	log.Info("pipeline starting", "file", p.File, "pipeline", p.Config.Pipeline, "sink", p.PluginType,
		"topics", p.Config.Topics, "group", p.Config.GroupID, "on_poison", p.Config.OnPoison.String())
	stopProgress := startProgress(log.With("pipeline", p.Config.Pipeline), progress, s, reg)
	err = s.Run(ctx)
	stopProgress()
	if nm := (*sink.NotMigratedError)(nil); errors.As(err, &nm) {
		// The remedy in the file's words.
		return fmt.Errorf("run %s: %s: run `eosink migrate up -config %s`, or set database.auto_migrate: true", p.File, nm.Problem(), p.File)
	}
	if err != nil {
		return fmt.Errorf("run %s: %s", p.File, strings.TrimPrefix(p.Redact(sink.ErrorText(err, p.Config.RedactErrorValues)), "eosink: "))
	}
	if errs := s.PartitionErrors(); len(errs) > 0 {
		for _, err := range errs {
			log.Warn("partition was stopped", "err", p.Redact(sink.ErrorText(err, p.Config.RedactErrorValues)))
		}
	}
	log.Info("pipeline stopped after draining", "pipeline", p.Config.Pipeline)
	return nil
}

// startProgress logs one line every interval (none when it is 0) until the returned function
// is called: records applied per second over the interval, the lag summed over the
// partitions this instance holds and the largest lag in seconds, and dead letters; while
// the group assigns this instance nothing, for how long it has waited. It reads the sink's counters
// (Sink.Stats) and the lag gauge from reg, as /metrics does; the engine does no extra work.
func startProgress(log *slog.Logger, interval time.Duration, s *sink.Sink, reg prometheus.Gatherer) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		prev, last := s.Stats(), time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				st := s.Stats()
				log.Info("progress", progressArgs(prev, st, now.Sub(last), reg)...)
				prev, last = st, now
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// progressArgs are the progress line's attributes for the counters of one interval.
func progressArgs(prev, cur sink.Stats, elapsed time.Duration, reg prometheus.Gatherer) []any {
	rate := 0.0
	if elapsed > 0 {
		rate = float64(cur.Records-prev.Records) / elapsed.Seconds()
	}
	lag, partitions := gaugeSum(reg, "eosink_partition_lag")
	args := []any{
		"records_per_second", math.Round(rate*10) / 10,
		"records", cur.Records,
		"lag", lag,
		"lag_seconds", math.Round(gaugeMax(reg, "eosink_partition_lag_seconds")*10) / 10,
		"partitions", partitions,
		"dead_letters", cur.DeadLetters,
		"dead_letters_in_interval", cur.DeadLetters - prev.DeadLetters,
	}
	if cur.Assigned == 0 && !cur.UnassignedSince.IsZero() {
		waited := time.Since(cur.UnassignedSince).Round(time.Second)
		args = append(args, "waiting", fmt.Sprintf("for the group to assign partitions, %s (after a kill, up to the group's "+
			"session.timeout.ms from the old member's last heartbeat; a member beyond the partition count stays idle; "+
			"`eosink status` shows who holds them)", waited),
			"waiting_seconds", int64(waited.Seconds()))
	}
	return args
}

// gaugeMax is the largest value of a gauge's series in reg, 0 when it has none.
func gaugeMax(reg prometheus.Gatherer, name string) float64 {
	if reg == nil {
		return 0
	}
	mfs, _ := reg.Gather()
	top := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				top = max(top, m.GetGauge().GetValue())
			}
		}
	}
	return top
}

// gaugeSum sums the series of a gauge in reg and counts them.
func gaugeSum(reg prometheus.Gatherer, name string) (sum int64, series int) {
	if reg == nil {
		return 0, 0
	}
	mfs, err := reg.Gather()
	if err != nil && len(mfs) == 0 {
		return 0, 0
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += int64(m.GetGauge().GetValue())
			series++
		}
	}
	return sum, series
}

// runGCPercent is the Go garbage collector's target eosink run sets, and whether it sets one:
// 50 when the environment's GOGC is unset (empty), so that the heap grows to 1.5 times what
// is live between collections rather than twice; a GOGC of the operator's wins. Most of the
// heap is records in flight, bounded by batch.max_total_buffered_bytes. At 256 partitions of
// small records it kept the peak RSS at 180 to 211 MiB, against 172 to 243 at Go's default,
// for about a tenth more of eosink's CPU (issue 26; docs/operations.md#memory).
func runGCPercent(env string) (int, bool) {
	if env != "" {
		return 0, false
	}
	return 50, true
}
