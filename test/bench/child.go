package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/table"
)

// childArgs configure one measured run, in a process of its own so that its CPU time and
// peak memory are its own.
type childArgs struct {
	mode, brokers, url, topic, group, schema, table, offsets, format, kind string
	records                                                                int64
	partitions, batch, poolConns                                           int
	wait, limit                                                            time.Duration
	rate                                                                   int
	cpuProfile                                                             string
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
	HWMKiB  int64   `json:"vm_hwm_kib"` // this process's peak resident memory
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
	fs.StringVar(&a.format, "format", "normal", "normal|narrow|wide|envelope")
	fs.StringVar(&a.kind, "kind", "insert", "insert|upsert")
	fs.Int64Var(&a.records, "records", 0, "")
	fs.IntVar(&a.partitions, "partitions", 12, "")
	fs.IntVar(&a.batch, "batch", 5000, "")
	fs.IntVar(&a.poolConns, "pool", 0, "")
	fs.DurationVar(&a.wait, "wait", 100*time.Millisecond, "")
	fs.DurationVar(&a.limit, "limit", 0, "stop after this long")
	fs.IntVar(&a.rate, "rate", 0, "latency: records per second to produce")
	fs.StringVar(&a.cpuProfile, "cpuprofile", "", "")
	return a, fs.Parse(args)
}

