package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/cli/internal/pipeline"
	"github.com/eosink/eosink/internal/console"
)

var consoleHelp = help{usage: "eosink console -config FILE",
	desc: "Serve the management API (JSON over HTTP, docs/console.md) for the pipeline config file's database and brokers, " +
		"on its console section's address (default " + pipeline.DefaultConsoleListen + "), until SIGTERM or SIGINT."}

// consoleShutdown bounds the wait for requests in flight after a signal.
const consoleShutdown = 10 * time.Second

// consoleCmd: eosink console -config FILE. It prints the address it serves on, then serves
// until ctx is cancelled, and shuts down gracefully (requests in flight finish, within
// consoleShutdown).
func consoleCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eosink console", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o opsFlags
	fs.StringVar(&o.config, "config", "", "pipeline config file (YAML): its database, brokers, schema, sink (for replays) and console section")
	fs.Usage = func() { consoleHelp.print(fs.Output(), fs) }
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("console: unexpected arguments %v", fs.Args())}
	}
	if o.config == "" {
		fs.Usage()
		return usageError{errors.New("console: -config is required")}
	}
	if err := o.load(fs, stderr, nil); err != nil {
		return err
	}
	p := o.file
	co := p.Console
	tokens, err := consoleTokens(p) // before connecting: a bad file is the operator's to fix first
	if err != nil {
		return err
	}
	c, closeDB, err := o.client(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	c.SetGroupSettings(o.groupSettings())
	c.SetRedactErrorValues(p.Config.RedactErrorValues)
	h, err := consoleHandler(ctx, p, c, tokens)
	if err != nil {
		return err
	}
	lim := defaultHTTPLimits
	lim.write = 2 * time.Minute // a pipeline's lag reads a record per lagging partition, up to 30 s
	srv, err := newHTTPServer(pipeline.HTTPOptions{TLSCertFile: co.TLSCertFile, TLSKeyFile: co.TLSKeyFile}, lim, h)
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil { // newHTTPServer's "http.tls: ...": the console's tls here
			err = inner
		}
		return fmt.Errorf("%s: console.tls: %w", p.File, err)
	}
	ln, err := net.Listen("tcp", co.Listen)
	if err != nil {
		return fmt.Errorf("%s: console.listen: %w", p.File, err)
	}
	scheme := "http"
	if srv.TLSConfig != nil {
		scheme = "https"
	}
	mode := "read-only"
	if co.Mutations {
		mode = "mutations enabled"
	}
	fmt.Fprintf(stdout, "eosink console: serving %s://%s (%s, pipeline %s)\n", scheme, ln.Addr(), mode, term(p.Config.Pipeline))
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() && (srv.TLSConfig == nil || tokens == nil) {
		p.Logger.Warn("console: listening beyond the loopback interface without TLS and tokens: anyone who reaches it reads the pipelines' state",
			"addr", ln.Addr().String(), "tls", srv.TLSConfig != nil, "tokens", tokens != nil)
	}
	served := make(chan error, 1)
	go func() {
		var err error
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		served <- err
	}()
	select {
	case err := <-served:
		return fmt.Errorf("console: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), consoleShutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("console: shutdown: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("console: %w", err)
	}
	fmt.Fprintln(stdout, "eosink console: stopped")
	return nil
}

// consoleTokens loads the console section's tokens_file (nil without one).
func consoleTokens(p *pipeline.Pipeline) (*console.Tokens, error) {
	if p.Console.TokensFile == "" {
		return nil, nil
	}
	t, err := console.LoadTokens(p.Console.TokensFile)
	if err != nil {
		return nil, fmt.Errorf("%s: console.tokens_file: %w", p.File, err)
	}
	return t, nil
}

// consoleHandler builds the console's handler (pages and API) for the file's pipeline and
// console section over c, with the history of the pipelines sampled until ctx ends.
// `eosink console` serves it alone; `eosink run` beside /metrics with http.console.
func consoleHandler(ctx context.Context, p *pipeline.Pipeline, c *admin.Client, tokens *console.Tokens) (http.Handler, error) {
	hist := console.NewHistory(c, 0, 0, p.Logger) // the page's lag and throughput chart, kept for a day
	go hist.Run(ctx)
	return console.New(console.Config{Admin: c, Pipeline: p.Config.Pipeline, Plugin: p.Config.Plugin,
		Mutations: p.Console.Mutations, Tokens: tokens, Logger: p.Logger, History: hist})
}
