package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/cli/internal/pipeline"
	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/outbox"
	"github.com/eosink/eosink/outbox/relay"
)

// relayFile is the relay's config file (docs/outbox.md).
type relayFile struct {
	Database struct {
		URL    string `yaml:"url"`
		Schema string `yaml:"schema"`
	} `yaml:"database"`
	Kafka struct {
		Brokers    string            `yaml:"brokers"`
		Properties map[string]string `yaml:"properties"`
	} `yaml:"kafka"`
	Relay struct {
		Name               string         `yaml:"name"`
		Shards             int            `yaml:"shards"`
		Own                []int          `yaml:"own"`
		PositionTopic      string         `yaml:"position_topic"`
		BatchSize          int            `yaml:"batch_size"`
		PollInterval       time.Duration  `yaml:"poll_interval"`
		HorizonWarn        time.Duration  `yaml:"horizon_warn"`
		Retention          *time.Duration `yaml:"retention"`
		CleanupInterval    time.Duration  `yaml:"cleanup_interval"`
		CleanupBatch       int            `yaml:"cleanup_batch"`
		TransactionTimeout time.Duration  `yaml:"transaction_timeout"`
		StatsInterval      time.Duration  `yaml:"stats_interval"`
	} `yaml:"relay"`
	HTTP yaml.Node `yaml:"http"` // /metrics and /healthz: read by pipeline.HTTPSection
	Log  yaml.Node `yaml:"log"`  // format (text or json) and level: read by pipeline.LogSection
}

// loadRelay reads and expands a relay config file into a relay.Config. The returned
// Redactor holds the file's secrets (the connection string's passwords, the http section's
// credentials, values read from files), to remove from every message, the error's too.
func loadRelay(path string, logOut io.Writer) (relay.Config, relayHTTP, pipeline.Redactor, error) {
	var secrets pipeline.Redactor
	data, err := os.ReadFile(path)
	if err != nil {
		return relay.Config{}, relayHTTP{}, secrets, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return relay.Config{}, relayHTTP{}, secrets, fmt.Errorf("%s: %w", path, err)
	}
	// The http and log sections are read as written, before ExpandNode: they expand their
	// own references, as a pipeline file's sections do.
	var web relayHTTP
	if n := mappingValue(&doc, "http"); n != nil {
		listen, opts, webSecrets, err := pipeline.HTTPSection(path, n)
		secrets.Add(webSecrets...)
		if err != nil {
			return relay.Config{}, relayHTTP{}, secrets, err
		}
		web = relayHTTP{listen: listen, opts: opts}
	}
	log, logSecrets, err := pipeline.LogSection(path, mappingValue(&doc, "log"), logOut)
	secrets.Add(logSecrets...)
	if err != nil {
		return relay.Config{}, relayHTTP{}, secrets, err
	}
	fromFiles, err := pipeline.ExpandNode(path, &doc)
	secrets.Add(fromFiles...)
	if err != nil {
		return relay.Config{}, relayHTTP{}, secrets, err
	}
	expanded, err := yaml.Marshal(&doc)
	if err != nil {
		return relay.Config{}, relayHTTP{}, secrets, fmt.Errorf("%s: %w", path, err)
	}
	var f relayFile
	dec := yaml.NewDecoder(bytes.NewReader(expanded))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return relay.Config{}, relayHTTP{}, secrets, fmt.Errorf("%s: %v", path, err) // line numbers are those of the expanded text
	}
	km := kafka.ConfigMap{}
	for k, v := range envKafkaProperties(os.Environ()) { // EOSINK_KAFKA_PROPERTY_*, as the operator commands
		km[k] = v
	}
	for k, v := range f.Kafka.Properties { // the file's win
		km[k] = v
	}
	if f.Kafka.Brokers != "" {
		km["bootstrap.servers"] = f.Kafka.Brokers
	}
	// The connection string is parsed here, without connecting, so that -validate refuses one
	// that does not parse; its passwords, in every libpq form, are redacted from every message.
	if u := f.Database.URL; u != "" {
		secrets.AddDatabaseURL(u)
		if _, err := pgxpool.ParseConfig(u); err != nil {
			return relay.Config{}, relayHTTP{}, secrets, fmt.Errorf("%s: database.url: not a PostgreSQL connection string: %v", path, pgerr.RedactError(err, u))
		}
	}
	r := f.Relay
	return relay.Config{DatabaseURL: f.Database.URL, Schema: f.Database.Schema, Kafka: km, Name: r.Name, Shards: r.Shards, Own: r.Own,
		PositionTopic: r.PositionTopic, BatchSize: r.BatchSize, PollInterval: r.PollInterval, HorizonWarn: r.HorizonWarn,
		Retention: r.Retention, CleanupInterval: r.CleanupInterval, CleanupBatch: r.CleanupBatch, TransactionTimeout: r.TransactionTimeout,
		StatsInterval: r.StatsInterval, Logger: log}, web, secrets, nil
}

