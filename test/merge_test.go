package test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// mergeMove is one record of TestMergePipelineAndReplay; nil is a JSON null.
type mergeMove struct {
	id   int
	k    string
	qty  *int
	note *string
	at   *int
}

func (m mergeMove) json() string {
	num := func(p *int) string {
		if p == nil {
			return "null"
		}
		return strconv.Itoa(*p)
	}
	note := "null"
	if m.note != nil {
		note = strconv.Quote(*m.note)
	}
	return fmt.Sprintf(`{"id": %d, "k": %q, "qty": %s, "note": %s, "at": %s}`, m.id, m.k, num(m.qty), note, num(m.at))
}

// mergeModel applies moves one by one: totals with add, min, max, keep_first, coalesce and
// replace; latest guarded by at (only_if_newer), created keep_first.
func mergeModel(moves []mergeMove) (totals, latest map[string]string) {
	type tot struct {
		qty, lo, hi *int
		first, last int
		note        *string
	}
	type lat struct {
		at           *int
		val, created int
	}
	ts, ls := map[string]*tot{}, map[string]*lat{}
	comb := func(a, b *int, f func(x, y int) int) *int {
		switch {
		case a == nil:
			return b
		case b == nil:
			return a
		}
		v := f(*a, *b)
		return &v
	}
	for _, m := range moves {
		if t, ok := ts[m.k]; !ok {
			ts[m.k] = &tot{qty: m.qty, lo: m.qty, hi: m.qty, first: m.id, last: m.id, note: m.note}
		} else {
			t.qty = comb(t.qty, m.qty, func(x, y int) int { return x + y })
			t.lo = comb(t.lo, m.qty, func(x, y int) int { return min(x, y) })
			t.hi = comb(t.hi, m.qty, func(x, y int) int { return max(x, y) })
			t.last = m.id
			if m.note != nil {
				t.note = m.note
			}
		}
		if l, ok := ls[m.k]; !ok {
			ls[m.k] = &lat{at: m.at, val: m.id, created: m.id}
		} else if m.at != nil && (l.at == nil || *m.at > *l.at) {
			l.at, l.val = m.at, m.id
		}
	}
	s := func(p any) string {
		switch v := p.(type) {
		case *int:
			if v != nil {
				return strconv.Itoa(*v)
			}
		case *string:
			if v != nil {
				return *v
			}
		}
		return "-"
	}
	totals, latest = map[string]string{}, map[string]string{}
	for k, t := range ts {
		totals[k] = fmt.Sprintf("%s %s %s %d %d %s", s(t.qty), s(t.lo), s(t.hi), t.first, t.last, s(t.note))
	}
	for k, l := range ls {
		latest[k] = fmt.Sprintf("%s %d %d", s(l.at), l.val, l.created)
	}
	return totals, latest
}

