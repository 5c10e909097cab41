// Command points is the point-accrual example for eosink: events {event_id, account_id,
// delta} from a Kafka topic become account balances in PostgreSQL, exactly once.
//
//	points migrate                      create eosink's offsets table and the example's tables
//	points produce -events 20000        produce test events
//	points run                          run the sink until SIGINT or SIGTERM
//	points verify                       compare the database with the log (exit 1 on a mismatch)
//
// KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL configure the connections; flags override them.
// EOSINK_LOG_FORMAT=json writes the logs as JSON lines.
// Run `points <command> -h` for the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/kafkaflag"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/sinkhttp"
)

type common struct {
	brokers, databaseURL, topic, group, schema, offsetsSchema string
}

func (c *common) register(fs *flag.FlagSet) {
	// Defaults come from the environment after parsing (need), so that -h never prints a password.
	fs.StringVar(&c.brokers, "brokers", "", "Kafka bootstrap servers (default: env KAFKA_BOOTSTRAP_SERVERS)")
	fs.StringVar(&c.databaseURL, "database-url", "", "PostgreSQL URL (default: env DATABASE_URL)")
	fs.StringVar(&c.topic, "topic", "points", "topic of point events")
	fs.StringVar(&c.group, "group", "points", "consumer group, also the pipeline name")
	fs.StringVar(&c.schema, "schema", "points", "schema of the example's tables")
	fs.StringVar(&c.offsetsSchema, "offsets-schema", "eosink", "schema of eosink's offsets table")
}

func (c *common) need(kafka, db bool) error {
	if c.brokers == "" {
		c.brokers = os.Getenv("KAFKA_BOOTSTRAP_SERVERS")
	}
	if c.databaseURL == "" {
		c.databaseURL = os.Getenv("DATABASE_URL")
	}
	if kafka && c.brokers == "" {
		return errors.New("no Kafka: set KAFKA_BOOTSTRAP_SERVERS or -brokers")
	}
	if db && c.databaseURL == "" {
		return errors.New("no database: set DATABASE_URL or -database-url")
	}
	return nil
}

func main() {
	// EOSINK_LOG_FORMAT=json switches the logs to JSON lines; the default is text.
	var handler slog.Handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	if os.Getenv("EOSINK_LOG_FORMAT") == "json" {
		handler = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	}
	slog.SetDefault(slog.New(handler))
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: points migrate|produce|run|verify [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "migrate":
		err = migrate(ctx, os.Args[2:])
	case "produce":
		err = produce(ctx, os.Args[2:])
	case "run":
		err = run(ctx, os.Args[2:])
	case "verify":
		err = verify(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (want migrate, produce, run or verify)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "points:", err)
		os.Exit(1)
	}
}

func migrate(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("migrate", flag.ExitOnError)
	c.register(fs)
	_ = fs.Parse(args)
	if err := c.need(false, true); err != nil {
		return err
	}
	if err := sink.Migrate(ctx, c.databaseURL, c.offsetsSchema); err != nil {
		return err
	}
	return app.Migrate(ctx, c.databaseURL, c.schema)
}

func produce(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	c.register(fs)
	events := fs.Int("events", 10000, "number of events")
	accounts := fs.Int("accounts", 100, "number of accounts")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed for ids and deltas")
	partitions := fs.Int("partitions", 6, "partitions of the topic, if it has to be created")
	_ = fs.Parse(args)
	if err := c.need(true, false); err != nil {
		return err
	}
	if err := app.EnsureTopic(ctx, c.brokers, c.topic, *partitions); err != nil {
		return err
	}
	n, err := app.Produce(ctx, app.ProduceOptions{Brokers: c.brokers, Topic: c.topic, Events: *events, Accounts: *accounts, Seed: *seed,
		Progress: func(d int) { fmt.Fprintf(os.Stderr, "produced %d/%d\n", d, *events) }})
	fmt.Printf("produced: %d\n", n)
	return err
}

