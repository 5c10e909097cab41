package txn

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAssemblerRandomStreams builds Debezium-like streams, with connector restarts that
// re-send a run of transactions after a partial one, and reads them with the partitions
// interleaved at random: every source transaction comes out once, in commit order, whole,
// its changes by total_order, and at the end every partition's position is past its last
// record with nothing held.
func TestAssemblerRandomStreams(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomStream(t, seed, 0) })
	}
}

// TestAssemblerRandomStreamsBounded reads the same streams under a bound of 1 to 4 events:
// a record refused pauses its partition until a record is taken (as the sink pauses a
// partition), transactions past the bound stream, and the reading never deadlocks, what
// is held never passes the bound, and every transaction still comes out once, whole, in
// commit order.
func TestAssemblerRandomStreamsBounded(t *testing.T) {
	var streamed, dups int64
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			st := randomStream(t, seed, 1+int(seed%4))
			streamed, dups = streamed+st.Streamed, dups+st.Duplicates
		})
	}
	if streamed < 300 || dups == 0 {
		t.Errorf("%d transactions streamed, %d duplicates skipped over 300 streams: the bound is not exercised", streamed, dups)
	}
	t.Logf("%d transactions streamed, %d duplicates skipped", streamed, dups)
}

type srcTx struct {
	xid     uint64
	commit  int64
	prev    int64
	changes []Meta
	parts   []int32 // each change's partition of its collection's topic
}

func randomStream(t *testing.T, seed uint64, maxEvents int) Stats {
	r := rand.New(rand.NewPCG(seed, 7))
	colls := []string{"a", "b", "c"}
	n := 1 + r.IntN(12)
	txs := make([]srcTx, n)
	for i := range txs {
		tx := srcTx{xid: uint64(500 + i), commit: int64(100 * (i + 1))}
		if i > 0 {
			tx.prev = txs[i-1].commit
		}
		per := map[string]int64{}
		for k := range r.IntN(6) {
			c := colls[r.IntN(len(colls))]
			per[c]++
			tx.changes = append(tx.changes, Meta{Op: "u", Collection: c, Txn: true, ID: ID{tx.xid, tx.prev + int64(k) + 1},
				TotalOrder: int64(k + 1), CollectionOrder: per[c], PrevCommit: tx.prev})
			tx.parts = append(tx.parts, int32(r.IntN(2)))
		}
		txs[i] = tx
	}
	// The records of each partition, in the order the connector writes them.
	type rec struct {
		m *Marker
		c *Meta
	}
	streams := map[partKey][]rec{}
	tk := partKey{txTopic, 0}
	send := func(tx srcTx, upTo int, withEnd bool) {
		streams[tk] = append(streams[tk], rec{m: &Marker{Status: Begin, ID: ID{tx.xid, tx.prev + 1}}})
		for k := range upTo {
			pk := partKey{tx.changes[k].Collection, tx.parts[k]}
			streams[pk] = append(streams[pk], rec{c: &tx.changes[k]})
		}
		if withEnd {
			e := &Marker{Status: End, ID: ID{tx.xid, tx.commit}, EventCount: int64(len(tx.changes))}
			for _, c := range colls {
				var cnt int64
				for _, ch := range tx.changes {
					if ch.Collection == c {
						cnt++
					}
				}
				if cnt > 0 {
					e.Collections = append(e.Collections, Collection{c, cnt})
				}
			}
			streams[tk] = append(streams[tk], rec{m: e})
		}
	}
	for i := 0; i < n; i++ {
		send(txs[i], len(txs[i].changes), true)
		if r.IntN(4) == 0 { // the connector crashes inside the next transaction, restarts from an earlier one
			if i+1 < n {
				send(txs[i+1], r.IntN(len(txs[i+1].changes)+1), false)
			}
			for j := r.IntN(i + 1); j <= i; j++ {
				send(txs[j], len(txs[j].changes), true)
			}
		}
	}
	// Read the partitions interleaved at random.
	var keys []partKey
	for k := range streams {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y partKey) int {
		return cmp.Or(cmp.Compare(x.topic, y.topic), cmp.Compare(x.partition, y.partition))
	})
	next := map[partKey]int{}
	paused := map[partKey]bool{}
	a := New(Config{MaxEvents: maxEvents})
	var got []uint64
	var streamed []Change // of the stream open
	for {
		var live, ready []partKey
		for _, k := range keys {
			if next[k] < len(streams[k]) {
				live = append(live, k)
				if !paused[k] {
					ready = append(ready, k)
				}
			}
		}
		if len(live) == 0 {
			break
		}
		if len(ready) == 0 {
			w, _ := a.Waiting()
			t.Fatalf("deadlock: every partition left is paused; waiting for %+v; stats %+v", w, a.Stats())
		}
		k := ready[r.IntN(len(ready))]
		rc := streams[k][next[k]]
		at := Position{k.topic, k.partition, int64(next[k])}
		var err error
		if rc.m != nil {
			err = a.Marker(*rc.m, at)
		} else {
			err = a.Change(Change{At: at, Meta: *rc.c, Size: 10})
		}
		if maxEvents > 0 && (errors.Is(err, ErrFull) || errors.Is(err, ErrTooLarge)) {
			paused[k] = true // given again once a record is taken
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", at, err)
		}
		next[k]++
		clear(paused)
		streamed = append(streamed, a.TakeStreamed()...)
		for tx, ok := a.Next(); ok; tx, ok = a.Next() {
			src := txs[len(got)]
			if tx.Streamed {
				tx.Changes = append(streamed, tx.Changes...)
				streamed = nil
				slices.SortFunc(tx.Changes, func(x, y Change) int { return cmp.Compare(x.Meta.TotalOrder, y.Meta.TotalOrder) })
			}
			if tx.XID != src.xid || tx.Commit != src.commit || len(tx.Changes) != len(src.changes) {
				t.Fatalf("emitted %d (commit %d, %d changes), want %d (commit %d, %d changes)",
					tx.XID, tx.Commit, len(tx.Changes), src.xid, src.commit, len(src.changes))
			}
			for i, c := range tx.Changes {
				if c.Meta != src.changes[i] {
					t.Fatalf("transaction %d change %d: %+v, want %+v", tx.XID, i, c.Meta, src.changes[i])
				}
			}
			got = append(got, tx.XID)
		}
		if st := a.Stats(); maxEvents > 0 && st.HeldEvents+int64(len(a.ends)) > int64(maxEvents) {
			t.Fatalf("%v: %d events and %d ENDs held, bound %d", at, st.HeldEvents, len(a.ends), maxEvents)
		}
	}
	if len(got) != n {
		w, _ := a.Waiting()
		t.Fatalf("emitted %d transactions of %d; waiting for %+v; stats %+v", len(got), n, w, a.Stats())
	}
	for _, p := range a.Positions() {
		if want := int64(len(streams[partKey{p.Topic, p.Partition}])); p.Offset != want {
			t.Errorf("%s/%d at %d, want %d (its end)", p.Topic, p.Partition, p.Offset, want)
		}
	}
	if s := a.Stats(); s.HeldEvents != 0 || s.HeldBytes != 0 || len(a.txs) != 0 {
		t.Errorf("still held at the end: %+v, %d transactions", s, len(a.txs))
	}
	return a.Stats()
}
