package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// TestInventoryExample runs examples/inventory as a user would: `eosink run -config
// examples/inventory/pipeline.yaml`, one pipeline writing each stock move to a history
// table and adding it to the stock per (sku, warehouse), in one transaction with the offset.
// The sink is killed with SIGKILL mid-stream and restarted. Some moves are published twice
// (the inbox around the list applies them once), and some go to a warehouse stock is not kept for:
// poison for the stock table only, they are dead-lettered once and leave no history row.
// Then every (sku, warehouse)'s stock is the sum of its history, history holds each move
// once, and every move produced is there.
func TestInventoryExample(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	topic := testbed.Topic(t, e, 4)
	schema, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	pipeline := testbed.Name(t, "p")
	env := []string{"KAFKA_BOOTSTRAP_SERVERS=" + e.Brokers, "DATABASE_URL=" + e.DatabaseURL,
		"INVENTORY_TOPIC=" + topic, "INVENTORY_GROUP=" + testbed.Name(t, "g"), "INVENTORY_PIPELINE=" + pipeline,
		"INVENTORY_SCHEMA=" + schema, "INVENTORY_OFFSETS_SCHEMA=" + offsets}
	config := "../examples/inventory/pipeline.yaml"
	db := testbed.Pool(t, e)
	ctx := context.Background()
	ddl, err := os.ReadFile("../examples/inventory/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, strings.ReplaceAll(string(ddl), "inventory", pgx.Identifier{schema}.Sanitize())); err != nil {
		t.Fatal(err)
	}

	// 20,000 moves over 8 skus in 5 warehouses, each (sku, warehouse) starting with a
	// receipt of 1,000. 12 moves go to a warehouse stock is not kept for (poison for the
	// stock table only: its foreign key), and 1 in 50 is published again later.
	rng := rand.New(rand.NewPCG(7, 7))
	type move struct {
		id, sku, wh string
		delta       int
		at          time.Time
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var moves []move
	for s := range 8 {
		for w := range 5 {
			moves = append(moves, move{id: fmt.Sprintf("r-%d-%d", s, w), sku: fmt.Sprintf("sku-%d", s), wh: fmt.Sprintf("wh-%d", w), delta: 1000, at: start})
		}
	}
	poison := map[string]bool{}
	for i := range 20000 {
		m := move{id: fmt.Sprintf("m-%d", i), sku: fmt.Sprintf("sku-%d", rng.IntN(8)), wh: fmt.Sprintf("wh-%d", rng.IntN(5)),
			delta: rng.IntN(11) - 5, at: start.Add(time.Duration(i+1) * time.Second)}
		if i%1667 == 1000 {
			m.wh = "wh-closed"
			poison[m.id] = true
		}
		moves = append(moves, m)
	}
	msg := func(m move) testbed.Msg {
		return testbed.Msg{Partition: -1, Key: []byte(m.sku), Value: []byte(fmt.Sprintf(
			`{"move_id": %q, "sku": %q, "warehouse": %q, "delta": %d, "at": %q}`, m.id, m.sku, m.wh, m.delta, m.at.Format(time.RFC3339)))}
	}
	var msgs []testbed.Msg
	republished := 0
	for i, m := range moves {
		msgs = append(msgs, msg(m))
		if i%50 == 49 && !poison[moves[i-20].id] {
			msgs = append(msgs, msg(moves[i-20])) // the same move again, later, at a new offset
			republished++
		}
	}
	testbed.Produce(t, e, topic, msgs)
	run(t, env, false, eosinkBin, "migrate", "up", "-config", config)

	history := pgx.Identifier{schema, "history"}.Sanitize()
	stock := pgx.Identifier{schema, "stock"}.Sanitize()
	count := func() int {
		var n int
		_ = db.QueryRow(ctx, "SELECT count(*) FROM "+history).Scan(&n)
		return n
	}
	want := len(moves) - len(poison)
	// The first run kills itself (SIGKILL) the 5th time a batch's writes are in its open
	// transaction: a kill from outside, after polling the table, could come after
	// everything was applied.
	first := testbed.StartProcess(t, eosinkBin, "eosink run inventory", []string{"run", "-config", config},
		append(env[:len(env):len(env)], "EOSINK_FAILPOINTS=in-handler=kill@5")...)
	if err := first.Wait(90 * time.Second); !testbed.KilledBySIGKILL(err) {
		t.Fatalf("first run: %v, want killed by SIGKILL", err)
	}
	if !first.Contains("failpoint fired: in-handler kill") {
		t.Fatalf("the first run died without the failpoint firing")
	}
	killedAt := count()
	second := testbed.StartProcess(t, eosinkBin, "eosink run inventory again", []string{"run", "-config", config}, env...)
	testbed.Eventually(t, 120*time.Second, "all moves applied", func() (bool, string) {
		n := count()
		return n == want, fmt.Sprintf("%d of %d", n, want)
	})
	second.StopClean(60 * time.Second)
	if killedAt == 0 || killedAt >= want {
		t.Fatalf("the SIGKILL left %d of %d moves applied; want some, not all: the test proves nothing", killedAt, want)
	}

	// Stock is the sum of history per (sku, warehouse), and updated_at its latest move.
	var bad []string
	rows, err := db.Query(ctx, `SELECT coalesce(s.sku, h.sku) || '/' || coalesce(s.warehouse, h.warehouse), s.qty, h.total, s.updated_at = h.last
FROM `+stock+` s FULL JOIN (SELECT sku, warehouse, sum(delta) total, max(at) last FROM `+history+` GROUP BY 1, 2) h USING (sku, warehouse)
WHERE s.qty IS DISTINCT FROM h.total OR s.updated_at IS DISTINCT FROM h.last`)
	if err != nil {
		t.Fatal(err)
	}
	var key string
	var qty, total *int64
	var sameAt *bool
	if _, err := pgx.ForEachRow(rows, []any{&key, &qty, &total, &sameAt}, func() error {
		bad = append(bad, fmt.Sprintf("%s: stock %v, history sum %v, same updated_at %v", key, deref(qty), deref(total), sameAt))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("stock differs from the history's sums:\n%s", strings.Join(bad, "\n"))
	}

	// History holds each produced move once, and no poison one; the model's sums match.
	got := map[string]int{}
	rows, err = db.Query(ctx, "SELECT move_id, delta FROM "+history)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	var delta int
	n := 0
	if _, err := pgx.ForEachRow(rows, []any{&id, &delta}, func() error { got[id] = delta; n++; return nil }); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	for _, m := range moves {
		d, ok := got[m.id]
		switch {
		case poison[m.id] && ok:
			t.Errorf("poison move %s has a history row", m.id)
		case !poison[m.id] && (!ok || d != m.delta):
			t.Errorf("move %s: in history %v with delta %d, want delta %d", m.id, ok, d, m.delta)
		case !poison[m.id]:
			sums[m.sku+"/"+m.wh] += int64(m.delta)
		}
	}
	if n != want {
		t.Errorf("history holds %d rows, want %d moves", n, want)
	}
	rows, err = db.Query(ctx, "SELECT sku || '/' || warehouse, qty FROM "+stock)
	if err != nil {
		t.Fatal(err)
	}
	var q int64
	if _, err := pgx.ForEachRow(rows, []any{&key, &q}, func() error {
		if sums[key] != q {
			t.Errorf("%s: stock %d, the produced moves sum to %d", key, q, sums[key])
		}
		delete(sums, key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(sums) > 0 {
		t.Errorf("no stock row for %v", sums)
	}

	// The example's own check agrees.
	if out, _ := run(t, env, false, inventoryBin, "verify"); !strings.Contains(out, "differing from the history's sums: 0") {
		t.Errorf("inventory verify:\n%s", out)
	}

	// Each poison move is dead-lettered once; the republished moves were skipped.
	var dead, deadPoison int
	if err := db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE convert_from(value, 'UTF8') LIKE '%wh-closed%' AND error LIKE '%foreign key%')
FROM `+pgx.Identifier{offsets, "dead_letters"}.Sanitize()+` WHERE pipeline = $1`, pipeline).Scan(&dead, &deadPoison); err != nil {
		t.Fatal(err)
	}
	if dead != len(poison) || deadPoison != len(poison) {
		t.Errorf("dead letters: %d (%d of them the poison moves, refused by the foreign key), want %d", dead, deadPoison, len(poison))
	}
	var dups int
	if err := db.QueryRow(ctx, `SELECT coalesce(sum(duplicates), 0) FROM `+pgx.Identifier{offsets, "inbox"}.Sanitize()+` WHERE subscriber = 'inventory'`).Scan(&dups); err != nil {
		t.Fatal(err)
	}
	if dups != republished {
		t.Errorf("inbox counted %d duplicates, want the %d republished moves", dups, republished)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
