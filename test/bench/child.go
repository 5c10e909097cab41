package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/eosink/eosink/rebalance"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/cdc"
	"github.com/eosink/eosink/sink/table"
)

// childArgs configure one measured run, in a process of its own so that its CPU time and
// peak memory are its own.
type childArgs struct {
	mode, brokers, url, topic, group, schema, table, offsets, format, kind string
	records                                                                int64
	// txTopic: the cdc plugin in consistency: transaction with this transaction topic;
	// count: the records the rate is counted in, records (what the sink commits) scaled.
	txTopic                                 string
	count                                   int64
	partitions, batch, poolConns, instances int
	wait, limit                             time.Duration
	rate                                    int
	cpuProfile                              string
	// rttDelay, when 0 or more: the sink's pool reaches PostgreSQL through a delay proxy
	// with this one-way delay (roundtrips.go), which counts its round trips.
	rttDelay time.Duration
	// commitSpans: P50ms and P99ms are the durations of the sink's COMMITs (eosink.commit
	// spans; tables.go).
	commitSpans bool
	// tenths: report when each tenth of the records was committed (the initial load).
	tenths bool
}

// childResult is what a child prints as its last line of output.
type childResult struct {
	Records int64   `json:"records"`
	Seconds float64 `json:"seconds"` // from the first commit to the last
	Wall    float64 `json:"wall_seconds"`
	P50ms   float64 `json:"p50_ms,omitempty"`
	P99ms   float64 `json:"p99_ms,omitempty"`
	Batches int64   `json:"batches,omitempty"`
	Pauses  int64   `json:"pauses,omitempty"`
	// QueueFull: how often the latency run's producer waited on its full local queue.
	QueueFull int64 `json:"queue_full,omitempty"`
	HWMKiB    int64 `json:"vm_hwm_kib"` // this process's peak resident memory
	// PGConns: the most PostgreSQL sessions of the pipeline open at once (eos mode).
	PGConns int64 `json:"pg_connections,omitempty"`
	// Breakdown: where the latency run's records waited (latency mode).
	Breakdown map[string]Stat `json:"latency_breakdown_ms,omitempty"`
	// Set: eos_cdc_tx's set loop, where its time went (timeSet).
	Set map[string]float64 `json:"set,omitempty"`
	// RTT: with -rtt-delay, the round trips the sink made from its first commit to its last.
	RTT *RTTCount `json:"rtt,omitempty"`
	// Logged53200: how many of the sink's log lines named SQLSTATE 53200 (out of shared
	// memory: max_locks_per_transaction), and of them the first.
	Logged53200 int64  `json:"logged_53200,omitempty"`
	First53200  string `json:"first_53200,omitempty"`
	// Tenths: with -tenths, the records committed and the seconds since the first commit at
	// the first commit and then each time a further tenth of the records was committed.
	Tenths []tenthMark `json:"tenths,omitempty"`
}

// tenthMark is a point of the committed count over time (childResult.Tenths).
type tenthMark struct {
	Records int64   `json:"records"`
	Seconds float64 `json:"seconds"`
}

// peakRSS reads VmHWM from /proc/self/status: the peak of this program's own memory, which,
// unlike the rusage of a forked child, does not start at the parent's size.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

func parseChild(args []string) (childArgs, error) {
	var a childArgs
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	fs.StringVar(&a.mode, "mode", "", "copy|eos|alo|permsg|latency")
	fs.StringVar(&a.brokers, "brokers", "", "")
	fs.StringVar(&a.url, "url", "", "")
	fs.StringVar(&a.topic, "topic", "", "")
	fs.StringVar(&a.group, "group", "", "")
	fs.StringVar(&a.schema, "schema", "bench", "")
	fs.StringVar(&a.table, "table", "", "")
	fs.StringVar(&a.offsets, "offsets-schema", "bench_eosink", "")
	fs.StringVar(&a.format, "format", "normal", "normal|narrow|wide|envelope|cdc|initial|initial-cdc")
	fs.StringVar(&a.kind, "kind", "insert", "insert|upsert")
	fs.Int64Var(&a.records, "records", 0, "")
	fs.StringVar(&a.txTopic, "txtopic", "", "cdc: consistency: transaction with this transaction topic")
	fs.Int64Var(&a.count, "count", 0, "count the rate in this many records for the -records applied")
	fs.IntVar(&a.partitions, "partitions", 12, "")
	fs.IntVar(&a.batch, "batch", 5000, "")
	fs.IntVar(&a.poolConns, "pool", 0, "")
	fs.IntVar(&a.instances, "instances", 1, "eos: sinks in one group in this process")
	fs.DurationVar(&a.wait, "wait", 100*time.Millisecond, "")
	fs.DurationVar(&a.limit, "limit", 0, "stop after this long")
	fs.IntVar(&a.rate, "rate", 0, "latency: records per second to produce")
	fs.StringVar(&a.cpuProfile, "cpuprofile", "", "")
	fs.DurationVar(&a.rttDelay, "rtt-delay", -1, "eos: reach PostgreSQL through a proxy with this one-way delay")
	fs.BoolVar(&a.commitSpans, "commit-spans", false, "eos: p50/p99 of the COMMITs' durations")
	fs.BoolVar(&a.tenths, "tenths", false, "report when each tenth of the records was committed")
	return a, fs.Parse(args)
}

