package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TablesPoint is one point of the many-tables phase: the medians of its runs.
type TablesPoint struct {
	Tables      int       `json:"tables"`
	Records     int64     `json:"records"`
	Batch       int       `json:"batch"`
	CommitP50ms float64   `json:"commit_p50_ms"`
	CommitP99ms float64   `json:"commit_p99_ms"`
	PerSecond   float64   `json:"records_per_second"`
	RunsP99ms   []float64 `json:"runs_commit_p99_ms"` // each run's, in run order
	Logged53200 int64     `json:"logged_53200"`
	First53200  string    `json:"first_53200,omitempty"`
	RowsOK      bool      `json:"rows_ok"` // in every run
}

// cdcTables is the many-tables phase (BENCH_TABLES=0 skips it): the cdc plugin on N
// topics of one partition each, one source table per topic, matched by one pattern
// subscription, each into its own replica table (tb<N>_${source.table}), for N = 10 and
// 1,000. Both runs apply the same number of change records (BENCH_TABLES_RECORDS, default
// 200,000: inserts of new keys, round robin over the tables) in batches of the same size
// (BENCH_TABLES_BATCH, default 50), so that their commits compare: the p99 of the
// COMMITs' durations (eosink.commit spans) at 1,000 tables against 10 is
// cdc_tables_1000_vs_10. The table counts run in turn, BENCH_TABLES_RUNS times (default 3),
// each run into new tables and with new positions, and each point keeps its runs' medians:
// on a shared machine one run's p99 swings by several times. A SQLSTATE 53200 in the
// sink's log (out of shared memory, past max_locks_per_transaction) fails the phase, as
// does a table without its rows.
func (b *bench) cdcTables(ctx context.Context) error {
	records := int64(envInt("BENCH_TABLES_RECORDS", 200_000))
	batch := envInt("BENCH_TABLES_BATCH", 50)
	runs := max(1, envInt("BENCH_TABLES_RUNS", 3))
	counts := []int{10, 1000}
	if v := os.Getenv("BENCH_TABLES_COUNTS"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				return fmt.Errorf("BENCH_TABLES_COUNTS: %q is not a table count", f)
			}
			counts = append(counts, n)
		}
	}
	perTable := make([][]int64, len(counts))
	for i, n := range counts {
		var err error
		if perTable[i], err = b.tablesProduce(ctx, n, records); err != nil {
			return fmt.Errorf("%d tables: %w", n, err)
		}
	}
	points := make([]TablesPoint, len(counts))
	var p50s, p99s, rates [][]float64 = make([][]float64, len(counts)), make([][]float64, len(counts)), make([][]float64, len(counts))
	var failed []string
	for run := range runs {
		for i, n := range counts {
			pt := &points[i]
			if run == 0 {
				*pt = TablesPoint{Tables: n, Batch: batch, RowsOK: true}
			}
			m, ok, err := b.tablesRun(ctx, n, records, batch, perTable[i])
			if err != nil {
				return fmt.Errorf("%d tables, run %d: %w", n, run+1, err)
			}
			b.logf("cdc_tables_%d (run %d of %d): %d records into %d tables in batches of %d: COMMIT p50 %.1f ms, p99 %.1f ms, %.0f records/s, %d log lines with 53200, rows %v",
				n, run+1, runs, m.Records, n, batch, m.P50ms, m.P99ms, m.RecordsPerSecond, m.Logged53200, ok)
			pt.Records = m.Records
			p50s[i], p99s[i], rates[i] = append(p50s[i], m.P50ms), append(p99s[i], m.P99ms), append(rates[i], m.RecordsPerSecond)
			pt.RunsP99ms = append(pt.RunsP99ms, m.P99ms)
			pt.RowsOK = pt.RowsOK && ok
			if pt.Logged53200 += m.Logged53200; pt.First53200 == "" {
				pt.First53200 = m.First53200
			}
		}
	}
	for i := range points {
		pt := &points[i]
		pt.CommitP50ms, pt.CommitP99ms, pt.PerSecond = medianOf(p50s[i]), medianOf(p99s[i]), medianOf(rates[i])
		b.logf("cdc_tables_%d: medians of %d runs: COMMIT p50 %.1f ms, p99 %.1f ms (runs %v), %.0f records/s",
			pt.Tables, runs, pt.CommitP50ms, pt.CommitP99ms, pt.RunsP99ms, pt.PerSecond)
		if pt.Logged53200 > 0 {
			failed = append(failed, fmt.Sprintf("%d tables: %d log lines with SQLSTATE 53200, the first: %s", pt.Tables, pt.Logged53200, pt.First53200))
		}
		if !pt.RowsOK {
			failed = append(failed, fmt.Sprintf("%d tables: a replica table does not hold its rows", pt.Tables))
		}
	}
	b.rep.Tables = append(b.rep.Tables, points...)
	var p10, p1000 float64
	for _, pt := range b.rep.Tables {
		switch pt.Tables {
		case 10:
			p10 = pt.CommitP99ms
		case 1000:
			p1000 = pt.CommitP99ms
		}
	}
	if p10 > 0 && p1000 > 0 {
		b.rep.Ratios["cdc_tables_1000_vs_10"] = p1000 / p10
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s", strings.Join(failed, "; "))
	}
	return nil
}

