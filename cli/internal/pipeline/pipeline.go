// Package pipeline loads a pipeline config file, the YAML document `eosink run -config`
// takes, into a sink.Config with its plugin. The format is documented in
// docs/pipeline-config.md.
//
// Loading does no I/O besides reading the file and the files its ${file:...} references
// name: everything is validated before anything connects, and every error names the field's
// path in the file. Errors and summaries never hold the database URL, Kafka property values,
// or anything read from a file.
package pipeline

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/plugin"
)

// Options tune Load and Parse.
type Options struct {
	// LogOutput receives the logs of the logger the file configures (its log section).
	// Defaults to os.Stderr.
	LogOutput io.Writer
	// LookupEnv reads the environment for ${NAME} references. Defaults to os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// AllowUnset makes an unset ${NAME} (without a default) a warning in Pipeline.Warnings
	// instead of an error: the field is left unset and not checked, and errors that only its
	// absence causes (a required field, the plugin refusing its section) are not reported.
	// For checking a file without its environment (eosink run -validate); such a Pipeline
	// is not for running: its Config lacks those values.
	AllowUnset bool
}

// Pipeline is a loaded, valid pipeline config file.
type Pipeline struct {
	// File is the file's name as given to Load.
	File string
	// Config is ready for sink.New (see NewSink), with the sink section's plugin in
	// Config.Plugin and the logger in Config.Logger; Registerer is unset. Pipeline, Schema
	// and IsolationLevel hold their defaults; the other fields the file leaves out are zero.
	Config sink.Config
	// PluginType is the sink section's type, the registered name of Config.Plugin.
	PluginType string
	// HTTP is the address to serve metrics and probes on (http, or http.listen); empty for
	// none.
	HTTP string
	// HTTPOptions are the http section's TLS and /metrics authentication.
	HTTPOptions HTTPOptions
	// Console is the console section, for `eosink console`; its defaults when absent.
	Console ConsoleOptions
	// Tracing is the tracing section, for eosink run's OTLP export of the sink's spans; nil
	// for none.
	Tracing *TracingOptions
	// SchemaRegistry is the schema_registry section, handed to the plugin; nil for none.
	SchemaRegistry *plugin.SchemaRegistry
	// Logger writes to Options.LogOutput in the file's log format and level.
	Logger *slog.Logger
	// Progress is log.progress: how often eosink run logs a progress line; 0 for never.
	// Defaults to 30s.
	Progress time.Duration
	// Warnings, with Options.AllowUnset, name each field whose value has an unset
	// environment variable, and the plugin's complaint when it could not be built without
	// them (Config.Plugin is then nil).
	Warnings Errors

	unresolved map[string]string // paths with unset variables, to their values as written
	sinkRaw    map[string]any    // the sink section as the plugin got it, for the summary
	topicPaths []string          // the file's paths of Config.Topics

	redact Redactor
}

// Load reads the pipeline config file at path, expands its references, validates it and
// builds its plugin. An invalid file gives Errors, one per problem found.
func Load(path string, opts Options) (*Pipeline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, opts)
}

// Parse is Load for a file's content; name names the file in errors, and relative
// ${file:...} paths are read from name's folder.
func Parse(name string, data []byte, opts Options) (*Pipeline, error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.LogOutput == nil {
		opts.LogOutput = os.Stderr
	}
	l := newLoader(name, &expander{lookupEnv: opts.LookupEnv, readFile: os.ReadFile, dir: filepath.Dir(name), allowUnset: opts.AllowUnset})
	p := l.load(data, opts.LogOutput)
	l.secrets.Add(l.x.fromFiles...)
	if len(l.errs) > 0 {
		errs := l.errs.sorted()
		for _, e := range errs {
			e.Path, e.Msg = l.secrets.Redact(e.Path), l.secrets.Redact(e.Msg)
		}
		return nil, errs
	}
	p.redact = l.secrets
	p.Warnings, p.unresolved = l.warnings.sorted(), l.unresolved
	return p, nil
}

// NewSink creates the sink (sink.New) with reg as its Registerer (nil: no metrics). A
// *sink.ConfigError, which names a Config field, becomes an Error naming the file's field.
func (p *Pipeline) NewSink(reg prometheus.Registerer) (*sink.Sink, error) {
	cfg := p.Config
	cfg.Registerer = reg
	s, err := sink.New(cfg)
	if err == nil {
		return s, nil
	}
	var ce *sink.ConfigError
	if errors.As(err, &ce) {
		return nil, &Error{File: p.File, Path: pathOf(ce.Field, p.topicPaths), Msg: p.redact.Redact(fileText(ce.Reason, p.topicPaths))}
	}
	return nil, errors.New(p.redact.Redact(err.Error()))
}

// Redact removes the file's secrets (database password, secret Kafka properties, values read
// from files) from s, for messages written by others.
func (p *Pipeline) Redact(s string) string { return p.redact.Redact(s) }
