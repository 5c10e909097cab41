package test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestLagSecondsMetric: eosink_partition_lag_seconds is the age of the oldest record a
// partition holds fetched and not committed, from its Kafka timestamp (records produced with
// an explicit CreateTime an hour old, held by a handler that waits), 0 for a partition that
// holds none, and 0 again once the records commit. Stats counts the partitions assigned.
func TestLagSecondsMetric(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 2)
	ctx := context.Background()
	hour := time.Now().Add(-time.Hour)
	testbed.Produce(t, p.Env, p.Topic, []testbed.Msg{
		{Partition: 0, Value: []byte("a"), Timestamp: hour},
		{Partition: 0, Value: []byte("b"), Timestamp: hour.Add(time.Minute)},
		{Partition: 0, Value: []byte("c"), Timestamp: hour.Add(2 * time.Minute)},
	})
	release := make(chan struct{})
	cfg := p.config(t, func(ctx context.Context, _ pgx.Tx, b sink.Batch) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	r := startSink(t, cfg)
	gauge := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "eosink_partition_lag_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "partition" {
						got[l.GetValue()] = m.GetGauge().GetValue()
					}
				}
			}
		}
		return got
	}
	testbed.Eventually(t, 60*time.Second, "lag seconds of the held records", func() (bool, string) {
		g := gauge()
		v, ok := g["1"]
		return math.Abs(g["0"]-time.Hour.Seconds()) < 30 && ok && v == 0, fmt.Sprint(g)
	})
	if st := r.s.Stats(); st.Assigned != 2 || !st.UnassignedSince.IsZero() {
		t.Fatalf("stats while holding both partitions: %+v", st)
	}
	close(release)
	testbed.Eventually(t, 30*time.Second, "0 s once committed", func() (bool, string) {
		var next int64
		err := testbed.Pool(t, p.Env).QueryRow(ctx, "SELECT next_offset FROM "+p.offsetsTable()+" WHERE pipeline = $1 AND partition = 0", p.Group).Scan(&next)
		g := gauge()
		return err == nil && next == 3 && g["0"] == 0, fmt.Sprintf("next offset %d (%v), gauge %v", next, err, g)
	})
}
