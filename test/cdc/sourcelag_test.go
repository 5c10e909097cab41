package cdc

import (
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/cdc"
)

// sourceGauges reads the cdc plugin's source lag gauges of topic[0] from reg: lag and
// applied, and ok once both are exported (with the pipeline label).
func sourceGauges(t *testing.T, reg *prometheus.Registry, topic, pipeline string) (lag, applied float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["topic"] != topic || labels["partition"] != "0" || labels["pipeline"] != pipeline {
				continue
			}
			switch mf.GetName() {
			case "eosink_cdc_source_lag_seconds":
				lag, found = m.GetGauge().GetValue(), found+1
			case "eosink_cdc_source_applied_timestamp_seconds":
				applied, found = m.GetGauge().GetValue(), found+1
			}
		}
	}
	return lag, applied, found == 2
}

// TestCDCSourceLagSeconds runs the cdc plugin in a sink (real Kafka, real PostgreSQL, with
// a Prometheus registry) over Debezium-shaped change events whose source.ts_ms (the source
// transaction's commit time) is an hour old, while their Kafka timestamps are now. Once
// they are applied, eosink_cdc_source_lag_seconds{topic,partition} is near 3600 s (the
// age of the newest source change applied, at its commit) and
// eosink_cdc_source_applied_timestamp_seconds equals the newest ts_ms / 1000; the sink's
// own eosink_partition_lag_seconds, from Kafka timestamps, cannot see that hour. On the
// old code neither gauge existed.
func TestCDCSourceLagSeconds(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	replica, positions, table := itemsReplica(t, e, db)
	p := newPlugin(t, e, replica, positions, cdc.Config{})
	topic := testbed.NamedTopic(t, e, testbed.Name(t, "dbz")+".public.items", 1)

	hourAgo := time.Now().Add(-time.Hour).UnixMilli()
	newest := hourAgo + 250
	testbed.Produce(t, e, topic, []testbed.Msg{
		sourcedChange("c", 1, 100, 110, hourAgo, "one"),
		sourcedChange("c", 2, 120, 130, hourAgo+100, "two"),
		sourcedChange("u", 1, 140, 150, newest, "one again"),
	})

	pipeline := testbed.Name(t, "p")
	reg := prometheus.NewRegistry()
	s, err := sink.New(sink.Config{Pipeline: pipeline, Brokers: e.Brokers, GroupID: testbed.Name(t, "g"), Topics: []string{topic},
		DatabaseURL: e.DatabaseURL, Schema: positions, Plugin: p, AutoMigrate: true, Registerer: reg,
		Kafka:  kafka.ConfigMap{"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := sourceGauges(t, reg, topic, pipeline); ok {
		t.Fatal("source lag gauges exported before anything was applied")
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && runCtx.Err() == nil {
			t.Errorf("Run: %v", err)
		}
	}()

	deadline := time.Now().Add(60 * time.Second)
	var lag, applied float64
	for {
		var ok bool
		if lag, applied, ok = sourceGauges(t, reg, topic, pipeline); ok {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("eosink_cdc_source_lag_seconds and eosink_cdc_source_applied_timestamp_seconds not exported within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var rows string
	if err := db.QueryRow(ctx, "SELECT string_agg(id || ' ' || name, ', ' ORDER BY id) FROM "+table).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != "1 one again, 2 two" {
		t.Fatalf("the replica holds %q once the gauges are exported, want all three changes applied", rows)
	}
	if want := float64(newest) / 1000; math.Abs(applied-want) > 1e-6 {
		t.Errorf("eosink_cdc_source_applied_timestamp_seconds = %.3f, want the newest source.ts_ms / 1000 = %.3f", applied, want)
	}
	// Applied within the test's minute: an hour and at most that minute.
	if lag < 3599 || lag > 3600+60 {
		t.Errorf("eosink_cdc_source_lag_seconds = %.1f, want about 3600 (the source commits are an hour old)", lag)
	}
	t.Logf("source lag %.1fs, applied source commit time %.3f", lag, applied)
}