func runChild(args []string) int {
	a, err := parseChild(args)
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if a.cpuProfile != "" {
		stopProfile, err := startCPUProfile(a.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stopProfile()
	}
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

// plugin is the table or upsert plugin writing the benchmark's columns.
func (a childArgs) plugin() (sink.Plugin, error) {
	prefix := "value."
	if a.format == "envelope" {
		prefix = "value.payload."
	}
	cols := map[string]table.Column{}
	for _, c := range []string{"id", "account", "amount", "currency", "ts", "note"} {
		cols[c] = table.Column{From: prefix + c}
	}
	cfg := table.Config{Table: a.schema + "." + a.table, Columns: cols}
	if a.kind == "upsert" {
		return table.NewUpsert(table.UpsertConfig{Config: cfg, Key: []string{"id"}})
	}
	return table.New(cfg)
}

// runCopy copies the same rows from memory with pgx's CopyFrom: the database's limit. Rows
// go in chunks of batch rows, one transaction each, from up to 4 connections at once.
func runCopy(ctx context.Context, a childArgs) (childResult, error) {
	pool, err := pgxpool.New(ctx, a.dbURL())
	if err != nil {
		return childResult{}, err
	}
	defer pool.Close()
	type row = []any
	rows := make([]row, a.records)
	ts, _ := time.Parse(time.RFC3339Nano, "2026-11-30T07:00:00.123Z")
	for i := range a.records {
		rows[i] = row{i, fmt.Sprintf("acct-%04d", (i*7919)%10000), int32(i % 1000), "EUR", ts, "payment received, thank you"}
	}
	began := time.Now()
	var next atomic.Int64
	workers := min(4, a.partitions)
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for {
				from := next.Add(int64(a.batch)) - int64(a.batch)
				if from >= a.records {
					errs <- nil
					return
				}
				to := min(from+int64(a.batch), a.records)
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := tx.CopyFrom(ctx, pgx.Identifier{a.schema, a.table}, []string{"id", "account", "amount", "currency", "ts", "note"},
						pgx.CopyFromRows(rows[from:to]))
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			return childResult{}, err
		}
	}
	took := time.Since(began).Seconds()
	return childResult{Records: a.records, Seconds: took, Wall: took}, nil
}

// runEOS runs eosink itself. With mode latency it also produces at a.rate records a second
// for a.limit into an empty topic and measures each record's time from its Kafka timestamp
// to the end of the COMMIT that applied it.
func runEOS(ctx context.Context, a childArgs) (childResult, error) {
	pl, err := a.plugin()
	if err != nil {
		return childResult{}, err
	}
	lat := &latencies{pending: map[batchKey][]time.Time{}}
	cfg := sink.Config{Brokers: a.brokers, GroupID: a.group, Topics: []string{a.topic}, DatabaseURL: a.dbURL(),
		Schema: a.offsets, Plugin: pl, MaxBatchRecords: a.batch, MaxBatchWait: a.wait,
		ShutdownTimeout: 2 * time.Second, // measured already: do not drain a slow queue
		Kafka:           kafka.ConfigMap{"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if a.mode == "latency" {
		cfg.Plugin = &latencyPlugin{Plugin: pl, lat: lat}
		cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(lat))
	}
	s, err := sink.New(cfg)
	if err != nil {
		return childResult{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- s.Run(rctx) }()
	want, limit := a.records, a.limit
	var produced time.Duration
	if a.mode == "latency" {
		// The sink applies while the records are produced; then wait until it has all.
		if err := waitReady(s, done); err != nil {
			return childResult{}, err
		}
		t0 := time.Now()
		if want, err = produceAtRate(ctx, a); err != nil {
			return childResult{}, err
		}
		produced, limit = time.Since(t0), 0
	}
	res, err := watch(ctx, want, limit, done, func() int64 { return s.Stats().Records })
	if a.mode == "latency" {
		res.Records, res.Seconds = want, produced.Seconds()
	}
	cancel()
	if rerr := <-done; rerr != nil && err == nil {
		err = rerr
	}
	res.Wall = time.Since(began).Seconds()
	res.Batches, res.Pauses = s.Stats().Batches, s.Stats().Pauses
	if a.mode == "latency" {
		res.P50ms, res.P99ms = lat.percentiles()
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

// watch polls applied until it reaches want (or limit passes) and times the span from the
// first applied record to the last.
func watch(ctx context.Context, want int64, limit time.Duration, done chan error, applied func() int64) (childResult, error) {
	var first time.Time
	var base int64
	deadline := time.Time{}
	for {
		n := applied()
		now := time.Now()
		if n > 0 && first.IsZero() {
			first, base = now, n
			if limit > 0 {
				deadline = now.Add(limit)
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
			return childResult{}, fmt.Errorf("stopped at %d of %d: %v", n, want, err)
		case <-ctx.Done():
			return childResult{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// produceAtRate sends a.rate records a second for a.limit and returns how many.
func produceAtRate(ctx context.Context, a childArgs) (int64, error) {
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": a.brokers, "linger.ms": 5, "go.logs.channel.enable": false,
		"go.delivery.reports": false})
	if err != nil {
		return 0, err
	}
	defer p.Close()
	var i int64
	var buf []byte
	began := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Since(began) < a.limit {
		<-tick.C
		due := int64(time.Since(began).Seconds() * float64(a.rate))
		for ; i < due; i++ {
			buf = appendRecord(buf[:0], 1_000_000_000+i, a.format)
			if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &a.topic, Partition: int32(i % int64(a.partitions))},
				Value: append([]byte(nil), buf...)}, nil); err != nil {
				return i, err
			}
		}
	}
	if left := p.Flush(30_000); left > 0 {
		return i, fmt.Errorf("%d records not delivered", left)
	}
	return i, nil
}

// latencies pairs each batch's record timestamps (taken in Write) with the end of the
// eosink.batch span that committed it.
type latencies struct {
	mu      sync.Mutex
	pending map[batchKey][]time.Time
	ms      []float64
}

type batchKey struct {
	partition int64
	last      int64
}

type latencyPlugin struct {
	sink.Plugin
	lat *latencies
}

func (p *latencyPlugin) Prepare(ctx context.Context, db sink.DB) error {
	if pr, ok := p.Plugin.(sink.Preparer); ok {
		return pr.Prepare(ctx, db)
	}
	return nil
}

func (p *latencyPlugin) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	if len(b.Records) > 0 {
		ts := make([]time.Time, len(b.Records))
		for i, r := range b.Records {
			ts[i] = r.Timestamp
		}
		p.lat.mu.Lock()
		p.lat.pending[batchKey{int64(b.Partition), b.Records[len(b.Records)-1].Offset}] = ts
		p.lat.mu.Unlock()
	}
	return p.Plugin.Write(ctx, tx, b)
}

func (l *latencies) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (l *latencies) Shutdown(context.Context) error                  { return nil }
func (l *latencies) ForceFlush(context.Context) error                { return nil }

func (l *latencies) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() != "eosink.batch" || s.Status().Code != 0 {
		return
	}
	var k batchKey
	for _, a := range s.Attributes() {
		switch a.Key {
		case "messaging.destination.partition.id":
			k.partition = a.Value.AsInt64()
		case "eosink.last_offset":
			k.last = a.Value.AsInt64()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.pending[k] {
		l.ms = append(l.ms, float64(s.EndTime().Sub(t).Microseconds())/1000)
	}
	delete(l.pending, k)
}

func (l *latencies) percentiles() (p50, p99 float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ms) == 0 {
		return 0, 0
	}
	slices.Sort(l.ms)
	at := func(q float64) float64 { return l.ms[min(len(l.ms)-1, int(q*float64(len(l.ms))))] }
	return at(0.50), at(0.99)
}

// runALO is the at-least-once baseline: the same consumer, per-partition batching and plugin,
// but each batch commits in PostgreSQL and then its offset is committed to Kafka; no offsets
// table. A crash between the two commits applies the batch again.
func runALO(ctx context.Context, a childArgs) (childResult, error) {
	pl, err := a.plugin()
	if err != nil {
		return childResult{}, err
	}
	pool, err := pgxpool.New(ctx, a.dbURL())
	if err != nil {
		return childResult{}, err
	}
	defer pool.Close()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": a.brokers, "group.id": a.group,
		"enable.auto.commit": false, "auto.offset.reset": "earliest", "isolation.level": "read_committed",
		"queued.max.messages.kbytes": 65536, "fetch.queue.backoff.ms": 0, "go.logs.channel.enable": false, "session.timeout.ms": 6000})
	if err != nil {
		return childResult{}, err
	}
	defer c.Close()
	if err := c.Subscribe(a.topic, nil); err != nil {
		return childResult{}, err
	}
	var applied atomic.Int64
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queues := map[int32]chan sink.Record{}
	done := make(chan error, 1)
	var wg sync.WaitGroup
	worker := func(part int32, q chan sink.Record) {
		defer wg.Done()
		var batch []sink.Record
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			err := pgx.BeginFunc(rctx, pool, func(tx pgx.Tx) error {
				_, err := sink.WriteBatch(rctx, tx, pl, sink.Batch{Topic: a.topic, Partition: part, Records: batch}, sink.WriteOptions{})
				return err
			})
			if err != nil {
				return err
			}
			last := batch[len(batch)-1].Offset
			if _, err := c.CommitOffsets([]kafka.TopicPartition{{Topic: &a.topic, Partition: part, Offset: kafka.Offset(last + 1)}}); err != nil {
				return err
			}
			applied.Add(int64(len(batch)))
			batch = batch[:0]
			return nil
		}
		timer := time.NewTimer(a.wait)
		for {
			select {
			case r := <-q:
				batch = append(batch, r)
				if len(batch) < a.batch {
					continue
				}
			case <-timer.C:
				timer.Reset(a.wait)
			case <-rctx.Done():
				return
			}
			if err := flush(); err != nil {
				if rctx.Err() == nil {
					select {
					case done <- err:
					default:
					}
				}
				return
			}
		}
	}
	go func() {
		for rctx.Err() == nil {
			switch e := c.Poll(100).(type) {
			case *kafka.Message:
				p := e.TopicPartition.Partition
				q := queues[p]
				if q == nil {
					q = make(chan sink.Record, 20000)
					queues[p] = q
					wg.Add(1)
					go worker(p, q)
				}
				q <- sink.Record{Topic: a.topic, Partition: p, Offset: int64(e.TopicPartition.Offset), Key: e.Key, Value: e.Value, Timestamp: e.Timestamp}
			case kafka.Error:
				if e.IsFatal() {
					done <- e
					return
				}
			}
		}
	}()
	began := time.Now()
	res, err := watch(ctx, a.records, a.limit, done, applied.Load)
	cancel()
	wg.Wait()
	res.Wall = time.Since(began).Seconds()
	return res, err
}

