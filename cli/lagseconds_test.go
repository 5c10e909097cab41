package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestLagSeconds: `lag` and `status` give the lag in seconds as the age of the record at
// the stored position, from its Kafka timestamp (records produced with explicit CreateTime
// timestamps an hour and a minute old), and 0 for a caught-up partition.
func TestLagSeconds(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	schema := testbed.Schema(t, e)
	topic := testbed.Topic(t, e, 2)
	if err := sink.Migrate(ctx, e.DatabaseURL, schema); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond) // Kafka's timestamps are in milliseconds
	hour, minute := now.Add(-time.Hour), now.Add(-time.Minute)
	testbed.Produce(t, e, topic, []testbed.Msg{
		{Partition: 0, Value: []byte("a"), Timestamp: hour},
		{Partition: 0, Value: []byte("b"), Timestamp: hour},
		{Partition: 0, Value: []byte("c"), Timestamp: minute},
		{Partition: 1, Value: []byte("d"), Timestamp: hour},
	})
	pool := testbed.Pool(t, e)
	st := offsets.NewStore(pool, schema, "pipe", "sink-1", time.Second)
	at := map[int32]int64{0: 0, 1: 1} // partition 1 is caught up
	for p, next := range at {
		if _, err := st.Claim(ctx, topic, p, "", func() (int64, error) { return next, nil }); err != nil {
			t.Fatal(err)
		}
	}
	cli := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Run(ctx, append(args, "-database-url", e.DatabaseURL, "-brokers", e.Brokers, "-schema", schema), &out, &errb); code != 0 {
			t.Fatalf("eosink %v: exit %d: %s%s", args, code, out.String(), errb.String())
		}
		return out.String()
	}
	lag := func() map[int32]admin.Position {
		t.Helper()
		var ps []admin.Position
		if err := json.Unmarshal([]byte(cli("lag", "-pipeline", "pipe", "-json")), &ps); err != nil {
			t.Fatal(err)
		}
		by := map[int32]admin.Position{}
		for _, p := range ps {
			by[p.Partition] = p
		}
		return by
	}
	near := func(got float64, want time.Duration) bool {
		return math.Abs(got-want.Seconds()) < 30 // the test's own time, generously
	}
	ps := lag()
	if p := ps[0]; p.Lag != 3 || !near(p.LagSeconds, time.Hour) || !p.OldestUnapplied.Equal(hour) || p.TimestampType != "create" {
		t.Fatalf("partition 0 at offset 0: %+v; want lag 3, about 3600 s, oldest %s (create)", p, hour)
	}
	if p := ps[1]; p.Lag != 0 || p.LagSeconds != 0 || !p.OldestUnapplied.IsZero() {
		t.Fatalf("caught-up partition 1: %+v; want 0 s", p)
	}
	// The age is that of the record at the stored position, not of the partition's first.
	if _, err := pool.Exec(ctx, `UPDATE `+schema+`.offsets SET next_offset = 2 WHERE topic = $1 AND partition = 0`, topic); err != nil {
		t.Fatal(err)
	}
	if p := lag()[0]; p.Lag != 1 || !near(p.LagSeconds, time.Minute) || !p.OldestUnapplied.Equal(minute) {
		t.Fatalf("partition 0 at offset 2: %+v; want about 60 s, oldest %s", p, minute)
	}
	if out := cli("lag", "-pipeline", "pipe"); !strings.Contains(out, "LAG SECONDS") || !strings.Contains(out, minute.UTC().Format(time.RFC3339Nano)+" (create)") ||
		!strings.Contains(out, "oldest unapplied record: 1m") {
		t.Fatalf("lag:\n%s", out)
	}
	var sum []struct {
		LagSeconds float64 `json:"lag_seconds"`
	}
	if err := json.Unmarshal([]byte(cli("status", "-pipeline", "pipe", "-json")), &sum); err != nil || len(sum) != 1 || !near(sum[0].LagSeconds, time.Minute) {
		t.Fatalf("status -json: %+v %v; want lag_seconds about 60", sum, err)
	}
}
