// Command bench measures eosink's throughput side by side with the database's raw COPY
// limit, an at-least-once baseline, per-message commits and a peer (the Debezium JDBC sink on
// Kafka Connect), in one run on one machine, and writes the results and their ratios as
// JSON. `make bench` runs it; docs/benchmarks.md explains the method and shows the results.
//
// Each measurement runs in a child process of its own (this binary, "child" mode), so that
// its CPU time and peak memory are its own. CPU seconds also count the broker's and
// PostgreSQL's processes, read from /proc before and after. Throughput is counted from the
// first committed record to the last, so that process start and the group join are left out
// for every contender alike.
//
// Environment: KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL (required); BENCH_RECORDS (default
// 2000000), BENCH_PARTITIONS (12), BENCH_BATCH (5000), BENCH_REPORT (.reports/bench.json),
// BENCH_REPEAT (3: runs of eos, eos_expr and at_least_once, interleaved, the median kept), BENCH_PEER
// (1; 0 skips the peer; envelope runs eos_envelope, eosink on the peer's 537-byte records, but
// not the peer), BENCH_CURVES (1; 0 skips the curves), BENCH_CURVE_SECONDS (8),
// BENCH_PROFILE (a path: CPU profile of the eosink run), BENCH_PROFILE_CDC (a path: CPU profile of
// the eos_cdc run), BENCH_CURVE_RECORDS (400000), BENCH_TOTAL_BUFFERED_MB (the sinks'
// MaxTotalBufferedBytes in MiB), BENCH_BUFFERED_MB and BENCH_BATCH_MB (their MaxBufferedBytes
// and MaxBatchBytes in MiB), BENCH_CDC_POOL (eos_cdc's pool_max_conns; default pgx's),
// BENCH_QUEUED_KB (their queued.max.messages.kbytes),
// BENCH_KAFKA (name=value,...: more librdkafka properties for the sinks' consumers), BENCH_DOCS (1 writes the chart to
// docs/benchmarks.png as well), BENCH_CDC (1; 0 skips the change-event contenders eos_cdc,
// eos_cdc_tx and peer_cdc), BENCH_CDC_TX (1; 0 skips eos_cdc_tx, the cdc plugin in consistency:
// transaction on the same changes in source transactions), BENCH_PROFILE_CDC_TX (a path: CPU
// profile of the eos_cdc_tx run), BENCH_CDC_TX_MAX_HELD_EVENTS and BENCH_CDC_TX_MAX_HELD_MB (its
// max_held_events and max_held_bytes), BENCH_CDC_RECORDS (change records; default BENCH_RECORDS, at most 500000),
// BENCH_TABLES (1; 0 skips the many-tables phase: the cdc plugin on 10 and 1,000 topics
// and tables through one pattern, COMMIT p50/p99 and cdc_tables_1000_vs_10; BENCH_ONLY=tables
// runs it alone), BENCH_RUN_RSS (1; 0 skips eos_run: the eosink binary's peak RSS on 256
// partitions, rss.go; BENCH_ONLY=rss runs it alone), BENCH_TABLES_RECORDS (200000), BENCH_TABLES_BATCH (50), BENCH_TABLES_RUNS (3:
// the counts in turn, medians kept), BENCH_TABLES_COUNTS
// (10,1000), BENCH_PROFILE_TABLES (a path prefix: CPU profile of each count's child,
// <prefix><count>), BENCH_COMMIT_DUMP (a path: each COMMIT span's start and duration, a line
// each, appended), BENCH_CDC_BATCH (eos_cdc's batch records; default 0, the cdc plugin's defaults),
// BENCH_PEER_CDC_REDUCTION (true: the peer's use.reduction.buffer in the cdc run),
// BENCH_PEER_CDC_UNNEST (false: its unnest inserts fail on MicroTimestamp), BENCH_CDC_REPEAT
// (1: interleaved runs of eos_cdc, eos_cdc_tx and peer_cdc, the median kept), BENCH_ONLY
// (expr: preload, then eos and eos_expr alone, eosink with and without three CEL expressions,
// eos_expr_vs_eos; cdc: run the change-event contenders alone; outbox: the relay alone; rtt: the round trips
// alone; initial: the initial load alone; tables: the many-tables phase alone), BENCH_INITIAL_LOAD (1; 0 skips the initial load: a snapshot of
// BENCH_INITIAL_LOAD_ROWS, default 10000000, narrow rows applied by the cdc plugin and by the
// plain insert at the sink's defaults), BENCH_INITIAL_POOL (both of its contenders'
// pool_max_conns; default pgx's), BENCH_PROFILE_INITIAL (a path: CPU profile of its cdc
// run), BENCH_HEAP_PROFILE (a path: each child's heap profile at its peak Go heap, overwritten by
// the next child), BENCH_PG_OPTIONS (the sinks' sessions' PostgreSQL options, "-c name=value ..."), BENCH_OUTBOX (1; 0
// skips the relay), BENCH_OUTBOX_EVENTS (200000), BENCH_OUTBOX_RATE (1000),
// BENCH_PRODUCER_QUEUE_MESSAGES (the producers'
// queue.buffering.max.messages: a small one runs the bench through full queues on purpose),
// BENCH_STALL_SECONDS (300: a contender that applies nothing for this long fails its phase),
// BENCH_CURVE_SET (all; scale: only the partitions, topics, instances and pool curves),
// BENCH_QUICK (1: a run of a few minutes, quickDefaults in curves.go, for the variables unset),
// BENCH_RTT (1; 0 skips the round-trip phase: eos, eos_cdc and the peer with PostgreSQL behind
// a delay proxy, report section round_trips, roundtrips.go), BENCH_RTT_DELAYS (0,500us,2ms:
// the one-way delays), BENCH_RTT_RECORDS (200000 plain rows), BENCH_RTT_CDC_RECORDS (100000
// change records), BENCH_RTT_PEER (1: peer_cdc and peer; cdc: peer_cdc only; 0: no peer;
// BENCH_PEER=0 turns it off too), BENCH_RTT_CDC (1; 0 skips eos_cdc and peer_cdc there),
// BENCH_RTT_PARTITIONS (the partitions of its topics; default BENCH_PARTITIONS). BENCH_ONLY=rtt
// runs the round-trip phase alone. BENCH_NATIVE (1; 0 skips the native anchor: PostgreSQL's
// logical replication against the cdc plugin on the same updates, eos_cdc_vs_native_apply,
// native.go; BENCH_ONLY=native runs it alone), BENCH_NATIVE_ROWS (100000), BENCH_NATIVE_UPDATES
// (200000), BENCH_NATIVE_RUNS (1: alternating runs of each, the median kept).
//
// A phase that fails (a preload, a contender, a curve's point) is recorded in the report
// under failed and printed as a FAILED line; the phases that do not need it still run, the
// report is written, and the bench exits 1.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		os.Exit(runChild(os.Args[2:]))
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// peerOn reports whether the peer runs (BENCH_PEER unset or 1).
func peerOn() bool {
	v := os.Getenv("BENCH_PEER")
	return v == "" || v == "1"
}