// relayHTTP is the relay's http section: where to serve /metrics and /healthz, with the TLS,
// authentication and limits of eosink run's.
type relayHTTP struct {
	listen string
	opts   pipeline.HTTPOptions
}

// mappingValue returns the value of key in the top-level mapping of doc, or nil.
func mappingValue(doc *yaml.Node, key string) *yaml.Node {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// relayCmd: eosink relay -config FILE [-migrate] [-validate] [-resync].
func relayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eosink relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "relay config file (YAML; see docs/outbox.md)")
	migrate := fs.Bool("migrate", false, "apply the outbox migrations to the file's schema first")
	validate := fs.Bool("validate", false, "check the file and exit")
	resync := fs.Bool("resync", false, "after a shard stopped with database_rewound (a restore or a failover): publish what the database holds and Kafka lacks, report the phantom events, set new positions, and exit (docs/outbox.md)")
	h := help{usage: "eosink relay -config FILE [-migrate] [-validate] [-resync]",
		desc: "Publish the transactional outbox to Kafka exactly once until SIGTERM or SIGINT, then finish the Kafka transactions under way and exit 0."}
	fs.Usage = func() { h.print(fs.Output(), fs) }
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("relay: unexpected arguments %v", fs.Args())}
	}
	if *config == "" {
		fs.Usage()
		return usageError{errors.New("relay: -config is required")}
	}
	c, web, secrets, err := loadRelay(*config, stderr)
	redact := secrets.Redact
	if err != nil {
		return errors.New(redact(err.Error()))
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	c.Registerer = reg
	r, err := relay.New(c)
	if err != nil {
		return fmt.Errorf("%s: %w", *config, err)
	}
	if *validate {
		fmt.Fprintf(stdout, "%s: valid\n", *config)
		return nil
	}
	if *migrate {
		if err := outbox.Migrate(ctx, c.DatabaseURL, c.Schema); err != nil {
			return errors.New(redact(err.Error()))
		}
	}
	if *resync {
		reps, err := relay.Resync(ctx, c)
		for _, rep := range reps {
			if !rep.Rewound {
				fmt.Fprintf(stdout, "shard %d: the database holds the generation of the Kafka position %s: nothing to do\n", rep.Shard, rep.To)
				continue
			}
			fmt.Fprintf(stdout, "shard %d: rewound; from %s to %s: %d rows in doubt, %d of them already in Kafka, %d published; %d phantom events\n",
				rep.Shard, rep.From, rep.To, rep.InDoubt, rep.InKafka, rep.Published, len(rep.Phantoms))
			for _, id := range rep.Phantoms {
				fmt.Fprintf(stdout, "shard %d: phantom event %s\n", rep.Shard, redact(id))
			}
		}
		if err != nil {
			return errors.New(redact(err.Error()))
		}
		return nil
	}
	if web.listen != "" {
		ln, err := net.Listen("tcp", web.listen)
		if err != nil {
			return fmt.Errorf("%s: http: %w", *config, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		srv, err := newHTTPServer(web.opts, defaultHTTPLimits.with(web.opts), mux)
		if err != nil {
			ln.Close()
			return fmt.Errorf("%s: %w", *config, err)
		}
		go func() {
			var err error
			if srv.TLSConfig != nil {
				err = srv.ServeTLS(ln, "", "")
			} else {
				err = srv.Serve(ln)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				c.Logger.Error("http server stopped", "addr", ln.Addr().String(), "err", err)
			}
		}()
		c.Logger.Info("serving /metrics and /healthz", "addr", ln.Addr().String())
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	if err := r.Run(ctx); err != nil {
		return errors.New(redact(err.Error()))
	}
	st := r.Stats()
	fmt.Fprintf(stdout, "relay stopped: %d events in %d committed transactions, %d aborted\n", st.Published, st.Transactions, st.Aborted)
	return nil
}
