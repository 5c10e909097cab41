package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eosink/eosink/cli/internal/pipeline"
)

// runCmd: eosink run -config FILE [-validate].
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eosink run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "pipeline config file (YAML; see docs/pipeline-config.md)")
	validate := fs.Bool("validate", false, "check the file and build its plugin without connecting; print a summary and exit")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: eosink run -config FILE [-validate]

Runs the pipeline FILE describes until SIGTERM or SIGINT, then drains: in-flight batches
commit, the consumer leaves its group, and the exit code is 0. A second signal exits at once.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("run: unexpected arguments %v", fs.Args())}
	}
	if *config == "" {
		fs.Usage()
		return usageError{errors.New("run: -config is required")}
	}
	p, err := pipeline.Load(*config, pipeline.Options{LogOutput: stderr})
	if err != nil {
		return err
	}
	if *validate {
		// sink.New validates the Config once more and does no I/O without a Registerer.
		if _, err := p.NewSink(nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: valid\n", p.File)
		return p.Summary(stdout)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s, err := p.NewSink(reg)
	if err != nil {
		return err
	}
	log := p.Logger
	if p.HTTP != "" {
		ln, err := net.Listen("tcp", p.HTTP)
		if err != nil {
			return fmt.Errorf("%s: http: %w", p.File, err)
		}
		srv := &http.Server{Handler: s.HTTPHandler(reg), ReadHeaderTimeout: 10 * time.Second}
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server stopped", "addr", ln.Addr().String(), "err", err)
			}
		}()
		log.Info("serving /metrics, /healthz and /readyz", "addr", ln.Addr().String())
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			<-served
		}()
	}
	log.Info("pipeline starting", "file", p.File, "pipeline", p.Config.Pipeline, "sink", p.PluginType,
		"topics", p.Config.Topics, "group", p.Config.GroupID, "on_poison", p.Config.OnPoison.String())
	if err := s.Run(ctx); err != nil {
		return fmt.Errorf("run %s: %s", p.File, strings.TrimPrefix(p.Redact(err.Error()), "eosink: "))
	}
	if errs := s.PartitionErrors(); len(errs) > 0 {
		for _, err := range errs {
			log.Warn("partition was stopped", "err", p.Redact(err.Error()))
		}
	}
	log.Info("pipeline stopped after draining", "pipeline", p.Config.Pipeline)
	return nil
}