func envStr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

type bench struct {
	brokers, url string
	exe          string
	records      int64
	partitions   int
	batch        int
	rep          *Report
	logf         func(format string, args ...any)
}

func run() error {
	applyQuick()
	b := &bench{brokers: os.Getenv("KAFKA_BOOTSTRAP_SERVERS"), url: os.Getenv("DATABASE_URL"),
		records: int64(envInt("BENCH_RECORDS", 2_000_000)), partitions: envInt("BENCH_PARTITIONS", 12), batch: envInt("BENCH_BATCH", 5000)}
	if b.brokers == "" || b.url == "" {
		return fmt.Errorf("KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL must name the broker and the database (make bench starts them)")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	b.exe = exe
	b.init()
	b.runAll(context.Background())
	return b.finish()
}

// init sets the logger and an empty report.
func (b *bench) init() {
	b.logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "bench %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	b.rep = &Report{Started: time.Now().UTC(), Records: b.records, Partitions: b.partitions, Batch: b.batch,
		Command: "make bench", Machine: machine(), RecordsPerSecond: map[string]float64{}, Ratios: map[string]float64{},
		Measurements: map[string]*Measurement{}, Curves: map[string][]Point{}, Failed: map[string]string{}}
}

// runAll runs the phases in order. Each phase's error is recorded in the report and the run
// goes on with the phases that do not need the one that failed.
func (b *bench) runAll(ctx context.Context) {
	findServices(ctx, b.brokers, b.url)
	if !b.phase("setup", func() error { return b.resetSchemas(ctx) }) {
		return // no schema: nothing can run
	}

	if os.Getenv("BENCH_ONLY") == "rtt" { // the round-trip phase alone
		b.phase("round_trips", func() error { return b.roundTrips(ctx) })
		return
	}
	if os.Getenv("BENCH_ONLY") == "native" { // the native anchor alone (native.go)
		b.phase("native_apply", func() error { return b.nativeApply(ctx) })
		return
	}
	if os.Getenv("BENCH_ONLY") == "initial" { // the initial load alone (initload.go)
		b.phase("initial_load", func() error { return b.initialLoad(ctx) })
		return
	}
	if os.Getenv("BENCH_ONLY") == "rss" || (os.Getenv("BENCH_ONLY") == "" && envInt("BENCH_RUN_RSS", 1) == 1) { // rss.go
		b.phase("eos_run", func() error { return b.runRSS(ctx) })
	}
	if os.Getenv("BENCH_ONLY") == "rss" {
		return
	}
	if os.Getenv("BENCH_ONLY") == "outbox" || (os.Getenv("BENCH_ONLY") == "" && envInt("BENCH_OUTBOX", 1) == 1) { // the relay (outbox.go)
		b.phase("outbox", func() error { return b.outboxRelay(ctx) })
	}
	if os.Getenv("BENCH_ONLY") == "outbox" {
		return
	}
	if os.Getenv("BENCH_ONLY") == "tables" || (os.Getenv("BENCH_ONLY") == "" && envInt("BENCH_TABLES", 1) == 1) { // tables.go
		b.phase("cdc_tables", func() error { return b.cdcTables(ctx) })
	}
	if os.Getenv("BENCH_ONLY") == "tables" {
		return
	}
	if os.Getenv("BENCH_ONLY") == "cdc" { // the change-event contenders alone
		b.phase("cdc", func() error { return b.cdc(ctx, peerOn()) })
		return
	}

	b.phase("preload", func() error {
		b.logf("preloading %d records over %d partitions (topic bench-main)", b.records, b.partitions)
		took, err := preload(ctx, b.brokers, "bench-main", b.partitions, b.records, "normal")
		if err != nil {
			return err
		}
		b.logf("preloaded in %s (%.0f records/s)", took.Round(time.Millisecond), float64(b.records)/took.Seconds())
		return nil
	})

	steps := []struct {
		name, desc string
		args       []string
	}{
		{"copy", "pgx CopyFrom of the same rows from memory, 4 connections, one transaction per batch: no Kafka", []string{"-mode", "copy"}},
		{"kafka_consume", "confluent-kafka-go consumer alone, the sink's settings, no database: the Kafka client's ceiling", []string{"-mode", "consume", "-topic", "bench-main"}},
		{"eos", "eosink: rows and next offset in one transaction per batch, per partition", []string{"-mode", "eos", "-topic", "bench-main"}},
		{"eos_expr", "eosink with three CEL expressions: a where, a check and a column (every record passes)",
			[]string{"-mode", "eos", "-topic", "bench-main", "-format", "expr"}},
		{"at_least_once", "same plugin and batching; offsets committed to Kafka after each database commit", []string{"-mode", "alo", "-topic", "bench-main"}},
		{"per_message", "one transaction (idempotent upsert) and one synchronous Kafka commit per record, 20 s", []string{"-mode", "permsg", "-topic", "bench-main", "-limit", "20s"}},
	}
	// eos and at_least_once run BENCH_REPEAT times (default 3), interleaved, and keep the run
	// with the median rate: their ratio's target is within this machine's run-to-run noise.
	repeat := max(1, envInt("BENCH_REPEAT", 3))
	runs := map[string][]*Measurement{}
	for round := range repeat {
		for _, s := range steps {
			if round > 0 && s.name != "eos" && s.name != "at_least_once" && s.name != "eos_expr" {
				continue
			}
			if os.Getenv("BENCH_ONLY") == "expr" && s.name != "eos" && s.name != "eos_expr" {
				continue
			}
			if s.name == "eos" && round == 0 && os.Getenv("BENCH_PROFILE") != "" {
				s.args = append(s.args, "-cpuprofile", os.Getenv("BENCH_PROFILE"))
			}
			kind := "insert"
			if s.name == "per_message" {
				kind = "upsert" // its idempotent write needs the key
			}
			var needs []string
			if s.name != "copy" { // copy reads no topic
				needs = []string{"preload"}
			}
			b.phase(s.name, func() error {
				m, err := b.child(ctx, s.name, s.desc, kind, s.args...)
				if err != nil {
					if repeat > 1 {
						return fmt.Errorf("run %d of %d: %w", round+1, repeat, err)
					}
					return err
				}
				runs[s.name] = append(runs[s.name], m)
				return nil
			}, needs...)
		}
	}
	for name, ms := range runs {
		b.rep.Measurements[name] = median(ms)
	}
	if os.Getenv("BENCH_ONLY") == "expr" {
		return
	}

	if peerOn() || os.Getenv("BENCH_PEER") == "envelope" {
		b.peer(ctx)
	}

	if envInt("BENCH_CDC", 1) == 1 {
		b.phase("cdc", func() error { return b.cdc(ctx, peerOn()) })
	}
	if envInt("BENCH_INITIAL_LOAD", 1) == 1 { // a snapshot of BENCH_INITIAL_LOAD_ROWS rows (initload.go)
		b.phase("initial_load", func() error { return b.initialLoad(ctx) })
	}
	if envInt("BENCH_NATIVE", 1) == 1 { // PostgreSQL's logical replication on the same updates (native.go)
		b.phase("native_apply", func() error { return b.nativeApply(ctx) })
	}

	// Latency at half of eosink's peak, and at a quarter for the trend.
	for _, share := range []int{2, 4} {
		name := fmt.Sprintf("latency_1_%d", share)
		b.phase(name, func() error {
			eos := b.rep.Measurements["eos"]
			if eos == nil {
				return fmt.Errorf("not run: no eos measurement to take the peak rate from")
			}
			rate := int(eos.RecordsPerSecond) / share
			topic := fmt.Sprintf("bench-latency-%d", share)
			if err := createTopic(ctx, b.brokers, topic, b.partitions); err != nil {
				return err
			}
			lat, err := b.child(ctx, name, fmt.Sprintf("eosink at %d records/s (1/%d of its peak) for 20 s, "+
				"the producer running on the same machine: Kafka timestamp to end of COMMIT", rate, share),
				"insert", "-mode", "latency", "-topic", topic, "-rate", strconv.Itoa(rate), "-limit", "20s")
			if err != nil {
				return err
			}
			if share == 2 {
				b.rep.Latency = lat
			} else {
				b.rep.Measurements[lat.Name] = lat
			}
			return nil
		})
	}

	if envInt("BENCH_RTT", 1) == 1 { // PostgreSQL behind a delay proxy (roundtrips.go)
		b.phase("round_trips", func() error { return b.roundTrips(ctx) })
	}

	if envInt("BENCH_CURVES", 1) == 1 {
		b.curves(ctx)
	}
}

