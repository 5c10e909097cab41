package cdc

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
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

// waitSourceGauges waits up to 60 s for sourceGauges of topic's partition 0, failing if
// the sink's Run returns first.
func waitSourceGauges(t *testing.T, reg *prometheus.Registry, topic, pipeline string, done <-chan error) (lag, applied float64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		lag, applied, ok := sourceGauges(t, reg, topic, pipeline)
		if ok {
			return lag, applied
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("eosink_cdc_source_lag_seconds and eosink_cdc_source_applied_timestamp_seconds of %s not exported within 60s", topic)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runSink runs cfg's sink until the test ends; done receives Run's error.
func runSink(t *testing.T, cfg sink.Config) (done <-chan error) {
	t.Helper()
	s, err := sink.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-ch:
			if err != nil && ctx.Err() == nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Error("Run did not return within 60s of cancellation")
		}
	})
	return ch
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
	cfg := sink.Config{Pipeline: pipeline, Brokers: e.Brokers, GroupID: testbed.Name(t, "g"), Topics: []string{topic},
		DatabaseURL: e.DatabaseURL, Schema: positions, Plugin: p, AutoMigrate: true, Registerer: reg,
		Kafka:  kafka.ConfigMap{"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	done := runSink(t, cfg)
	if _, _, ok := sourceGauges(t, reg, topic, pipeline); ok {
		t.Fatal("source lag gauges exported before anything was applied")
	}
	lag, applied := waitSourceGauges(t, reg, topic, pipeline, done)
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

// TestCDCSourceLagSecondsTransactionSet: with consistency: transaction the gauges move at the
// set's commit, for each partition the source transaction touched: source transaction 600
// (gapChange, source.ts_ms 1700000000000) changes accounts_a and accounts_b, and once it is
// applied both topics' eosink_cdc_source_applied_timestamp_seconds are 1700000000 and
// their eosink_cdc_source_lag_seconds are now minus that, at the commit.
func TestCDCSourceLagSecondsTransactionSet(t *testing.T) {
	e := testbed.Require(t)
	db := testbed.Pool(t, e)
	replica, positions := testbed.Schema(t, e), testbed.Schema(t, e)
	const ddl = `CREATE TABLE %s (id bigint PRIMARY KEY, balance bigint NOT NULL)`
	execAll(t, db, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize(),
		fmt.Sprintf(ddl, pgx.Identifier{replica, "accounts_a"}.Sanitize()),
		fmt.Sprintf(ddl, pgx.Identifier{replica, "accounts_b"}.Sanitize()))
	prefix := testbed.Name(t, "gap")
	txTopic := testbed.NamedTopic(t, e, prefix+".transaction", 1)
	topicA := testbed.NamedTopic(t, e, prefix+".public.accounts_a", 1)
	topicB := testbed.NamedTopic(t, e, prefix+".public.accounts_b", 1)
	lease := 3 * time.Second
	p := newPlugin(t, e, replica, positions, cdc.Config{Consistency: cdc.ConsistencyTransaction, TransactionTopic: txTopic, LeaseTimeout: &lease})

	testbed.Produce(t, e, topicA, []testbed.Msg{gapChange("accounts_a", 600, 900, 1000, 1, 1, 1, 100)})
	testbed.Produce(t, e, topicB, []testbed.Msg{gapChange("accounts_b", 600, 900, 1010, 2, 1, 1, 200)})
	testbed.Produce(t, e, txTopic, []testbed.Msg{gapMarker(600, 1000, nil),
		gapMarker(600, 1100, []gapCount{{"accounts_a", 1}, {"accounts_b", 1}})})

	pipeline := testbed.Name(t, "p")
	reg := prometheus.NewRegistry()
	began := time.Now()
	done := runSink(t, sink.Config{Pipeline: pipeline, Brokers: e.Brokers, GroupID: testbed.Name(t, "g"), Topics: []string{topicA, topicB},
		DatabaseURL: e.DatabaseURL, Schema: positions, Plugin: p, AutoMigrate: true, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	for _, topic := range []string{topicA, topicB} {
		lag, applied := waitSourceGauges(t, reg, topic, pipeline, done)
		if applied != 1_700_000_000 {
			t.Errorf("%s: eosink_cdc_source_applied_timestamp_seconds = %.3f, want 1700000000 (source.ts_ms / 1000)", topic, applied)
		}
		low, high := began.Sub(time.UnixMilli(1_700_000_000_000)).Seconds(), time.Since(time.UnixMilli(1_700_000_000_000)).Seconds()
		if lag < low-1 || lag > high+1 {
			t.Errorf("%s: eosink_cdc_source_lag_seconds = %.1f, want between %.1f and %.1f (now minus the source commit, at the commit)", topic, lag, low, high)
		}
	}
	var got string
	if err := db.QueryRow(context.Background(), "SELECT (SELECT balance FROM "+pgx.Identifier{replica, "accounts_a"}.Sanitize()+
		") || ' ' || (SELECT balance FROM "+pgx.Identifier{replica, "accounts_b"}.Sanitize()+")").Scan(&got); err != nil || got != "100 200" {
		t.Fatalf("replica balances %q (%v), want 100 200 once the gauges are exported", got, err)
	}
}