func run(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	c.register(fs)
	var kafkaProps kafkaflag.Properties
	fs.Var(&kafkaProps, "kafka", "librdkafka property key=value (repeatable), e.g. -kafka partition.assignment.strategy=cooperative-sticky")
	initial := fs.String("initial-position", "earliest", "where a partition without a stored row starts: earliest, latest, error, kafka-committed")
	batch := fs.Int("batch-records", 500, "max records per transaction")
	wait := fs.Duration("batch-wait", 100*time.Millisecond, "max wait for a batch to fill")
	commitKafka := fs.Bool("commit-to-kafka", true, "also commit stored offsets to Kafka (advisory, for lag tools)")
	instance := fs.String("instance", "", "instance id written as owner (default host-pid)")
	autoMigrate := fs.Bool("migrate", true, "apply migrations before starting")
	idleTx := fs.Duration("idle-tx-timeout", 30*time.Second, "idle_in_transaction_session_timeout of the sink's sessions")
	lockTimeout := fs.Duration("lock-timeout", 5*time.Second, "lock_timeout of claims")
	claimTimeout := fs.Duration("claim-timeout", 60*time.Second, "how long a claim retries before giving up")
	isolation := fs.String("isolation", "read committed", "isolation level of each batch: read committed, repeatable read, serializable")
	revokeTimeout := fs.Duration("revoke-timeout", 30*time.Second, "how long a revoke waits for in-flight batches")
	onPoison := fs.String("on-poison", "stop", "what a record that is not an event does: stop (the partition) or dead-letter")
	httpAddr := fs.String("http", "", "serve /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:9464")
	_ = fs.Parse(args)
	if err := kafkaProps.Err("kafka"); err != nil {
		return err
	}
	if err := c.need(true, true); err != nil {
		return err
	}
	pos, err := sink.ParseInitialPosition(*initial)
	if err != nil {
		return err
	}
	poison, err := sink.ParsePoisonPolicy(*onPoison)
	if err != nil {
		return err
	}
	if *autoMigrate {
		if err := app.Migrate(ctx, c.databaseURL, c.schema); err != nil {
			return err
		}
	}
	reg := prometheus.NewRegistry()
	s, err := sink.New(sink.Config{
		Registerer: reg,
		Brokers:    c.brokers, GroupID: c.group, Topics: []string{c.topic},
		DatabaseURL: c.databaseURL, Schema: c.offsetsSchema, AutoMigrate: *autoMigrate,
		Handler: app.Handler(c.schema), Kafka: kafkaProps.ConfigMap(), InitialPosition: pos,
		MaxBatchRecords: *batch, MaxBatchWait: *wait, CommitToKafka: *commitKafka, InstanceID: *instance,
		IdleInTransactionTimeout: *idleTx, LockTimeout: *lockTimeout, ClaimTimeout: *claimTimeout,
		IsolationLevel: pgx.TxIsoLevel(*isolation), RevokeTimeout: *revokeTimeout, OnPoison: poison,
	})
	if err != nil {
		return err
	}
	if *httpAddr != "" {
		srv, err := serveHTTP(*httpAddr, reg, s)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	err = s.Run(ctx)
	st := s.Stats()
	fmt.Fprintf(os.Stderr, "points: stopped: records=%d batches=%d retries=%d fenced=%d unknown_commits=%d claims=%d\n",
		st.Records, st.Batches, st.Retries, st.Fenced, st.UnknownCommits, st.Claims)
	return err
}

func verify(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	c.register(fs)
	_ = fs.Parse(args)
	if err := c.need(true, true); err != nil {
		return err
	}
	rep, err := app.Verify(ctx, app.VerifyOptions{Brokers: c.brokers, Topic: c.topic, DatabaseURL: c.databaseURL,
		Schema: c.schema, Pipeline: c.group, OffsetsSchema: c.offsetsSchema})
	if err != nil {
		return err
	}
	rep.Print(os.Stdout)
	if !rep.OK() {
		return errors.New("verification failed")
	}
	return nil
}

// serveHTTP serves the sink's metrics and health probes.
func serveHTTP(addr string, reg *prometheus.Registry, s *sink.Sink) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-http %s: %w", addr, err)
	}
	srv := &http.Server{Handler: sinkhttp.Handler(s, reg), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	slog.Info("serving metrics and health", "addr", ln.Addr().String())
	return srv, nil
}