// runPerMessage is common practice: one record, one transaction with an idempotent write
// (upsert by id), one synchronous Kafka commit.
func runPerMessage(ctx context.Context, a childArgs) (childResult, error) {
	a.kind = "upsert"
	pl, err := a.plugin()
	if err != nil {
		return childResult{}, err
	}
	pool, err := pgxpool.New(ctx, a.dbURL())
	if err != nil {
		return childResult{}, err
	}
	defer pool.Close()
	if pr, ok := pl.(sink.Preparer); ok {
		if err := pr.Prepare(ctx, pool); err != nil {
			return childResult{}, err
		}
	}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": a.brokers, "group.id": a.group,
		"enable.auto.commit": false, "auto.offset.reset": "earliest", "go.logs.channel.enable": false})
	if err != nil {
		return childResult{}, err
	}
	defer c.Close()
	if err := c.Subscribe(a.topic, nil); err != nil {
		return childResult{}, err
	}
	var applied atomic.Int64
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		for rctx.Err() == nil {
			ev := c.Poll(100)
			m, ok := ev.(*kafka.Message)
			if !ok {
				continue
			}
			r := sink.Record{Topic: a.topic, Partition: m.TopicPartition.Partition, Offset: int64(m.TopicPartition.Offset), Key: m.Key, Value: m.Value}
			err := pgx.BeginFunc(rctx, pool, func(tx pgx.Tx) error {
				_, err := sink.WriteBatch(rctx, tx, pl, sink.Batch{Topic: a.topic, Partition: r.Partition, Records: []sink.Record{r}}, sink.WriteOptions{})
				return err
			})
			if err == nil {
				_, err = c.CommitMessage(m)
			}
			if err != nil {
				if rctx.Err() == nil {
					done <- err
				}
				return
			}
			applied.Add(1)
		}
	}()
	began := time.Now()
	res, err := watch(ctx, a.records, a.limit, done, applied.Load)
	cancel()
	res.Wall = time.Since(began).Seconds()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return res, err
}

// runConsume only reads the topic, with the sink's consumer settings, and writes nothing:
// the rate the Kafka client can deliver records to Go on this machine, a ceiling for every
// contender that reads Kafka through it.
func runConsume(ctx context.Context, a childArgs) (childResult, error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": a.brokers, "group.id": a.group,
		"enable.auto.commit": false, "auto.offset.reset": "earliest", "isolation.level": "read_committed",
		"queued.max.messages.kbytes": 65536, "fetch.queue.backoff.ms": 0, "go.logs.channel.enable": false})
	if err != nil {
		return childResult{}, err
	}
	defer c.Close()
	if err := c.Subscribe(a.topic, nil); err != nil {
		return childResult{}, err
	}
	var n int64
	var first time.Time
	began := time.Now()
	for n < a.records && ctx.Err() == nil {
		if _, ok := c.Poll(100).(*kafka.Message); ok {
			if n == 0 {
				first = time.Now()
			}
			n++
		}
	}
	return childResult{Records: n - 1, Seconds: time.Since(first).Seconds(), Wall: time.Since(began).Seconds()}, ctx.Err()
}
