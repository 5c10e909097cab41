package table_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/sinktest"
	"github.com/eosink/eosink/sink/table"
)

// mergeHarness runs the conformance suite on an upsert with every merge operation (each
// record its own key: the suite checks inserts, rollbacks, parts and poison).
func mergeHarness(guard bool) sinktest.Harness {
	return sinktest.Harness{
		New: func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin {
			exec(t, db, "CREATE TABLE "+pgx.Identifier{schema, "m"}.Sanitize()+
				` (account text PRIMARY KEY, amount integer NOT NULL, lo integer, hi integer, first bigint, note text, src_offset bigint)`)
			c := table.UpsertConfig{Key: []string{"account"}, Config: table.Config{Table: schema + ".m",
				Columns: map[string]table.Column{"account": {From: "value.account"}, "amount": {From: "value.amount"},
					"lo": {From: "value.amount"}, "hi": {From: "value.amount"}, "first": {From: "offset"}, "note": {From: "value.note"},
					"src_offset": {From: "offset"}}}}
			c.Merge = map[string]string{"amount": "add", "lo": "min", "hi": "max", "first": "keep_first", "note": "coalesce"}
			if guard {
				c.Merge = map[string]string{"first": "keep_first"}
				c.OnlyIfNewer = "src_offset"
			}
			p, err := table.NewUpsert(c)
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Record: record,
		Poison: poison,
		State: func(ctx context.Context, db sink.DB, schema string) ([]string, error) {
			return rows(ctx, db, `SELECT format('%s/%s/%s/%s/%s/%s/%s', account, amount, lo, hi, first, note, src_offset) FROM `+pgx.Identifier{schema, "m"}.Sanitize())
		},
		Expect: func(r sink.Record) string {
			i := r.Offset
			return fmt.Sprintf("a-%d/%d/%d/%d/%d/tab\there \\ \"quoted\" é/%d", i, i*3, i*3, i*3, i, i)
		},
	}
}

func TestUpsertMergeConformance(t *testing.T)       { sinktest.Run(t, mergeHarness(false)) }
func TestUpsertOnlyIfNewerConformance(t *testing.T) { sinktest.Run(t, mergeHarness(true)) }

// mrec is one record of the merge model: nil fields are JSON nulls.
type mrec struct {
	key                     string
	qty, lo, hi, at         *int
	first, note, last, keep *string
}

func (m mrec) json() string {
	f := func(p any) string {
		switch v := p.(type) {
		case *int:
			if v != nil {
				return strconv.Itoa(*v)
			}
		case *string:
			if v != nil {
				return strconv.Quote(*v)
			}
		}
		return "null"
	}
	return fmt.Sprintf(`{"k": %q, "qty": %s, "lo": %s, "hi": %s, "at": %s, "first": %s, "note": %s, "last": %s, "keep": %s}`,
		m.key, f(m.qty), f(m.lo), f(m.hi), f(m.at), f(m.first), f(m.note), f(m.last), f(m.keep))
}

// randomMoves returns n records over 4 keys, with NULLs and repeated guard values.
func randomMoves(rng *rand.Rand, n int) []mrec {
	ip := func() *int {
		if rng.IntN(4) == 0 {
			return nil
		}
		v := rng.IntN(11) - 5
		return &v
	}
	sp := func(prefix string, i int) *string {
		if rng.IntN(4) == 0 {
			return nil
		}
		s := fmt.Sprintf("%s-%d", prefix, i)
		return &s
	}
	out := make([]mrec, n)
	for i := range out {
		out[i] = mrec{key: fmt.Sprintf("k%d", rng.IntN(4)), qty: ip(), lo: ip(), hi: ip(), at: ip(),
			first: sp("f", i), note: sp("n", i), last: sp("l", i), keep: sp("c", i)}
	}
	return out
}

// applyOne is the model: what applying the records one by one gives, per key.
func applyOne(recs []mrec, guard, orEqual bool) map[string]mrec {
	rows := map[string]mrec{}
	for _, r := range recs {
		row, ok := rows[r.key]
		if !ok {
			rows[r.key] = r
			continue
		}
		if guard {
			if r.at == nil || (row.at != nil && (*r.at < *row.at || (*r.at == *row.at && !orEqual))) {
				continue
			}
			r.keep = row.keep // keep_first
			rows[r.key] = r
			continue
		}
		pick := func(a, b *int, f func(x, y int) int) *int {
			switch {
			case a == nil:
				return b
			case b == nil:
				return a
			}
			v := f(*a, *b)
			return &v
		}
		row.qty = pick(row.qty, r.qty, func(x, y int) int { return x + y })
		row.lo = pick(row.lo, r.lo, func(x, y int) int { return min(x, y) })
		row.hi = pick(row.hi, r.hi, func(x, y int) int { return max(x, y) })
		row.at, row.last, row.keep = r.at, r.last, r.keep // replace
		if r.note != nil {                                // coalesce
			row.note = r.note
		}
		// first: keep_first
		rows[r.key] = row
	}
	return rows
}

func (m mrec) String() string {
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
		return "∅"
	}
	return strings.Join([]string{m.key, s(m.qty), s(m.lo), s(m.hi), s(m.at), s(m.first), s(m.note), s(m.last), s(m.keep)}, "|")
}

