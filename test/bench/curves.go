package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// curves: throughput against batch size, partition count, row width, insert or upsert.
// Each point is a phase of its own (named curve_label, like its measurement), as is each
// topic the curves preload (preload_<topic>).
func (b *bench) curves(ctx context.Context) {
	limit := fmt.Sprintf("%ds", envInt("BENCH_CURVE_SECONDS", 8))
	n := int64(envInt("BENCH_CURVE_RECORDS", 400_000))
	point := func(curve string, x float64, label string, kind string, needs string, args ...string) {
		name := curve + "_" + label
		b.phase(name, func() error {
			saved := b.records
			b.records = n
			defer func() { b.records = saved }()
			m, err := b.child(ctx, name, curve+" "+label, kind, append([]string{"-mode", "eos", "-limit", limit}, args...)...)
			if err != nil {
				return err
			}
			b.rep.Measurements[name] = m
			b.rep.Curves[curve] = append(b.rep.Curves[curve], Point{X: x, Label: label, RecordsPerSecond: m.RecordsPerSecond})
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
	for _, bs := range []int{1, 10, 100, 1000, 10000} {
		point("batch_size", float64(bs), strconv.Itoa(bs), "insert", "preload", "-topic", "bench-main", "-batch", strconv.Itoa(bs))
	}
	for _, parts := range []int{1, 3, 6, 12, 24} {
		topic := fmt.Sprintf("bench-p%d", parts)
		needs := preloaded(topic, parts, "normal")
		point("partitions", float64(parts), strconv.Itoa(parts), "insert", needs, "-topic", topic, "-partitions", strconv.Itoa(parts))
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