func runChild(args []string) int {
	a, err := parseChild(args)
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProfiles, err := startProfiles(a.cpuProfile, os.Getenv("BENCH_HEAP_PROFILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopProfiles()
	var res childResult
	switch a.mode {
	case "copy":
		res, err = runCopy(ctx, a)
	case "eos", "latency":
		res, err = runEOS(ctx, a)
	case "alo":
		res, err = runALO(ctx, a)
	case "permsg":
		res, err = runPerMessage(ctx, a)
	case "consume":
		res, err = runConsume(ctx, a)
	default:
		err = fmt.Errorf("unknown mode %q", a.mode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", a.mode, err)
		return 1
	}
	res.HWMKiB = peakRSS()
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return 0
}

func (a childArgs) dbURL() string {
	if a.poolConns == 0 {
		return a.url
	}
	sep := "?"
	if slices.Contains([]byte(a.url), '?') {
		sep = "&"
	}
	return a.url + sep + "pool_max_conns=" + strconv.Itoa(a.poolConns)
}

// sinkURL is the sink's database URL: dbURL with BENCH_PG_OPTIONS, when set, as the sessions'
// options ("-c log_min_duration_statement=0" to time every statement the sink sends).
func (a childArgs) sinkURL() string {
	u := a.dbURL()
	opts := os.Getenv("BENCH_PG_OPTIONS")
	if opts == "" {
		return u
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "options=" + strings.ReplaceAll(url.QueryEscape(opts), "+", "%20")
}

// plugin is the table or upsert plugin writing the benchmark's columns.
func (a childArgs) plugin() (sink.Plugin, error) {
	if a.format == "cdc" && a.txTopic != "" {
		return cdcTxPlugin(a)
	}
	if a.format == "cdc" {
		// Debezium change events to the replica table; loaded_at is not replicated (its
		// default marks a row's first insert, as on the peer's table).
		return cdc.New(cdc.Config{Table: a.schema + "." + a.table, PositionsSchema: a.offsets, Exclude: []string{"loaded_at"}})
	}
	if a.format == "initial-cdc" { // the initial load's snapshot reads (initload.go), JSON without schemas
		return cdc.New(cdc.Config{Table: a.schema + "." + a.table, PositionsSchema: a.offsets})
	}
	if a.format == "initial" { // the same rows as plain JSON
		cols := map[string]table.Column{}
		for _, c := range initialColumns {
			cols[c] = table.Column{From: "value." + c}
		}
		return table.New(table.Config{Table: a.schema + "." + a.table, Columns: cols})
	}
	prefix := "value."
	if a.format == "envelope" {
		prefix = "value.payload."
	}
	cols := map[string]table.Column{}
	for _, c := range []string{"id", "account", "amount", "currency", "ts", "note"} {
		cols[c] = table.Column{From: prefix + c}
	}
	cfg := table.Config{Table: a.schema + "." + a.table, Columns: cols}
	if a.format == "expr" { // eos_expr: the same rows through three expressions
		cfg.Where = `value.amount >= 0`
		cfg.Check = []table.Check{{Expr: `value.currency in ["EUR", "USD", "GBP"]`, Message: "unknown currency"}}
		cols["account"] = table.Column{Expr: `value.account.replace("acct-", "acct-")`}
	}
	if a.kind == "upsert" {
		return table.NewUpsert(table.UpsertConfig{Config: cfg, Key: []string{"id"}})
	}
	return table.New(cfg)
}

// runEOS runs eosink itself. With mode latency it also produces at a.rate records a second
// for a.limit into an empty topic and measures each record's time from its Kafka timestamp
// to the end of the COMMIT that applied it.
func runEOS(ctx context.Context, a childArgs) (childResult, error) {
	pl, err := a.plugin()
	if err != nil {
		return childResult{}, err
	}
	if err := sink.MigratePlugin(ctx, a.url, pl, nil); err != nil { // the cdc plugin's positions table
		return childResult{}, err
	}
	lat := &latencies{pending: map[batchKey]*batchTimes{}, children: map[trace.SpanID][]sdktrace.ReadOnlySpan{}}
	dbURL := a.sinkURL()
	var rtt *rttWatch
	if a.rttDelay >= 0 { // the sink's pool alone through the delay proxy (the migration and the sampler not)
		if rtt, dbURL, err = startRTT(dbURL, a.rttDelay); err != nil {
			return childResult{}, err
		}
		defer rtt.proxy.Close()
	}
	cfg := sink.Config{Brokers: a.brokers, GroupID: a.group, Topics: strings.Split(a.topic, ","), DatabaseURL: dbURL,
		Schema: a.offsets, Plugin: pl, MaxBatchRecords: a.batch, MaxBatchWait: a.wait,
		ShutdownTimeout: 2 * time.Second, // measured already: do not drain a slow queue
		Kafka:           a.kafkaOverrides(),
		Logger:          slog.New(slog.NewTextHandler(sinkLog, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if mb := envInt("BENCH_TOTAL_BUFFERED_MB", 0); mb > 0 { // to measure the sink-wide cap's effect
		cfg.MaxTotalBufferedBytes = mb << 20
	}
	if mb := envInt("BENCH_BUFFERED_MB", 0); mb > 0 { // the per-partition buffer (and so the batch bytes' bound)
		cfg.MaxBufferedBytes = mb << 20
	}
	if mb := envInt("BENCH_BATCH_MB", 0); mb > 0 {
		cfg.MaxBatchBytes = mb << 20
	}
	var commits *spanTimes
	if a.commitSpans {
		commits = &spanTimes{name: "eosink.commit"}
		cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(commits))
	}
	if a.mode == "latency" {
		cfg.Plugin = &latencyPlugin{Plugin: pl, lat: lat}
		cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(lat))
	}
	var setTimes func() map[string]float64
	if a.txTopic != "" {
		setTimes = timeSet(&cfg)
		if mb := envInt("BENCH_CDC_TX_BATCH_MB", 0); mb > 0 { // the set's group bound in bytes (default the sink's, 4 MiB)
			cfg.MaxBatchBytes = mb << 20
			cfg.MaxBufferedBytes = max(cfg.MaxBufferedBytes, cfg.MaxBatchBytes)
		}
	}
	sinks := make([]*sink.Sink, max(1, a.instances))
	for i := range sinks {
		if sinks[i], err = sink.New(cfg); err != nil {
			return childResult{}, err
		}
	}
	s := sinks[0]
	applied := func() (n int64) {
		var batches int64
		for _, s := range sinks {
			st := s.Stats()
			n, batches = n+st.Records, batches+st.Batches
		}
		if rtt != nil {
			rtt.observe(n, batches)
		}
		return n
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, len(sinks))
	began := time.Now()
	for _, s := range sinks {
		go func() { done <- s.Run(rctx) }()
	}
	conns := watchConnections(rctx, a.url, rebalance.SessionName(a.group))
	want, limit := a.records, a.limit
	var produced time.Duration
	var queueFull int64
	var res0 childResult
	if a.mode == "latency" {
		// The sink applies while the records are produced; then wait until it has all.
		if err := waitReady(s, done); err != nil {
			return childResult{}, err
		}
		t0 := time.Now()
		var st produceStats
		want, st, err = produceAtRate(ctx, a)
		if err != nil {
			return childResult{}, fmt.Errorf("producer: %w (%s)", err, st)
		}
		fmt.Fprintf(os.Stderr, "bench latency: producer: %s\n", st)
		queueFull = st.QueueFull
		produced, limit = time.Since(t0), 0
	}
	var marks *[]tenthMark
	if a.tenths {
		marks = &res0.Tenths
	}
	res, err := watch(ctx, want, limit, done, applied, marks)
	if a.count > 0 && want > 0 { // eos_cdc_tx: the data topic's records, tombstones included
		res.Records = res.Records * a.count / want
	}
	if a.mode == "latency" {
		res.Records, res.Seconds = want, produced.Seconds()
	}
	cancel()
	waiting := len(sinks)
	if errors.Is(err, errSinkStopped) { // watch has received that sink's end already
		waiting--
	}
	for range waiting {
		if rerr := <-done; rerr != nil && err == nil {
			err = rerr
		}
	}
	res.Wall = time.Since(began).Seconds()
	if commits != nil {
		res.P50ms, res.P99ms = commits.quantiles()
	}
	res.Logged53200, res.First53200 = sinkLog.count()
	res.Tenths = res0.Tenths
	for _, s := range sinks {
		res.Batches += s.Stats().Batches
		res.Pauses += s.Stats().Pauses
	}
	res.PGConns = conns()
	if rtt != nil {
		res.RTT = rtt.count()
	}
	if setTimes != nil {
		res.Set = setTimes()
	}
	if a.mode == "latency" {
		res.P50ms, res.P99ms = lat.percentiles()
		res.Breakdown = lat.breakdown()
		res.QueueFull = queueFull
	}
	return res, err
}

func waitReady(s *sink.Sink, done chan error) error {
	for !s.Ready() {
		select {
		case err := <-done:
			return fmt.Errorf("sink stopped: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	time.Sleep(3 * time.Second) // the group's first assignment
	return nil
}

// errSinkStopped is watch's error when a contender stopped before it applied everything:
// watch has received its end from done.
var errSinkStopped = errors.New("stopped")

// stallTimeout is how long watch waits with no record applied before it fails the run
// (BENCH_STALL_SECONDS, default 300; the child inherits it): a contender that stops making
// progress fails its phase instead of hanging the bench.
func stallTimeout() time.Duration {
	return time.Duration(envInt("BENCH_STALL_SECONDS", 300)) * time.Second
}

// watch polls applied until it reaches want (or limit passes) and times the span from the
// first applied record to the last. It fails when nothing is applied for stallTimeout. With
// marks, it appends the count and time at the first commit and at each further tenth of want.
func watch(ctx context.Context, want int64, limit time.Duration, done chan error, applied func() int64, marks *[]tenthMark) (childResult, error) {
	var first time.Time
	var base int64
	deadline := time.Time{}
	stall := stallTimeout()
	last, lastAt := int64(-1), time.Now()
	for {
		n := applied()
		now := time.Now()
		if n != last {
			last, lastAt = n, now
		} else if now.Sub(lastAt) > stall {
			return childResult{}, fmt.Errorf("stalled: no record applied for %s, at %d of %d", stall, n, want)
		}
		if n > 0 && first.IsZero() {
			first, base = now, n
			if limit > 0 {
				deadline = now.Add(limit)
			}
		}
		if marks != nil && n > 0 && want > 0 {
			if k := int64(len(*marks)); k == 0 || (k <= 10 && n >= k*want/10) {
				*marks = append(*marks, tenthMark{Records: n, Seconds: now.Sub(first).Seconds()})
			}
		}
		if n >= want || (!deadline.IsZero() && now.After(deadline)) {
			secs := now.Sub(first).Seconds()
			if secs == 0 {
				secs = 1e-3
			}
			return childResult{Records: n - base, Seconds: secs}, nil
		}
		select {
		case err := <-done:
			return childResult{}, fmt.Errorf("%w at %d of %d: %v", errSinkStopped, n, want, err)
		case <-ctx.Done():
			return childResult{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// watchConnections samples, every 100 ms until ctx ends, how many PostgreSQL sessions carry
// the pipeline's application_name (the sink's pool; this sampler's own session is named
// otherwise), and returns a function that gives the most seen.
func watchConnections(ctx context.Context, url, name string) func() int64 {
	var peak atomic.Int64
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			var n int64
			if conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", name).Scan(&n) == nil {
				peak.Store(max(peak.Load(), n))
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		<-stopped
		return peak.Load()
	}
}

// kafkaOverrides are the sink's extra librdkafka properties: a short session timeout, and
// BENCH_QUEUED_KB, when set, as queued.max.messages.kbytes (to measure its effect on memory),
// and BENCH_KAFKA's name=value pairs, comma-separated (experiments with other properties).
func (a childArgs) kafkaOverrides() kafka.ConfigMap {
	m := kafka.ConfigMap{"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}
	if kb := envInt("BENCH_QUEUED_KB", 0); kb > 0 {
		m["queued.max.messages.kbytes"] = kb
	}
	for _, kv := range strings.Split(os.Getenv("BENCH_KAFKA"), ",") { // k=v,...: experiments
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
