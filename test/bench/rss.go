package main

// The product's memory (BENCH_ONLY=rss runs it alone; in a full run unless BENCH_RUN_RSS=0): the eosink binary
// itself, `eosink migrate up` then `eosink run` on a pipeline file with the table plugin and
// commit_to_kafka: true, defaults otherwise, on a topic of many partitions of small JSON
// records. The bench's other contenders embed the sink in a child of this binary with the
// bench's settings (-batch 5000, a short session timeout); this phase measures what a user
// runs. The parent reads the process's VmHWM from /proc while it runs, counts what it
// applied from the offsets table, stops it with SIGTERM once every record is applied (it must
// drain and exit 0), and verifies the table's rows against the records produced.
//
// Environment: BENCH_RSS_PARTITIONS (256), BENCH_RSS_RECORDS (1000000), BENCH_EOSINK (a built
// eosink binary; default: built from this checkout into a temporary folder), BENCH_RSS_KAFKA
// (name=value,...: librdkafka properties added to the pipeline file, for experiments),
// BENCH_RSS_ENV (NAME=value,...: environment for the eosink process, GODEBUG=gctrace=1 for one),
// BENCH_RSS_LOG (a path: keep the eosink process's output there), BENCH_RSS_PRELOAD (1; 0 reads
// the topic an earlier run preloaded with the same partitions and records, for experiments).

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/offsets"
)

// rssLimitMiB is the target: peak RSS of `eosink run` at 256 partitions (issue 26).
const rssLimitMiB = 256

const (
	rssTopic   = "bench-rss"
	rssTable   = "rss"
	rssOffsets = "bench_rss_eosink" // the pipeline's offsets schema
)

// rssGoal is the target line's goal for the given partition count.
func rssGoal(partitions int) string {
	return fmt.Sprintf("peak RSS of eosink run <= %d MiB at %d partitions", rssLimitMiB, partitions)
}

// rssTarget is the report's target line for the eosink run phase: m its measurement (nil
// when the phase did not measure), failed the phase's error (empty when it did not fail).
func rssTarget(m *Measurement, partitions int, failed string) Target {
	goal := rssGoal(partitions)
	if m == nil {
		actual := "not measured"
		if failed != "" {
			actual += ": " + firstLine(failed)
		}
		return Target{Goal: goal, Actual: actual}
	}
	actual := fmt.Sprintf("%.0f MiB (%.0f records/s)", m.PeakRSSMiB, m.RecordsPerSecond)
	ok := m.PeakRSSMiB > 0 && m.PeakRSSMiB <= rssLimitMiB
	if v := m.Verification; v == nil || !v.OK {
		ok = false
		actual += ", rows not verified"
	}
	if failed != "" {
		ok = false
		actual += ", phase failed: " + firstLine(failed)
	}
	return Target{Goal: goal, Actual: actual, Met: ok}
}

// rssPipeline is the pipeline file: the table plugin writing the bench's columns, with
// commit_to_kafka: true and nothing else set but extra librdkafka properties.
func rssPipeline(brokers, url, group, topic, table string, props map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline: %s\nkafka:\n  brokers: %q\n  group: %s\n  topics: [%s]\n  commit_to_kafka: true\n", group, brokers, group, topic)
	if len(props) > 0 {
		b.WriteString("  properties:\n")
		for _, k := range slices.Sorted(maps.Keys(props)) {
			fmt.Fprintf(&b, "    %s: %q\n", k, props[k])
		}
	}
	fmt.Fprintf(&b, "database:\n  url: %q\n  schema: %s\nsink:\n  type: table\n  table: %s\n  columns:\n", url, rssOffsets, table)
	for _, c := range []string{"id", "account", "amount", "currency", "ts", "note"} {
		fmt.Fprintf(&b, "    %s: value.%s\n", c, c)
	}
	return b.String()
}