// phase runs fn as the named phase of the run. Its error, or its panic, is recorded in the
// report (failed: {name: error}) and the run goes on: the report is written at the end
// whatever failed, and the bench then exits non-zero. A phase that needs one that failed is
// not run, and is marked failed with the reason. It reports whether fn ran and succeeded.
func (b *bench) phase(name string, fn func() error, needs ...string) (ok bool) {
	for _, n := range needs {
		if _, failed := b.rep.Failed[n]; failed {
			b.fail(name, fmt.Errorf("not run: %s failed", n))
			return false
		}
	}
	defer func() {
		if r := recover(); r != nil {
			b.logf("%s: panic: %v\n%s", name, r, debug.Stack())
			b.fail(name, fmt.Errorf("panic: %v", r))
			ok = false
		}
	}()
	if err := fn(); err != nil {
		b.fail(name, err)
		return false
	}
	return true
}

// fail records err as phase name's failure (after any earlier one of the same phase).
func (b *bench) fail(name string, err error) {
	b.logf("%s: FAILED: %v", name, err)
	msg := err.Error()
	if old, ok := b.rep.Failed[name]; ok {
		msg = old + "; " + msg
	}
	b.rep.Failed[name] = msg
}

// finish writes the report, and fails when a phase failed or a cdc table did not verify.
func (b *bench) finish() error {
	b.summarize()
	if err := b.write(); err != nil {
		return err
	}
	if n := len(b.rep.Failed); n > 0 {
		names := slices.Sorted(maps.Keys(b.rep.Failed))
		return fmt.Errorf("%d phase(s) failed: %s (the report has each error)", n, strings.Join(names, ", "))
	}
	// A table that does not hold the final state of the change events fails the bench, after
	// the report is written.
	for _, k := range []string{"eos_cdc", "eos_cdc_tx", "peer_cdc"} {
		if m := b.rep.Measurements[k]; m != nil && m.Verification != nil && !m.Verification.OK {
			return fmt.Errorf("%s: %s", k, m.Verification)
		}
	}
	return nil
}

