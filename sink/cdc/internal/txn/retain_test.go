package txn

import (
	"runtime"
	"testing"
	"weak"
)

// payload stands for what a change's Value holds in the cdc plugin: its record and decoded
// event.
type payload struct{ b []byte }

// TestEmittedTransactionsAreLetGo: once a transaction is emitted, nothing in the assembler
// keeps its changes' values reachable. The ENDs are read ahead of the changes (the
// transaction topic ahead of the data partitions, as a small one-partition topic is), so
// that many ENDs wait at once; before the fix the slots of ends before the slice's start
// and the dropped states in byPrev kept every emitted change's record and event: 1.9 GB of
// RSS on the bench's stream (eos_cdc_tx), 270 MiB after.
func TestEmittedTransactionsAreLetGo(t *testing.T) {
	a := New(Config{})
	const rounds, perRound = 8, 50
	var values []weak.Pointer[payload]
	var xid uint64
	off, commit := int64(0), int64(1000)
	emitted := 0
	for range rounds {
		first := xid + 1
		for range perRound { // the ENDs first
			xid++
			commit += 100
			apply(t, a, int(off), end(off, xid, commit, "public.t", 1))
			off++
		}
		c := commit - perRound*100
		for x := first; x <= xid; x++ { // then each transaction's one change
			p := &payload{b: make([]byte, 4096)}
			values = append(values, weak.Make(p))
			s := chg("public.t", 0, int64(x), x, 1, 1, c)
			s.c.Value = p
			apply(t, a, int(x), s)
			c += 100
			for {
				tx, ok := a.Next()
				if !ok {
					break
				}
				emitted++
				_ = tx
			}
		}
	}
	if emitted != rounds*perRound {
		t.Fatalf("%d transactions emitted, want %d", emitted, rounds*perRound)
	}
	runtime.GC()
	runtime.GC()
	live := 0
	for _, w := range values {
		if w.Value() != nil {
			live++
		}
	}
	runtime.KeepAlive(a)
	if live > 0 {
		t.Fatalf("%d of %d emitted changes still reachable from the assembler (stats %+v)", live, len(values), a.Stats())
	}
}