// pairs parses "a=b,c=d" (empty entries skipped).
func pairs(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// vmHWMKiB reads VmHWM (kB) from a /proc/PID/status text; 0 when absent.
func vmHWMKiB(status string) int64 {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// rssTS is the records' ts as Unix milliseconds (appendRecord writes one ts for all).
var rssTS = time.Date(2026, 11, 30, 7, 0, 0, 123e6, time.UTC).UnixMilli()

// rssRowText is the verification's text of record i's row: the columns appendRecord's
// "normal" record gives it, ts in Unix milliseconds, joined with '|'.
func rssRowText(buf []byte, i int64) []byte {
	buf = strconv.AppendInt(buf, i, 10)
	buf = append(buf, "|acct-"...)
	buf = appendPadded(buf, (i*7919)%10000, 4)
	buf = append(buf, '|')
	buf = strconv.AppendInt(buf, i%1000, 10)
	buf = append(buf, "|EUR|"...)
	buf = strconv.AppendInt(buf, rssTS, 10)
	return append(buf, "|payment received, thank you"...)
}

// rssHash is the md5 of the n rows' texts in id order, one per line.
func rssHash(n int64) string {
	h := md5.New()
	var buf []byte
	for i := range n {
		buf = buf[:0]
		if i > 0 {
			buf = append(buf, '\n')
		}
		h.Write(rssRowText(buf, i))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// rssHashSQL hashes the table as rssHash does the records.
const rssHashSQL = `SELECT count(*), coalesce(md5(string_agg(concat_ws('|', id, account, amount, currency,
	(extract(epoch FROM ts) * 1000)::bigint, note), E'\n' ORDER BY id)), md5('')) FROM %s`

// eosinkBinary is BENCH_EOSINK, or cmd/eosink built into dir.
func eosinkBinary(ctx context.Context, dir string) (string, error) {
	if p := os.Getenv("BENCH_EOSINK"); p != "" {
		return p, nil
	}
	bin := filepath.Join(dir, "eosink")
	cmd := exec.CommandContext(ctx, envStr("GO", "go"), "build", "-o", bin, "./cmd/eosink")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/eosink: %v: %s", err, tail(string(out), 6))
	}
	return bin, nil
}

// runRSS is the phase: preload, run the binary, measure, verify.
func (b *bench) runRSS(ctx context.Context) error {
	parts, n := envInt("BENCH_RSS_PARTITIONS", 256), int64(envInt("BENCH_RSS_RECORDS", 1_000_000))
	dir, err := os.MkdirTemp("", "bench-rss-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := eosinkBinary(ctx, dir)
	if err != nil {
		return err
	}
	if envInt("BENCH_RSS_PRELOAD", 1) == 1 {
		b.logf("eos_run: preloading %d records over %d partitions (topic %s)", n, parts, rssTopic)
		if _, err := preload(ctx, b.brokers, rssTopic, parts, n, "normal"); err != nil {
			return err
		}
	}
	if err := b.table(ctx, rssTable, "insert"); err != nil {
		return err
	}
	group := fmt.Sprintf("bench-rss-%d", time.Now().Unix())
	cfgPath := filepath.Join(dir, "pipeline.yaml")
	yaml := rssPipeline(b.brokers, b.url, group, rssTopic, benchSchema+"."+rssTable, pairs(os.Getenv("BENCH_RSS_KAFKA")))
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, bin, "migrate", "up", "-config", cfgPath).CombinedOutput(); err != nil {
		return fmt.Errorf("eosink migrate up: %v: %s", err, tail(string(out), 6))
	}
	m, err := b.measureRun(ctx, bin, cfgPath, dir, group, n)
	if m != nil {
		m.Description = fmt.Sprintf("the eosink binary: eosink run, table plugin, commit_to_kafka: true, defaults otherwise, %d partitions", parts)
		b.rep.Measurements["eos_run"] = m
	}
	if err != nil {
		return err
	}
	v, err := b.verifyRSS(ctx, n)
	if err != nil {
		return err
	}
	m.Verification = v
	b.logf("eos_run: %d records in %.2fs: %.0f records/s, %.1f CPU s per million, peak RSS %.0f MiB; %s", m.Records, m.Seconds,
		m.RecordsPerSecond, m.CPUSecondsPerM, m.PeakRSSMiB, v)
	if !v.OK {
		return fmt.Errorf("eos_run: %s", v)
	}
	return nil
}

// measureRun runs `eosink run` until the offsets table holds all n records, then SIGTERM:
// it must exit 0. The peak RSS is the process's last VmHWM read before it exited.
func (b *bench) measureRun(ctx context.Context, bin, cfgPath, dir, group string, n int64) (*Measurement, error) {
	logPath := envStr("BENCH_RSS_LOG", filepath.Join(dir, "eosink.log"))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "-config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = os.Environ()
	for k, v := range pairs(os.Getenv("BENCH_RSS_ENV")) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	pool, err := pgxpool.New(ctx, b.url)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	positions := offsets.NewOperator(pool, rssOffsets) // the stored positions, as eosink status reads them
	k0, p0 := serviceCPU()
	mb0, mt0 := machineCPU()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	var hwm atomic.Int64
	go func() { // VmHWM until the process is gone
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		for {
			if data, err := os.ReadFile(status); err == nil {
				hwm.Store(max(hwm.Load(), vmHWMKiB(string(data))))
			}
			select {
			case <-exited:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		close(exited)
		done <- err
	}()
	logTail := func() string { data, _ := os.ReadFile(logPath); return strings.TrimSpace(tail(string(data), 8)) }
	applied := func() int64 {
		rows, err := positions.List(ctx, group)
		if err != nil {
			return 0
		}
		var v int64
		for _, r := range rows {
			if r.Topic == rssTopic {
				v += r.NextOffset
			}
		}
		return v
	}
	res, werr := watch(ctx, n, 0, done, applied, nil)
	if werr != nil {
		_ = cmd.Process.Kill()
		<-exited
		return nil, fmt.Errorf("eosink run: %v: %s", werr, logTail())
	}
	peak := hwm.Load() // before the drain
	_ = cmd.Process.Signal(syscall.SIGTERM)
	var rerr error
	hung := false
	select {
	case rerr = <-done:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGQUIT) // Go prints every goroutine's stack to the log, then exits
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		rerr, hung = fmt.Errorf("did not exit within 90 s of SIGTERM (its goroutines are in its log: set BENCH_RSS_LOG to keep it)"), true
	}
	k1, p1 := serviceCPU()
	mb1, mt1 := machineCPU()
	m := &Measurement{Name: "eos_run", Records: res.Records, Seconds: res.Seconds, RecordsPerSecond: float64(res.Records) / res.Seconds}
	m.PeakRSSMiB = float64(max(peak, hwm.Load())) / 1024
	if ps := cmd.ProcessState; ps != nil {
		m.CPU.Contender = ps.UserTime().Seconds() + ps.SystemTime().Seconds()
	}
	m.CPU.Kafka, m.CPU.Postgres = k1-k0, p1-p0
	if res.Records > 0 {
		m.CPUSecondsPerM = (m.CPU.Contender + m.CPU.Kafka + m.CPU.Postgres) / float64(res.Records) * 1e6
	}
	m.MachineCPUBusy = busyShare(mb0, mt0, mb1, mt1)
	if hung {
		return m, fmt.Errorf("eosink run: %v", rerr)
	}
	if rerr != nil {
		return m, fmt.Errorf("eosink run after SIGTERM: %v: %s", rerr, logTail())
	}
	return m, nil
}

// verifyRSS compares the table with the n records produced: count, ids and md5 of the rows.
func (b *bench) verifyRSS(ctx context.Context, n int64) (*Verification, error) {
	conn, err := b.hashConn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	t := pgx.Identifier{benchSchema, rssTable}.Sanitize()
	v := &Verification{ExpectedRows: n, ExpectedHash: rssHash(n)}
	if err := conn.QueryRow(ctx, fmt.Sprintf(rssHashSQL, t)).Scan(&v.Rows, &v.Hash); err != nil {
		return nil, err
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE id < 0 OR id >= $1), $1 - count(DISTINCT id) FILTER (WHERE id >= 0 AND id < $1) FROM `+t, n).
		Scan(&v.Extra, &v.Missing); err != nil {
		return nil, err
	}
	v.OK = v.Rows == v.ExpectedRows && v.Hash == v.ExpectedHash && v.Missing == 0 && v.Extra == 0
	return v, nil
}