// resetSchemas drops what an earlier run left and creates the offsets table.
func (b *bench) resetSchemas(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS bench CASCADE; DROP SCHEMA IF EXISTS bench_eosink CASCADE; CREATE SCHEMA bench"); err != nil {
		return err
	}
	return sink.Migrate(ctx, b.url, "bench_eosink")
}

// table creates a fresh target table; upsert gives it a primary key.
func (b *bench) table(ctx context.Context, name, kind string) error {
	if kind == "cdc" {
		return b.cdcTable(ctx, name)
	}
	if kind == "initial" || kind == "initial_cdc" { // initload.go
		return b.initialTable(ctx, name, kind == "initial_cdc")
	}
	if kind == "native" { // native.go: the replica with the initial rows
		return b.nativeTableCreate(ctx, name)
	}
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	pk := ""
	if kind == "upsert" {
		pk = " PRIMARY KEY"
	}
	t := pgx.Identifier{benchSchema, name}.Sanitize()
	_, err = conn.Exec(ctx, "DROP TABLE IF EXISTS "+t+"; CREATE TABLE "+t+` (id bigint NOT NULL`+pk+
		`, account text NOT NULL, amount integer NOT NULL, currency text NOT NULL, ts timestamptz NOT NULL, note text)`)
	return err
}