// medianOf returns the median of v (the mean of the middle two for an even count).
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// tablesProduce produces records change events over n new topics; perTable is the number
// of records (keys 1..perTable[i]) of table i.
func (b *bench) tablesProduce(ctx context.Context, n int, records int64) (perTable []int64, err error) {
	topics := tablesTopics(n)
	if err := createTopics(ctx, b.brokers, topics); err != nil {
		return nil, err
	}
	p, err := newProducer(kafka.ConfigMap{"bootstrap.servers": b.brokers, "enable.idempotence": true, "linger.ms": 20,
		"batch.size": 1 << 20, "queue.buffering.max.kbytes": 64 << 10}, true)
	if err != nil {
		return nil, err
	}
	perTable = make([]int64, n)
	row := cdcRow{account: "acct", cents: 12345, qty: 3, updated: 1_700_000_000_000_000, booked: 1_700_000_000_000_000}
	var buf []byte
	for seq := range records {
		i := int(seq % int64(n))
		perTable[i]++
		buf = appendCDCValue(buf[:0], "c", perTable[i], nil, &row, oneTxPerChange(seq))
		value := bytes.Replace(buf, []byte(`"table":"accounts"`), []byte(`"table":"t`+strconv.Itoa(i)+`"`), 1)
		if err := p.produce(ctx, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topics[i], Partition: 0},
			Key: cdcKey(perTable[i]), Value: value}); err != nil {
			_, _ = p.close(10 * time.Second)
			return nil, err
		}
	}
	if _, err := p.close(120 * time.Second); err != nil {
		return nil, err
	}
	return perTable, nil
}

// tablesTopics are the n topics of a point, named <topic.prefix>.<schema>.<table> as the
// plugin checks.
func tablesTopics(n int) []string {
	topics := make([]string, n)
	for i := range topics {
		topics[i] = fmt.Sprintf("benchtables%d.public.t%d", n, i)
	}
	return topics
}

// tablesRun applies the n topics from their start into n new tables, with no positions of
// an earlier run's, as a new pipeline, and checks the tables' rows.
func (b *bench) tablesRun(ctx context.Context, n int, records int64, batch int, perTable []int64) (*Measurement, bool, error) {
	prefix := fmt.Sprintf("tb%d_", n)
	if err := b.createTables(ctx, prefix, n); err != nil {
		return nil, false, err
	}
	name := fmt.Sprintf("cdc_tables_%d", n)
	saved := b.records
	b.records = records
	args := []string{"-mode", "eos", "-format", "cdc", "-topic", fmt.Sprintf(`^benchtables%d\.public\.t[0-9]+$`, n), "-table", prefix + "${source.table}",
		"-batch", strconv.Itoa(batch), "-commit-spans", "-records", strconv.FormatInt(records, 10)}
	if p := os.Getenv("BENCH_PROFILE_TABLES"); p != "" { // a path prefix: CPU profile of each point's runs, <prefix><tables> (the last run's)
		args = append(args, "-cpuprofile", p+strconv.Itoa(n))
	}
	m, err := b.child(ctx, name, fmt.Sprintf("eosink's cdc plugin on %d topics (one pattern) into %d tables", n, n), "cdc", args...)
	b.records = saved
	if err != nil {
		return nil, false, err
	}
	b.rep.Measurements[name] = m // the last run's
	ok, err := b.tablesHold(ctx, prefix, perTable)
	return m, ok, err
}

// createTables makes n replica tables prefix t0 ... t<n-1> in cdcSchema.
func (b *bench) createTables(ctx context.Context, prefix string, n int) error {
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	// An earlier run's positions would make this run skip every change as not newer.
	like := pgx.Identifier{cdcSchema}.Sanitize() + "." + `"` + strings.ReplaceAll(prefix, "_", `\_`) + "t%"
	for _, pos := range []string{"cdc_positions", "cdc_positions_int", "cdc_load_floors"} {
		if _, err := conn.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE target LIKE $1", pgx.Identifier{"bench_eosink", pos}.Sanitize()), like); err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42P01" { // undefined_table: no cdc run yet
				return err
			}
		}
	}
	// A checkpoint inside a run makes its slowest commits: its sync phase fsyncs every file
	// the phase's DROPs and CREATEs touched (8,500 here) while the sink's commits fsync the
	// WAL, and after it starts, the first change of each page writes the whole page to the
	// WAL (more pages with more tables). The bench writes enough WAL for one every few runs
	// (max_wal_size), so it fell in one run and not another by chance: each run's tables
	// are made right after one, and none falls inside a run of this size.
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("CHECKPOINT before the run (the bench's role needs pg_checkpoint or superuser): %w", err)
	}
	var sql strings.Builder
	for i := range n {
		t := pgx.Identifier{cdcSchema, fmt.Sprintf("%st%d", prefix, i)}.Sanitize()
		fmt.Fprintf(&sql, "DROP TABLE IF EXISTS %s; CREATE TABLE %s (%s, loaded_at timestamptz NOT NULL DEFAULT clock_timestamp());\n", t, t, cdcColumns)
		if i%100 == 99 || i == n-1 {
			if _, err := conn.Exec(ctx, sql.String()); err != nil {
				return err
			}
			sql.Reset()
		}
	}
	return nil
}

