package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

var peerLine = regexp.MustCompile(`rows=(\d+) duplicates=(\d+).*first-to-last row ([0-9.]+)s -> `)

// peer runs the Debezium JDBC sink on Kafka Connect over a topic holding the same records in
// the JsonConverter envelope it needs, and eosink over the very same topic for a like-for-like
// ratio. Its phases: preload_envelope, eos_envelope and peer.
func (b *bench) peer(ctx context.Context) {
	b.phase("preload_envelope", func() error {
		b.logf("preloading the same records in the JsonConverter envelope (topic bench-envelope) for the peer")
		_, err := preload(ctx, b.brokers, "bench-envelope", b.partitions, b.records, "envelope")
		return err
	})
	b.phase("eos_envelope", func() error {
		m, err := b.child(ctx, "eos_envelope", "eosink on the peer's topic (the same records in the JsonConverter envelope)", "insert",
			"-mode", "eos", "-topic", "bench-envelope", "-format", "envelope")
		if err != nil {
			return err
		}
		b.rep.Measurements["eos_envelope"] = m
		return nil
	}, "preload_envelope")
	if os.Getenv("BENCH_PEER") == "envelope" {
		return // eosink on the envelope records only (their memory), not the peer
	}
	b.phase("peer", func() error {
		pm, err := b.runPeer(ctx, "peer", "Debezium JDBC sink connector on Kafka Connect 4.1.1, standalone, 2 tasks, "+
			"unnest inserts, JsonConverter with schemas (each value carries its schema)", "bench-envelope", b.records, -1,
			"PEER_TABLE=peer_bench", "PEER_SCHEMA=bench", "PEER_UNNEST=true")
		if err != nil {
			return err
		}
		b.rep.Measurements["peer"] = pm
		return nil
	}, "preload_envelope")
}

// runPeer runs test/bench/peer/run-peer.sh on topic with the extra environment env and
// reads its result line. expected is what the script waits for (rows in the table, unless
// env sets PEER_DONE_SQL); records, when not -1, is the number of records the rate is
// counted in (else the table's rows).
func (b *bench) runPeer(ctx context.Context, name, desc, topic string, expected, records int64, env ...string) (*Measurement, error) {
	script := filepath.Join(repoRoot(), "test", "bench", "peer", "run-peer.sh")
	cmd := exec.CommandContext(ctx, "bash", script, topic, strconv.FormatInt(expected, 10))
	cmd.Env = append(append(os.Environ(), "PEER_BATCH_SIZE="+strconv.Itoa(b.batch), "PEER_TASKS=2"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	b.logf("%s: Debezium JDBC sink on Kafka Connect (standalone, 2 tasks, batch %d, %s)", name, b.batch, strings.Join(env, " "))
	k0, p0 := serviceCPU()
	err := cmd.Run()
	k1, p1 := serviceCPU()
	if err != nil {
		return nil, fmt.Errorf("%v\n%s", err, tail(out.String(), 40))
	}
	var line string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "peer: RESULT") {
			line = sc.Text()
		}
	}
	g := peerLine.FindStringSubmatch(line)
	if g == nil {
		return nil, fmt.Errorf("no result line in the peer's output:\n%s", tail(out.String(), 40))
	}
	rows, _ := strconv.ParseInt(g[1], 10, 64)
	secs, _ := strconv.ParseFloat(g[3], 64)
	if records < 0 {
		records = rows
	}
	pm := &Measurement{Name: name, Description: desc, Records: records, Seconds: secs,
		Note: line[strings.Index(line, "RESULT")+len("RESULT "):]}
	pm.RecordsPerSecond = float64(records) / secs
	pm.CPU.Contender = cmd.ProcessState.UserTime().Seconds() + cmd.ProcessState.SystemTime().Seconds()
	pm.CPU.Kafka, pm.CPU.Postgres = k1-k0, p1-p0
	pm.CPUSecondsPerM = (pm.CPU.Contender + pm.CPU.Kafka + pm.CPU.Postgres) / float64(records) * 1e6
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		pm.PeakRSSMiB = float64(ru.Maxrss) / 1024
	}
	if g[2] != "0" {
		pm.Note += " (duplicates: " + g[2] + ")"
	}
	b.logf("%s: %d records in %.2fs: %.0f records/s, %.1f CPU s per million (JVM included), peak RSS %.0f MiB", name, records, secs,
		pm.RecordsPerSecond, pm.CPUSecondsPerM, pm.PeakRSSMiB)
	return pm, nil
}