var seq int

// benchSchema holds the contenders' tables (a test sets its own).
var benchSchema = "bench"

// child runs one measurement in a child process and adds the services' CPU.
func (b *bench) child(ctx context.Context, name, desc, kind string, args ...string) (*Measurement, error) {
	seq++
	tableName := fmt.Sprintf("t%d_%s", seq, name)
	if err := b.table(ctx, tableName, kind); err != nil {
		return nil, err
	}
	schema := benchSchema
	if kind == "cdc" || kind == "native" {
		schema = cdcSchema
	}
	all := append([]string{"child", "-brokers", b.brokers, "-url", b.url, "-schema", schema, "-table", tableName, "-kind", kind,
		"-group", fmt.Sprintf("bench-%d-%d", time.Now().Unix(), seq), "-records", strconv.FormatInt(b.records, 10),
		"-partitions", strconv.Itoa(b.partitions), "-batch", strconv.Itoa(b.batch)}, args...)
	b.logf("%s: %s", name, desc)
	cmd := exec.CommandContext(ctx, b.exe, all...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, io.MultiWriter(os.Stderr, &errOut)
	k0, p0 := serviceCPU()
	mb0, mt0 := machineCPU()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("child %s: %v: %s", name, err, strings.TrimSpace(tail(errOut.String()+out.String(), 6)))
	}
	k1, p1 := serviceCPU()
	mb1, mt1 := machineCPU()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res childResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		return nil, fmt.Errorf("child output %q: %w", out.String(), err)
	}
	m := &Measurement{Name: name, Description: desc, Records: res.Records, Seconds: res.Seconds, P50ms: res.P50ms, P99ms: res.P99ms}
	m.RecordsPerSecond = float64(res.Records) / res.Seconds
	m.CPU.Contender = cmd.ProcessState.UserTime().Seconds() + cmd.ProcessState.SystemTime().Seconds()
	m.CPU.Kafka, m.CPU.Postgres = k1-k0, p1-p0
	if res.Records > 0 {
		m.CPUSecondsPerM = (m.CPU.Contender + m.CPU.Kafka + m.CPU.Postgres) / float64(res.Records) * 1e6
	}
	m.PeakRSSMiB = float64(res.HWMKiB) / 1024
	m.PGConnections, m.LatencyBreakdown, m.Set, m.RTT = res.PGConns, res.Breakdown, res.Set, res.RTT
	m.Logged53200, m.First53200 = res.Logged53200, res.First53200
	m.PGConnections, m.LatencyBreakdown, m.Set, m.tenths = res.PGConns, res.Breakdown, res.Set, res.Tenths
	if st := res.Set; st != nil {
		b.logf("%s: %.0f commits of %.0f source transactions (%.0f records each), commits %.1fs (Apply %.1fs), Add %.1fs (%.0f records), "+
			"of %.1fs from the first commit to the last (%.1fs in all)", name, st["commits"], st["units"], st["committed_records"]/max(1, st["commits"]),
			st["commit_seconds"], st["apply_seconds"], st["add_seconds"], st["adds"], res.Seconds, res.Wall)
	}
	m.MachineCPUBusy = busyShare(mb0, mt0, mb1, mt1)
	if res.Pauses > 0 {
		m.Note = fmt.Sprintf("%d batches, %d pauses on a full buffer", res.Batches, res.Pauses)
	}
	if res.QueueFull > 0 {
		m.Note = strings.TrimSpace(m.Note + fmt.Sprintf(" the producer waited %d times on its full queue", res.QueueFull))
	}
	b.logf("%s: %d records in %.2fs: %.0f records/s, %.1f CPU s per million, peak RSS %.0f MiB%s", name, res.Records, res.Seconds,
		m.RecordsPerSecond, m.CPUSecondsPerM, m.PeakRSSMiB, latencyText(m))
	return m, nil
}

func repoRoot() string {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		wd, _ := os.Getwd()
		return wd
	}
	return strings.TrimSpace(string(out))
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