// tablesHold reports whether each replica table holds the keys 1..want[i].
func (b *bench) tablesHold(ctx context.Context, prefix string, want []int64) (bool, error) {
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	for i, w := range want {
		var rows, maxID int64
		t := pgx.Identifier{cdcSchema, fmt.Sprintf("%st%d", prefix, i)}.Sanitize()
		if err := conn.QueryRow(ctx, "SELECT count(*), coalesce(max(id), 0) FROM "+t).Scan(&rows, &maxID); err != nil {
			return false, err
		}
		if rows != w || maxID != w {
			b.logf("%s: %d rows, largest key %d; want %d", t, rows, maxID, w)
			return false, nil
		}
	}
	return true, nil
}

// createTopics creates the topics (one partition each) in one request, deleting old ones
// first, and waits until the metadata has them all.
func createTopics(ctx context.Context, brokers string, topics []string) error {
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
	if err != nil {
		return err
	}
	defer a.Close()
	_, _ = a.DeleteTopics(ctx, topics)
	specs := make([]kafka.TopicSpecification, len(topics))
	for i, t := range topics {
		specs[i] = kafka.TopicSpecification{Topic: t, NumPartitions: 1, ReplicationFactor: 1}
	}
	for attempt := 0; ; attempt++ {
		res, err := a.CreateTopics(ctx, specs)
		var left []kafka.TopicSpecification
		for i, r := range res {
			if r.Error.Code() != kafka.ErrNoError {
				left = append(left, specs[i])
			}
		}
		if err == nil && len(left) == 0 {
			break
		}
		if attempt > 60 {
			return fmt.Errorf("create %d topics: %v, %d left (%v)", len(topics), err, len(left), res[0].Error)
		}
		if err == nil {
			specs = left
		}
		time.Sleep(500 * time.Millisecond) // deletions still in progress
	}
	for range 120 {
		md, err := a.GetMetadata(nil, true, 10000)
		if err == nil {
			ok := 0
			for _, t := range topics {
				if tm, found := md.Topics[t]; found && tm.Error.Code() == kafka.ErrNoError && len(tm.Partitions) == 1 {
					ok++
				}
			}
			if ok == len(topics) {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("%d topics not all in the metadata", len(topics))
}

// commitDump, when BENCH_COMMIT_DUMP names a file, gets a line per COMMIT span of a child
// run with -commit-spans: its start (µs since the epoch) and its duration (ms), to place
// the slowest ones against PostgreSQL's log (checkpoints, autovacuum).
var commitDump = func() *os.File {
	p := os.Getenv("BENCH_COMMIT_DUMP")
	if p == "" {
		return nil
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: BENCH_COMMIT_DUMP: %v\n", err)
		return nil
	}
	return f
}()

// spanTimes collects the durations of the ended spans named name (a SpanProcessor).
type spanTimes struct {
	name string
	mu   sync.Mutex
	ms   []float64
}

func (s *spanTimes) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (s *spanTimes) OnEnd(sp sdktrace.ReadOnlySpan) {
	if sp.Name() != s.name {
		return
	}
	s.mu.Lock()
	ms := float64(sp.EndTime().Sub(sp.StartTime()).Microseconds()) / 1000
	s.ms = append(s.ms, ms)
	if commitDump != nil {
		fmt.Fprintf(commitDump, "%d %.3f\n", sp.StartTime().UnixMicro(), ms)
	}
	s.mu.Unlock()
}
func (s *spanTimes) Shutdown(context.Context) error   { return nil }
func (s *spanTimes) ForceFlush(context.Context) error { return nil }

// quantiles returns the p50 and p99 of the durations, in milliseconds.
func (s *spanTimes) quantiles() (p50, p99 float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ms) == 0 {
		return 0, 0
	}
	v := slices.Clone(s.ms)
	slices.Sort(v)
	at := func(q float64) float64 { return v[min(len(v)-1, int(q*float64(len(v))))] }
	return at(0.5), at(0.99)
}

// countingLog is the sink's log in a child: it goes to stderr, and the lines naming
// SQLSTATE 53200 are counted.
type countingLog struct {
	mu    sync.Mutex
	n     int64
	first string
}

var sinkLog = &countingLog{}

func (c *countingLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("53200")) || bytes.Contains(p, []byte("out of shared memory")) {
		c.mu.Lock()
		c.n++
		if c.first == "" {
			c.first = strings.TrimSpace(string(p))
		}
		c.mu.Unlock()
	}
	return os.Stderr.Write(p)
}

func (c *countingLog) count() (int64, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.first
}
