package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/table"
)

// TestDeadLetterLifecycle follows three dead letters of a real Kafka partition through the
// lifecycle of migration 9, with the eosink binary for the operator's commands:
//
//   - `dlq edit` stores a corrected value beside the original (both shown by `dlq show`) and
//     audits it; a replay applies the edited value and resolves the dead letter as replayed;
//   - `dlq discard` resolves instead of deleting, so the row stays;
//   - `dlq list` shows the open ones, `dlq list -all` every one with its state;
//   - the offset moved back with the constraint still there: the same records fail again on
//     the same rows (same ids, failures 2), open again;
//   - the constraint dropped and the offset moved back again: the batches that apply the
//     records resolve their dead letters as applied, each in the transaction of the record's
//     write (the same xmin), by the sink's instance.
func TestDeadLetterLifecycle(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
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
	const n = 30
	poison := []int64{5, 12, 20}
	var msgs []testbed.Msg
	for i := range n {
		amount := 1 + i
		if slices.Contains(poison, int64(i)) {
			amount = -amount
		}
		msgs = append(msgs, testbed.Msg{Partition: 0, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf(`{"amount": %d}`, amount))})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	const instance = "lifecycle-sink"
	runToEnd := func(what string, done func() (bool, string)) {
		t.Helper()
		cfg := pluginConfig(t, p, newPlugin(), sink.DeadLetter)
		cfg.InstanceID = instance
		cfg.MaxBatchRecords = 7 // batches that hold a dead letter's offset and others
		r := startSink(t, cfg)
		testbed.Eventually(t, 60*time.Second, what, func() (bool, string) {
			next, _ := p.storedOrZero(t, 0)
			ok, more := done()
			return next == n && ok, fmt.Sprintf("stored %d/%d; %s; %v", next, n, more, r.s.PartitionErrors())
		})
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	always := func() (bool, string) { return true, "" }
	runToEnd("the first run to the log end", always)

	c := p.admin(db)
	f := admin.DeadLetterFilter{Pipeline: p.Group}
	list, err := c.DeadLetters(ctx, f)
	if err != nil || len(list) != len(poison) {
		t.Fatalf("dead letters %+v (%v), want %d", list, err, len(poison))
	}
	ids := map[int64]int64{} // offset -> id
	for i, d := range list {
		if d.Offset != poison[i] || d.State != admin.StateOpen || d.Failures != 1 {
			t.Fatalf("dead letter %d: %+v, want open at offset %d with one failure", i, d, poison[i])
		}
		ids[d.Offset] = d.ID
	}
	edited, discarded, left := ids[5], ids[12], ids[20]
	base := []string{"-database-url", p.Env.DatabaseURL, "-schema", p.OffsetsSchema}
	eosink := func(args ...string) string {
		t.Helper()
		out, _ := run(t, nil, false, eosinkBin, append(args, base...)...)
		return out
	}

	// Edit, show, replay.
	out := eosink("dlq", "edit", "-id", fmt.Sprint(edited), "-value", `{"amount": 6}`, "-operator", "alice", "-reason", "sign fixed upstream")
	if !strings.Contains(out, fmt.Sprintf("edited dead letter %d", edited)) {
		t.Fatalf("dlq edit: %s", out)
	}
	out = eosink("dlq", "show", "-id", fmt.Sprint(edited))
	for _, want := range []string{`value:         {"amount": -6}`, `edited value:  {"amount": 6}`, "edited:        by alice", "state:         open",
		"edit by alice (role postgres): sign fixed upstream"} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq show after the edit lacks %q:\n%s", want, out)
		}
	}
	res, err := c.ReplayWith(ctx, admin.DeadLetterFilter{Pipeline: p.Group, IDs: []int64{edited}}, newPlugin(),
		admin.ReplayOptions{Action: admin.Action{Operator: "alice", Reason: "after the edit"}})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay of the edited dead letter: %+v, %v", res, err)
	}
	var amounts []int
	rows, _ := db.Query(ctx, "SELECT amount FROM "+tbl+" WHERE k = 'k5'")
	if amounts, err = pgx.CollectRows(rows, pgx.RowTo[int]); err != nil || !slices.Equal(amounts, []int{6}) {
		t.Fatalf("k5 after the replay: %v (%v), want the edited amount 6 once", amounts, err)
	}
	d, err := c.ShowDeadLetter(ctx, edited)
	if err != nil || d.State != admin.StateReplayed || d.ResolvedBy != "alice" || !d.Edited || string(d.Record.Value) != `{"amount": -6}` {
		t.Fatalf("the replayed dead letter: %+v (%v), want replayed by alice, its original value kept", d, err)
	}
	audit, err := c.DeadLetterAudit(ctx, edited)
	if err != nil || len(audit) != 2 {
		t.Fatalf("audit of the edited dead letter: %+v (%v), want the edit and the replay", audit, err)
	}
	if a := audit[0]; a.Action != "edit" || a.Operator != "alice" || a.Reason != "sign fixed upstream" || a.DBUser == "" ||
		string(a.OldValue) != `{"amount": -6}` || string(a.NewValue) != `{"amount": 6}` || a.OldKey != nil || a.NewKey != nil {
		t.Errorf("edit audit: %+v", a)
	}
	if a := audit[1]; a.Action != "replay" || a.Operator != "alice" || a.Reason != "after the edit" || a.At.Before(audit[0].At) {
		t.Errorf("replay audit: %+v", a)
	}
	if err := c.EditDeadLetter(ctx, edited, admin.DeadLetterEdit{Value: []byte("x"), Action: admin.Action{Operator: "a", Reason: "r"}}); !errors.Is(err, admin.ErrDeadLetterResolved) {
		t.Errorf("editing a replayed dead letter: %v, want ErrDeadLetterResolved", err)
	}

	// Discard keeps the row.
	out = eosink("dlq", "discard", "-pipeline", p.Group, "-id", fmt.Sprint(discarded), "-operator", "bob", "-reason", "not needed", "-yes")
	if !strings.Contains(out, "discarded 1 dead letters") {
		t.Fatalf("dlq discard: %s", out)
	}
	if d, err := c.ShowDeadLetter(ctx, discarded); err != nil || d.State != admin.StateDiscarded || d.ResolvedBy != "bob" {
		t.Fatalf("the discarded dead letter: %+v (%v), want kept, discarded by bob", d, err)
	}
	if audit, err := c.DeadLetterAudit(ctx, discarded); err != nil || len(audit) != 1 || audit[0].Action != "discard" || audit[0].Operator != "bob" || audit[0].Reason != "not needed" {
		t.Fatalf("audit of the discarded dead letter: %+v (%v)", audit, err)
	}

	// list shows the open one, list -all all three with their state.
	var open []admin.DeadLetter
	if err := json.Unmarshal([]byte(eosink("dlq", "list", "-pipeline", p.Group, "-json")), &open); err != nil || len(open) != 1 || open[0].ID != left {
		t.Fatalf("dlq list -json: %+v (%v), want only dead letter %d", open, err, left)
	}
	out = eosink("dlq", "list", "-pipeline", p.Group, "-all")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "STATE") {
		t.Fatalf("dlq list -all: want a header with STATE and 3 rows:\n%s", out)
	}
	for i, want := range []string{"replayed, edited", "discarded", "open"} {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("dlq list -all row %d: want state %q:\n%s", i+1, want, out)
		}
	}

	// Moved back, constraint still there: the same rows fail again and are open again.
	reset := func(why string) {
		t.Helper()
		zero := int32(0)
		if _, err := c.Reset(ctx, admin.Selector{Pipeline: p.Group, Topic: p.Topic, Partition: &zero}, admin.Offset(0), "carol", why, 5); err != nil {
			t.Fatalf("offsets set back to 0: %v", err)
		}
	}
	reset("replay before the fix")
	runToEnd("the second run to the log end", always)
	all, err := c.DeadLetters(ctx, admin.DeadLetterFilter{Pipeline: p.Group, Resolved: true})
	if err != nil || len(all) != len(poison) {
		t.Fatalf("after the records failed again: %+v (%v), want the same %d rows", all, err, len(poison))
	}
	for _, d := range all {
		if d.ID != ids[d.Offset] || d.State != admin.StateOpen || d.Failures != 2 {
			t.Errorf("dead letter at offset %d after failing again: id %d (was %d), state %s, failures %d; want the same row, open, 2 failures",
				d.Offset, d.ID, ids[d.Offset], d.State, d.Failures)
		}
		if d.Offset == 5 && !d.Edited {
			t.Errorf("the edit of the dead letter at offset 5 is gone after it failed again")
		}
	}

	// The fix, and a replay from Kafka: the batches that apply the records resolve them.
	if _, err := db.Exec(ctx, "ALTER TABLE "+tbl+" DROP CONSTRAINT positive"); err != nil {
		t.Fatal(err)
	}
	reset("replay after the fix")
	runToEnd("every dead letter resolved as applied", func() (bool, string) {
		left, err := c.DeadLetters(ctx, f)
		return err == nil && len(left) == 0, fmt.Sprintf("%d open (%v)", len(left), err)
	})
	all, err = c.DeadLetters(ctx, admin.DeadLetterFilter{Pipeline: p.Group, Resolved: true})
	if err != nil || len(all) != len(poison) {
		t.Fatalf("after the fix: %+v (%v), want %d rows", all, err, len(poison))
	}
	for _, d := range all {
		if d.State != admin.StateApplied || d.ResolvedBy != instance || d.Failures != 2 {
			t.Errorf("dead letter at offset %d: state %s by %q, failures %d; want applied by %s, 2 failures", d.Offset, d.State, d.ResolvedBy, d.Failures, instance)
		}
		// The resolution and the record's write are one transaction.
		var same bool
		if err := db.QueryRow(ctx, `SELECT (SELECT xmin::text FROM `+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize()+` WHERE id = $1) =
			(SELECT xmin::text FROM `+tbl+` WHERE k = $2 AND amount < 0)`, d.ID, fmt.Sprintf("k%d", d.Offset)).Scan(&same); err != nil || !same {
			t.Errorf("dead letter at offset %d: resolved in the transaction of its record's write: %v (%v), want true", d.Offset, same, err)
		}
	}
	if out := strings.TrimSpace(eosink("dlq", "list", "-pipeline", p.Group, "-json")); out != "[]" {
		t.Errorf("dlq list -json after every dead letter was applied: %s, want []", out)
	}
}

