package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestResetWhileRunning: an operator moves partition 0 back (replay) while the sink runs and
// the topic is idle. The sink hears of it (NOTIFY), claims the partition again at the new
// position without a restart, replays exactly the asked range once more, and the audit table
// has one row for the change.
func TestResetWhileRunning(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 2)
	p.Produce(t, 400, 71)
	r := startSink(t, p.config(t, nil))
	p.WaitCaughtUp(t, 60*time.Second)
	ends := p.logEnds(t)

	pool := testbed.Pool(t, p.Env)
	c := p.admin(pool)
	ctx := context.Background()
	back, err := c.Plan(ctx, admin.Selector{Pipeline: p.Group, Topic: p.Topic, Partition: new(int32(0))}, admin.Offset(50))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, back, "test-operator", "replay partition 0 from 50"); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 60*time.Second, "partition 0 to be replayed to its end", func() (bool, string) {
		next, epoch := p.stored(t, 0)
		return next == ends[0] && epoch >= 3, fmt.Sprintf("next %d epoch %d", next, epoch)
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// Offsets 50.. of partition 0 were applied twice (once before, once after the reset);
	// everything else exactly once.
	conn := connect(t, p)
	rows, err := conn.Query(ctx, `SELECT partition, "offset", count(*) FROM `+pgx.Identifier{p.Schema, "ledger"}.Sanitize()+` GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for rows.Next() {
		var part int32
		var off, n int64
		if err := rows.Scan(&part, &off, &n); err != nil {
			t.Fatal(err)
		}
		want := int64(1)
		if part == 0 && off >= 50 {
			want = 2
		}
		if n != want {
			bad++
		}
	}
	if bad != 0 {
		t.Fatalf("%d offsets applied a wrong number of times", bad)
	}
	var audits int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{p.OffsetsSchema, "offsets_audit"}.Sanitize()+
		" WHERE operator = 'test-operator' AND from_offset = $1 AND to_offset = 50 AND db_user = current_user AND client_addr IS NOT DISTINCT FROM inet_client_addr()",
		ends[0]).Scan(&audits); err != nil || audits != 1 {
		t.Fatalf("audit rows %d (%v), want 1", audits, err)
	}
	if errs := r.s.PartitionErrors(); len(errs) != 0 {
		t.Fatalf("partitions left stopped after the reset: %v", errs)
	}
}

// TestSkipWhileRunning: an operator moves a partition forward to the log end while the sink
// is in the middle of it. The sink's next commit is fenced; it claims the partition again at
// the end. Every record below the position the reset moved from is applied once; none after.
func TestSkipWhileRunning(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 1000, 72)
	base := p.config(t, nil).Handler
	slow := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		time.Sleep(30 * time.Millisecond)
		return base(ctx, tx, b)
	}
	cfg := p.config(t, slow)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	r := startSink(t, cfg)
	testbed.Eventually(t, 60*time.Second, "the sink to be under way", func() (bool, string) {
		next, _ := p.storedOrZero(t, 0)
		return next >= 100, fmt.Sprint(next)
	})
	pool := testbed.Pool(t, p.Env)
	c := p.admin(pool)
	changes, err := c.Reset(context.Background(), admin.Selector{Pipeline: p.Group, Topic: p.Topic, Partition: new(int32(0))},
		admin.Latest(), "test-operator", "skip the backlog", 20)
	if err != nil {
		t.Fatal(err)
	}
	from, end := *changes[0].From, changes[0].To
	if from >= end {
		t.Fatalf("the sink finished before the skip (from %d, end %d); slow it down", from, end)
	}
	testbed.Eventually(t, 60*time.Second, "the sink to claim the partition again", func() (bool, string) {
		_, epoch := p.stored(t, 0)
		return epoch >= 3 && len(r.s.PartitionErrors()) == 0, fmt.Sprint(epoch, r.s.PartitionErrors())
	})
	p.Produce(t, 10, 73) // and it goes on from the new position
	testbed.Eventually(t, 60*time.Second, "the new records", func() (bool, string) {
		next, _ := p.stored(t, 0)
		return next == end+10, fmt.Sprint(next)
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	var n, below, skipped, after int64
	if err := connect(t, p).QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE "offset" < $1),
		count(*) FILTER (WHERE "offset" >= $1 AND "offset" < $2), count(DISTINCT "offset") FILTER (WHERE "offset" >= $2)
		FROM `+pgx.Identifier{p.Schema, "ledger"}.Sanitize(), from, end).Scan(&n, &below, &skipped, &after); err != nil {
		t.Fatal(err)
	}
	if below != from || skipped != 0 || after != 10 || n != from+10 {
		t.Fatalf("ledger: %d rows below %d (want %d), %d in the skipped range (want 0), %d after (want 10), %d in all",
			below, from, from, skipped, after, n)
	}
	st := r.s.Stats()
	if st.Fenced == 0 && st.Claims < 2 {
		t.Fatalf("stats %+v: the reset was never noticed", st)
	}
	// The metrics say the same as the ledger and the stats.
	want := map[string]float64{
		"eosink_records_applied_total":   float64(n),
		"eosink_fenced_commits_total":    float64(st.Fenced),
		"eosink_claims_total":            float64(st.Claims),
		"eosink_batches_committed_total": float64(st.Batches),
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				got[f.GetName()] += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				got[f.GetName()+"_count"] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}
	if got["eosink_commit_seconds_count"] != float64(st.Batches) {
		t.Errorf("commit latency samples %v for %d batches", got["eosink_commit_seconds_count"], st.Batches)
	}
}
