package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/inbox"
	"github.com/eosink/eosink/sink/table"
)

// TestInboxRepeatsAreNotCountedAsApplied (issue 11, item 11): records the inbox skips (an
// event id seen before with the same payload) count in neither Stats().Records nor
// eosink_records_applied_total; only the records written are "applied".
func TestInboxRepeatsAreNotCountedAsApplied(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	ctx := context.Background()
	pool := testbed.Pool(t, p.Env)
	tbl := pgx.Identifier{p.Schema, "orders"}
	if _, err := pool.Exec(ctx, "CREATE TABLE "+tbl.Sanitize()+" (order_id text PRIMARY KEY, amount integer NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	inner, err := table.New(table.Config{Table: p.Schema + ".orders", Columns: map[string]table.Column{
		"order_id": {From: "value.order_id", Required: true}, "amount": {From: "value.amount", Required: true}}})
	if err != nil {
		t.Fatal(err)
	}
	ib, err := inbox.New(inbox.Config{EventID: "value.event_id", Subscriber: p.Group, Schema: p.Schema}, inner)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.MigratePlugin(ctx, p.Env.DatabaseURL, ib, nil); err != nil {
		t.Fatal(err)
	}
	// 40 events, each of the first 15 sent a second time (same payload) after all of them.
	const events, repeats = 40, 15
	var msgs []testbed.Msg
	for i := range events + repeats {
		n := i % events
		msgs = append(msgs, testbed.Msg{Partition: 0,
			Value: fmt.Appendf(nil, `{"event_id": "e-%d", "order_id": "o-%d", "amount": %d}`, n, n, n)})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)

	cfg := p.config(t, nil)
	cfg.Handler, cfg.Plugin = nil, ib
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	r := startSink(t, cfg)
	testbed.Eventually(t, 60*time.Second, "every record committed", func() (bool, string) {
		var next int64
		err := pool.QueryRow(ctx, "SELECT next_offset FROM "+p.offsetsTable()+" WHERE pipeline = $1 AND partition = 0", p.Group).Scan(&next)
		return err == nil && next == events+repeats, fmt.Sprintf("next offset %d (%v)", next, err)
	})
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+tbl.Sanitize()).Scan(&rows); err != nil || rows != events {
		t.Fatalf("%d rows (%v), want %d", rows, err, events)
	}
	if st := r.s.Stats(); st.Records != events {
		t.Fatalf("Stats().Records = %d, want %d (the %d repeats were skipped, not applied)", st.Records, events, repeats)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	applied := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "eosink_records_applied_total" {
			applied = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if applied != events {
		t.Fatalf("eosink_records_applied_total = %g, want %d", applied, events)
	}
}
