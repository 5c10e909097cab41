package test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/table"
)

// TestDeadLetterReplay: records refused by a CHECK constraint are dead-lettered. Replayed
// before the fix they fail again and stay, counted; after the constraint is dropped, two
// operators replaying at the same time apply each record exactly once, and the dead-letter
// rows go in the same transactions.
func TestDeadLetterReplay(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 2)
	ctx := context.Background()
	db := testbed.Pool(t, p.Env)
	tbl := pgx.Identifier{p.Schema, "payments"}.Sanitize()
	if _, err := db.Exec(ctx, "CREATE TABLE "+tbl+` (k text NOT NULL, amount integer NOT NULL CONSTRAINT positive CHECK (amount > 0))`); err != nil {
		t.Fatal(err)
	}
	newPlugin := func() sink.Plugin {
		pl, err := table.New(table.Config{Table: p.Schema + ".payments", Columns: map[string]table.Column{
			"k": {From: "key"}, "amount": {From: "value.amount", Required: true}}})
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	var msgs []testbed.Msg
	var refused []string
	for i := range 300 {
		amount := 1 + i
		if i%10 == 4 {
			amount = -amount
			refused = append(refused, fmt.Sprintf("k%d", i))
		}
		msgs = append(msgs, testbed.Msg{Partition: int32(i % 2), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf(`{"amount": %d}`, amount))})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	r := startSink(t, pluginConfig(t, p, newPlugin(), sink.DeadLetter))
	ends := p.logEnds(t)
	testbed.Eventually(t, 60*time.Second, "the sink to reach the log end", func() (bool, string) {
		n0, _ := p.storedOrZero(t, 0)
		n1, _ := p.storedOrZero(t, 1)
		return n0 == ends[0] && n1 == ends[1], fmt.Sprintf("%d/%d %d/%d", n0, ends[0], n1, ends[1])
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	c := p.admin(db)
	f := admin.DeadLetterFilter{Pipeline: p.Group}
	list, err := c.DeadLetters(ctx, f)
	if err != nil || len(list) != len(refused) {
		t.Fatalf("dead letters: %d (%v), want %d", len(list), err, len(refused))
	}

	// Before the fix: each fails again and stays, with its failure counted.
	res, err := c.Replay(ctx, f, newPlugin(), nil)
	if err != nil || res.FailedAgain != len(refused) || res.Replayed != 0 {
		t.Fatalf("replay before the fix: %+v, %v; want all %d failed again", res, err, len(refused))
	}
	if list, _ = c.DeadLetters(ctx, f); len(list) != len(refused) || list[0].Failures != 2 {
		t.Fatalf("after a failed replay: %d dead letters, failures %d; want %d with 2 failures", len(list), list[0].Failures, len(refused))
	}

	// The fix, then two concurrent replays.
	if _, err := db.Exec(ctx, "ALTER TABLE "+tbl+" DROP CONSTRAINT positive"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]admin.ReplayResult, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.Replay(ctx, f, newPlugin(), nil)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("replays: %v, %v", errs[0], errs[1])
	}
	if got := results[0].Replayed + results[1].Replayed; got != len(refused) {
		t.Fatalf("replayed %d in total (%+v, %+v), want %d", got, results[0], results[1], len(refused))
	}
	if list, _ = c.DeadLetters(ctx, f); len(list) != 0 {
		t.Fatalf("%d dead letters left after the replay", len(list))
	}
	rows, err := db.Query(ctx, "SELECT k FROM "+tbl+" WHERE amount < 0")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(refused)
	if !slices.Equal(got, refused) {
		t.Fatalf("replayed rows %v, want each refused record once: %v", got, refused)
	}
	var total int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+tbl).Scan(&total); err != nil || total != len(msgs) {
		t.Fatalf("table holds %d rows (%v), want %d: every record once", total, err, len(msgs))
	}
}