// TestReplayHandler: the dead letters of a pipeline whose handler is Go code (no config file
// for `dlq replay`) are replayed with admin.Client.ReplayHandler through the fixed handler:
// applied once, resolved as replayed, audited; a second replay finds nothing open.
func TestReplayHandler(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	ctx := context.Background()
	db := testbed.Pool(t, p.Env)
	tbl := pgx.Identifier{p.Schema, "notes"}.Sanitize()
	if _, err := db.Exec(ctx, "CREATE TABLE "+tbl+" (k text NOT NULL, v text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	var fixed atomic.Bool
	handler := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		for i := range b.Records {
			r := &b.Records[i]
			if string(r.Value) == "bad" && !fixed.Load() {
				return sink.Poison(r, errors.New("bad is refused until the fix"))
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+tbl+" (k, v) VALUES ($1, $2)", string(r.Key), string(r.Value)); err != nil {
				return err
			}
		}
		return nil
	}
	testbed.Produce(t, p.Env, p.Topic, []testbed.Msg{{Key: []byte("a"), Value: []byte("good")}, {Key: []byte("b"), Value: []byte("bad")},
		{Key: []byte("c"), Value: []byte("good")}})
	cfg := p.config(t, handler)
	cfg.OnPoison = sink.DeadLetter
	r := startSink(t, cfg)
	testbed.Eventually(t, 60*time.Second, "the log end", func() (bool, string) {
		next, _ := p.storedOrZero(t, 0)
		return next == 3, fmt.Sprintf("%d/3 %v", next, r.s.PartitionErrors())
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	c := p.admin(db)
	f := admin.DeadLetterFilter{Pipeline: p.Group}
	list, err := c.DeadLetters(ctx, f)
	if err != nil || len(list) != 1 || list[0].Offset != 1 {
		t.Fatalf("dead letters %+v (%v), want the one at offset 1", list, err)
	}
	fixed.Store(true)
	opts := admin.ReplayOptions{Action: admin.Action{Operator: "dana", Reason: "handler fixed"}}
	res, err := c.ReplayHandler(ctx, f, handler, opts)
	if err != nil || res.Replayed != 1 {
		t.Fatalf("ReplayHandler: %+v, %v; want one replayed", res, err)
	}
	if res, err := c.ReplayHandler(ctx, f, handler, opts); err != nil || res.Replayed+res.FailedAgain+res.Gone != 0 {
		t.Fatalf("a second ReplayHandler: %+v, %v; want nothing open", res, err)
	}
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+tbl+" WHERE k = 'b' AND v = 'bad'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("b applied %d times (%v), want once", n, err)
	}
	d, err := c.ShowDeadLetter(ctx, list[0].ID)
	if err != nil || d.State != admin.StateReplayed || d.ResolvedBy != "dana" {
		t.Fatalf("the dead letter after ReplayHandler: %+v (%v), want replayed by dana", d, err)
	}
	if audit, err := c.DeadLetterAudit(ctx, d.ID); err != nil || len(audit) != 1 || audit[0].Action != "replay" || audit[0].Reason != "handler fixed" {
		t.Fatalf("audit: %+v (%v), want the replay", audit, err)
	}
}