// TestMergePipelineAndReplay runs one pipeline of three sinks from a config file on the
// real broker, with batches of 7 records so that a key has several records in a batch and
// more across batches: a log table with on_conflict: nothing, an upsert with every merge
// operation, and an upsert guarded by only_if_newer. Both upserts equal the records
// applied one by one. Then older records are republished at new offsets and, after that,
// the pipeline is set back to the earliest offset with `eosink offsets set` and runs the
// log again: the guarded table's rows are never touched (their xmin stays), the log skips
// what it holds instead of dead-lettering it, and the add-merged totals count every record
// each time it is applied, as documented.
func TestMergePipelineAndReplay(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	topic := testbed.Topic(t, e, 1)
	schema := testbed.Schema(t, e)
	pipeline := testbed.Name(t, "p")
	db := testbed.Pool(t, e)
	ctx := context.Background()
	q := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	for _, ddl := range []string{
		"CREATE SCHEMA " + pgx.Identifier{schema}.Sanitize(),
		"CREATE TABLE " + q("log") + " (id integer PRIMARY KEY, k text NOT NULL, qty integer)",
		"CREATE TABLE " + q("totals") + " (k text PRIMARY KEY, qty bigint, lo integer, hi integer, first integer, last integer, note text)",
		"CREATE TABLE " + q("latest") + " (k text PRIMARY KEY, at integer, val integer, created integer)",
	} {
		if _, err := db.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(t.TempDir(), "pipeline.yaml")
	yaml := fmt.Sprintf(`pipeline: %[1]s
kafka:
  brokers: ${KAFKA_BOOTSTRAP_SERVERS}
  group: %[1]s
  topics: [%[2]s]
  properties: {session.timeout.ms: 6000, heartbeat.interval.ms: 1000}
database:
  url: ${DATABASE_URL}
  schema: %[3]s
  auto_migrate: true
on_poison: dead-letter
batch: {max_records: 7, max_wait: 20ms}
sink:
  type: multi
  sinks:
    - type: table
      table: %[3]s.log
      on_conflict: nothing
      columns: {id: value.id, k: value.k, qty: value.qty}
    - type: upsert
      table: %[3]s.totals
      key: [k]
      merge: {qty: add, lo: min, hi: max, first: keep_first, note: coalesce, last: replace}
      columns: {k: value.k, qty: value.qty, lo: value.qty, hi: value.qty, first: value.id, last: value.id, note: value.note}
    - type: upsert
      table: %[3]s.latest
      key: [k]
      only_if_newer: at
      merge: {created: keep_first}
      columns: {k: value.k, at: value.at, val: value.id, created: value.id}
`, pipeline, topic, schema)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"KAFKA_BOOTSTRAP_SERVERS=" + e.Brokers, "DATABASE_URL=" + e.DatabaseURL}

	rng := rand.New(rand.NewPCG(3, 4))
	ptr := func(v int) *int { return &v }
	var moves []mergeMove
	for i := range 400 {
		m := mergeMove{id: i, k: fmt.Sprintf("k%d", rng.IntN(5))}
		if rng.IntN(5) > 0 {
			m.qty = ptr(rng.IntN(11) - 5)
		}
		if rng.IntN(3) == 0 {
			n := fmt.Sprintf("n%d", i)
			m.note = &n
		}
		if rng.IntN(8) > 0 {
			m.at = ptr(rng.IntN(60)) // ties, older ones after newer ones, NULLs
		}
		moves = append(moves, m)
	}
	produce := func(ms []mergeMove) {
		msgs := make([]testbed.Msg, len(ms))
		for i, m := range ms {
			msgs[i] = testbed.Msg{Partition: 0, Key: []byte(m.k), Value: []byte(m.json())}
		}
		testbed.Produce(t, e, topic, msgs)
	}
	table := func(name string) map[string]string {
		t.Helper()
		sql := map[string]string{
			"totals": `SELECT k, concat_ws(' ', coalesce(qty::text, '-'), coalesce(lo::text, '-'), coalesce(hi::text, '-'), first, last, coalesce(note, '-')) FROM ` + q("totals"),
			"latest": `SELECT k, concat_ws(' ', coalesce(at::text, '-'), val, created) FROM ` + q("latest"),
			"xmin":   `SELECT k, xmin::text FROM ` + q("latest"),
		}[name]
		rows, err := db.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		var k, v string
		if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error { out[k] = v; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(what string, got, want map[string]string) {
		t.Helper()
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %s is %q, want %q (one by one)", what, k, got[k], w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
		}
	}
	var logged, dead int
	counts := func() {
		_ = db.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+q("log")+"), (SELECT count(*) FROM "+q("dead_letters")+")").Scan(&logged, &dead)
	}
	lag := func() int64 {
		out, err := run(t, env, true, eosinkBin, "status", "-config", config, "-json")
		var st []struct {
			Lag int64 `json:"lag"`
		}
		if err != nil || json.Unmarshal([]byte(out), &st) != nil || len(st) != 1 {
			return -1
		}
		return st[0].Lag
	}
	runUntilCaughtUp := func(name string) {
		t.Helper()
		p := testbed.StartProcess(t, eosinkBin, name, []string{"run", "-config", config}, env...)
		testbed.Eventually(t, 90*time.Second, name+" to catch up", func() (bool, string) {
			l := lag()
			return l == 0, fmt.Sprint("lag ", l)
		})
		p.StopClean(30 * time.Second)
	}

	// 1. The records, in batches of 7: several of a key in one batch, and across batches.
	produce(moves)
	runUntilCaughtUp("eosink run")
	totals, latest := mergeModel(moves)
	check("totals", table("totals"), totals)
	check("latest", table("latest"), latest)
	if counts(); logged != len(moves) || dead != 0 {
		t.Fatalf("log holds %d rows, %d dead letters; want %d, 0", logged, dead, len(moves))
	}
	xmin := table("xmin")

	// 2. Older records republished at new offsets: the guard keeps every row as it is, the
	// log skips them, the totals add them (add is exactly once per record, not per event).
	var older []mergeMove
	for _, m := range moves {
		if m.at != nil && latest[m.k] != "" && len(older) < 30 {
			if at, _ := strconv.Atoi(strings.Fields(latest[m.k])[0]); *m.at < at {
				older = append(older, m)
			}
		}
	}
	if len(older) < 30 {
		t.Fatalf("only %d older records to republish", len(older))
	}
	produce(older)
	runUntilCaughtUp("eosink run after republishing")
	all := append(append([]mergeMove(nil), moves...), older...)
	totals, _ = mergeModel(all)
	check("totals after republishing", table("totals"), totals)
	check("latest after republishing", table("latest"), latest)
	check("latest's xmin after republishing (rows not even rewritten)", table("xmin"), xmin)
	if counts(); logged != len(moves) || dead != 0 {
		t.Fatalf("after republishing, log holds %d rows, %d dead letters; want %d, 0 (skipped)", logged, dead, len(moves))
	}

	// 3. A replay of the whole log: `eosink offsets set` to the earliest offset.
	run(t, env, false, eosinkBin, "offsets", "set", "-config", config, "-to", "earliest", "-reason", "replay test", "-operator", "test")
	if l := lag(); l != int64(len(all)) {
		t.Fatalf("lag after offsets set: %d, want %d", l, len(all))
	}
	runUntilCaughtUp("eosink run after offsets set")
	check("latest after the replay", table("latest"), latest)
	check("latest's xmin after the replay (rows not even rewritten)", table("xmin"), xmin)
	totals, _ = mergeModel(append(append([]mergeMove(nil), all...), all...))
	check("totals after the replay (every record added again)", table("totals"), totals)
	if counts(); logged != len(moves) || dead != 0 {
		t.Fatalf("after the replay, log holds %d rows, %d dead letters; want %d, 0 (skipped)", logged, dead, len(moves))
	}
}
