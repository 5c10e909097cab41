package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// curves measures eosink against the work's scale (BENCH_CURVE_SET=scale, the quick mode's
// default) and its settings (all, the full run's default: scale and the rest).
//
// Scale: partitions (1, 12, 64, 256 on one topic), topics (1, 16, 64 topics matched by one
// pattern subscription, 16 partitions in all for one topic), instances (1 to 4 sinks in one
// group in one process: the machine's CPU shared as separate deployments would share it) and
// pool (pool_max_conns 1, 2, 4, 8 on 12 partitions). Each point records records/s, CPU
// seconds per million (all processes), peak RSS and the most PostgreSQL sessions the
// pipeline held. Settings: batch size, row width, insert or upsert, synchronous_commit.
//
// Each point is a phase of its own (named curve_label, like its measurement), as is each
// topic the curves preload (preload_<topic>).
func (b *bench) curves(ctx context.Context) {
	limit := fmt.Sprintf("%ds", envInt("BENCH_CURVE_SECONDS", 8))
	n := int64(envInt("BENCH_CURVE_RECORDS", 400_000))
	point := func(curve string, x float64, label string, kind string, needs string, args ...string) {
		name := curve + "_" + label
		b.phase(name, func() error {
			saved := b.records
			if !slices.Contains(args, "bench-main") { // bench-main holds BENCH_RECORDS
				b.records = n
			}
			defer func() { b.records = saved }()
			m, err := b.child(ctx, name, curve+" "+label, kind, append([]string{"-mode", "eos", "-limit", limit}, args...)...)
			if err != nil {
				return err
			}
			b.rep.Measurements[name] = m
			b.rep.Curves[curve] = append(b.rep.Curves[curve], Point{X: x, Label: label, RecordsPerSecond: m.RecordsPerSecond,
				CPUSecondsPerM: m.CPUSecondsPerM, PeakRSSMiB: m.PeakRSSMiB, PGConnections: m.PGConnections})
			return nil
		}, needs)
	}
	preloaded := func(topic string, parts int, width string) string {
		name := "preload_" + topic
		b.phase(name, func() error {
			_, err := preload(ctx, b.brokers, topic, parts, n, width)
			return err
		})
		return name
	}

	for _, parts := range []int{1, 12, 64, 256} {
		topic := fmt.Sprintf("bench-p%d", parts)
		needs := preloaded(topic, parts, "normal")
		point("partitions", float64(parts), strconv.Itoa(parts), "insert", needs, "-topic", topic, "-partitions", strconv.Itoa(parts))
	}
	for _, topics := range []int{1, 16, 64} {
		name := fmt.Sprintf("preload_bench-t%d", topics)
		b.phase(name, func() error {
			for i := range topics {
				if _, err := preload(ctx, b.brokers, fmt.Sprintf("bench-t%d-%d", topics, i), max(1, 16/topics), n/int64(topics), "normal"); err != nil {
					return err
				}
			}
			return nil
		})
		pattern := fmt.Sprintf("^bench-t%d-[0-9]+$", topics)
		point("topics", float64(topics), strconv.Itoa(topics), "insert", name, "-topic", pattern)
	}
	for inst := 1; inst <= 4; inst++ {
		point("instances", float64(inst), strconv.Itoa(inst), "insert", "preload", "-topic", "bench-main", "-instances", strconv.Itoa(inst))
	}
	for _, pool := range []int{1, 2, 4, 8} {
		point("pool", float64(pool), strconv.Itoa(pool), "insert", "preload", "-topic", "bench-main", "-pool", strconv.Itoa(pool))
	}
	if envStr("BENCH_CURVE_SET", "all") != "all" {
		return
	}

	for _, bs := range []int{1, 10, 100, 1000, 10000} {
		point("batch_size", float64(bs), strconv.Itoa(bs), "insert", "preload", "-topic", "bench-main", "-batch", strconv.Itoa(bs))
	}
	for i, w := range []string{"narrow", "normal", "wide"} {
		topic := "bench-w-" + w
		needs := preloaded(topic, b.partitions, w)
		point("row_width", float64(i), w, "insert", needs, "-topic", topic, "-format", w)
	}
	for i, kind := range []string{"insert", "upsert"} {
		point("insert_vs_upsert", float64(i), kind, kind, "preload", "-topic", "bench-main")
	}
	// synchronous_commit=off on the sink's sessions (pgx passes unknown URL parameters as
	// session settings): see docs/benchmarks.md on what it risks and what it cannot break.
	for i, mode := range []string{"on", "off"} {
		url := b.url
		if mode == "off" {
			url += map[bool]string{true: "&", false: "?"}[strings.Contains(url, "?")] + "synchronous_commit=off"
		}
		point("synchronous_commit", float64(i), mode, "insert", "preload", "-topic", "bench-main", "-url", url)
	}
}

// quickDefaults are the settings of BENCH_QUICK=1, for the variables left unset: a run of a
// few minutes that still measures every ratio of the issue but the peer's (eosink runs on
// the peer's records all the same, for its memory), the latency breakdown, and the scale
// curves.
var quickDefaults = map[string]string{
	"BENCH_RECORDS": "200000", "BENCH_REPEAT": "1", "BENCH_PEER": "envelope", "BENCH_CDC": "0",
	"BENCH_CURVE_RECORDS": "100000", "BENCH_CURVE_SECONDS": "4", "BENCH_CURVE_SET": "scale",
}

// applyQuick sets the quick mode's defaults (the child processes inherit them).
func applyQuick() {
	if os.Getenv("BENCH_QUICK") != "1" {
		return
	}
	for k, v := range quickDefaults {
		if os.Getenv(k) == "" {
			_ = os.Setenv(k, v)
		}
	}
}