// TestUpsertMergesEqualOneByOne: for random records over a few keys (several per key in a
// batch, NULLs, ties of the guard), the table after one batch, after random batches, and
// after one record per batch equals the model of applying them one by one; with merge
// operations, with only_if_newer, and with only_if_newer and on_equal: update.
func TestUpsertMergesEqualOneByOne(t *testing.T) {
	db, schema := testDB(t)
	tbl := pgx.Identifier{schema, "m"}.Sanitize()
	exec(t, db, "CREATE TABLE "+tbl+` (k text PRIMARY KEY, qty integer, lo integer, hi integer, at integer, first text, note text, last text, keep text)`)
	cols := map[string]table.Column{}
	for _, c := range []string{"k", "qty", "lo", "hi", "at", "first", "note", "last", "keep"} {
		cols[c] = table.Column{From: "value." + c}
	}
	for _, mode := range []string{"merge", "guard", "guard or equal"} {
		guard, orEqual := mode != "merge", mode == "guard or equal"
		c := table.UpsertConfig{Key: []string{"k"}, Config: table.Config{Table: schema + ".m", Columns: cols}}
		if guard {
			c.OnlyIfNewer = "at"
			c.Merge = map[string]string{"keep": "keep_first", "first": "replace"}
			if orEqual {
				c.OnEqual = table.OnEqualUpdate
			}
		} else {
			c.Merge = map[string]string{"qty": "add", "lo": "min", "hi": "max", "first": "keep_first", "note": "coalesce", "at": "replace"}
		}
		p, err := table.NewUpsert(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Prepare(context.Background(), db); err != nil {
			t.Fatal(err)
		}
		for seed := range uint64(8) {
			rng := rand.New(rand.NewPCG(seed, 1))
			recs := randomMoves(rng, 40)
			model := applyOne(recs, guard, orEqual)
			var want []string
			for _, r := range model {
				want = append(want, r.String())
			}
			for _, split := range []string{"one batch", "random batches", "one by one"} {
				t.Run(fmt.Sprintf("%s/seed=%d/%s", mode, seed, split), func(t *testing.T) {
					exec(t, db, "TRUNCATE "+tbl)
					// A row before the batch, for the update path: the first record of k0.
					var batch []sink.Record
					flush := func() {
						if len(batch) > 0 {
							writeCommit(t, db, p, batch...)
							batch = nil
						}
					}
					for i, r := range recs {
						batch = append(batch, sink.Record{Value: []byte(r.json())})
						if split == "one by one" || (split == "random batches" && rng.IntN(5) == 0) || i == 0 {
							flush()
						}
					}
					flush()
					got, err := rows(context.Background(), db, `SELECT concat_ws('|', k, coalesce(qty::text, '∅'), coalesce(lo::text, '∅'),
coalesce(hi::text, '∅'), coalesce(at::text, '∅'), coalesce(first, '∅'), coalesce(note, '∅'), coalesce(last, '∅'), coalesce(keep, '∅')) FROM `+tbl)
					if err != nil {
						t.Fatal(err)
					}
					if d := diffSets(got, want); d != "" {
						t.Fatalf("table differs from applying the records one by one:\n%s", d)
					}
				})
			}
		}
	}
}

func diffSets(got, want []string) string {
	g := map[string]int{}
	for _, s := range got {
		g[s]++
	}
	for _, s := range want {
		g[s]--
	}
	var b strings.Builder
	for s, n := range g {
		if n != 0 {
			fmt.Fprintf(&b, "  %+d %s\n", n, s)
		}
	}
	return b.String()
}

// TestUpsertMergeExamples: the documented results, literally.
func TestUpsertMergeExamples(t *testing.T) {
	db, schema := testDB(t)
	tbl := pgx.Identifier{schema, "stock"}.Sanitize()
	exec(t, db, "CREATE TABLE "+tbl+` (sku text, wh text, qty integer NOT NULL, at integer, PRIMARY KEY (sku, wh))`)
	p, err := table.NewUpsert(table.UpsertConfig{Key: []string{"sku", "wh"}, Merge: map[string]string{"qty": "add", "at": "max"},
		Config: table.Config{Table: schema + ".stock", Columns: map[string]table.Column{
			"sku": {From: "value.sku"}, "wh": {From: "value.wh"}, "qty": {From: "value.d"}, "at": {From: "value.at"}}}})
	if err != nil {
		t.Fatal(err)
	}
	v := func(sku string, d, at int) sink.Record {
		return sink.Record{Value: []byte(fmt.Sprintf(`{"sku": %q, "wh": "w", "d": %d, "at": %d}`, sku, d, at))}
	}
	writeCommit(t, db, p, v("a", 5, 1), v("a", 3, 3), v("b", 1, 1), v("a", -2, 2)) // a: 6 at 3, all three summed
	writeCommit(t, db, p, v("a", 10, 2), v("b", 1, 5))                             // a: 16 at 3, b: 2 at 5
	got, err := rows(context.Background(), db, "SELECT string_agg(sku || '=' || qty || '@' || at, ' ' ORDER BY sku) FROM "+tbl)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "a=16@3 b=2@5" {
		t.Fatalf("stock holds %q, want a=16@3 b=2@5", got)
	}
}

func TestUpsertMergeConfigErrors(t *testing.T) {
	cols := map[string]table.Column{"k": {From: "key"}, "qty": {From: "value.q"}, "at": {From: "value.at"}, "note": {From: "value.n"}}
	for _, tc := range []struct {
		c    table.UpsertConfig
		want string
	}{
		{table.UpsertConfig{Merge: map[string]string{"qty": "sum"}}, `merge.qty: "sum" is not replace, add, min, max, keep_first, coalesce`},
		{table.UpsertConfig{Merge: map[string]string{"qtty": "add"}}, `merge.qtty: not a column of columns`},
		{table.UpsertConfig{Merge: map[string]string{"k": "add"}}, `merge.k: a key column`},
		{table.UpsertConfig{Merge: map[string]string{"qty": "add"}, OnConflict: "nothing"}, `merge.qty: add needs on_conflict: update`},
		{table.UpsertConfig{Merge: map[string]string{"qty": "max"}, DeleteOnTombstone: true}, `merge.qty: max cannot be combined with delete_on_tombstone`},
		{table.UpsertConfig{Merge: map[string]string{"qty": "add"}, OnlyIfNewer: "at"}, `merge.qty: add cannot be combined with only_if_newer`},
		{table.UpsertConfig{Merge: map[string]string{"note": "coalesce"}, OnlyIfNewer: "at"}, `merge.note: coalesce cannot be combined with only_if_newer`},
		{table.UpsertConfig{OnlyIfNewer: "when"}, `only_if_newer: "when" is not a column of columns`},
		{table.UpsertConfig{OnlyIfNewer: "k"}, `only_if_newer: "k" is a key column`},
		{table.UpsertConfig{OnlyIfNewer: "at", Merge: map[string]string{"at": "max"}}, `merge.at: max cannot be combined with only_if_newer`},
		{table.UpsertConfig{OnlyIfNewer: "at", OnConflict: "nothing"}, `only_if_newer: needs on_conflict: update`},
		{table.UpsertConfig{OnlyIfNewer: "at", DeleteOnTombstone: true}, `only_if_newer: cannot be combined with delete_on_tombstone`},
		{table.UpsertConfig{OnEqual: "update"}, `on_equal: update needs only_if_newer`},
		{table.UpsertConfig{OnlyIfNewer: "at", OnEqual: "overwrite"}, `on_equal: "overwrite" is not skip or update`},
	} {
		tc.c.Key, tc.c.Table, tc.c.Columns = []string{"k"}, "t", cols
		_, err := table.NewUpsert(tc.c)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("NewUpsert(merge %v, only_if_newer %q) = %v, want %q", tc.c.Merge, tc.c.OnlyIfNewer, err, tc.want)
		}
	}
	// A type without + (add on text) is refused at start, by Prepare.
	db, schema := testDB(t)
	exec(t, db, "CREATE TABLE "+pgx.Identifier{schema, "t"}.Sanitize()+` (k text PRIMARY KEY, qty text, at integer, note text)`)
	p, err := table.NewUpsert(table.UpsertConfig{Key: []string{"k"}, Merge: map[string]string{"qty": "add"}, Config: table.Config{Table: schema + ".t", Columns: cols}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(context.Background(), db); err == nil || !strings.Contains(err.Error(), "sum(text)") {
		t.Fatalf("Prepare with add on a text column = %v, want sum(text) refused", err)
	}
}
