package txn

import (
	"errors"
	"testing"
)

// FuzzAssembler feeds an assembler arbitrary inputs, each three bytes of the fuzzer's data:
// whatever they are, no panic, only typed errors, reported positions never go back,
// emitted commit LSNs only go up, and nothing held is negative.
func FuzzAssembler(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 1, 1, 2, 1, 0, 2, 2, 1})
	f.Add([]byte{1, 0, 1, 2, 0, 2, 0, 5, 1, 3, 3, 0, 1, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		a := New(Config{MaxEvents: 6, MaxBytes: 400})
		offsets := map[partKey]int64{}
		reported := map[partKey]int64{}
		var commit int64
		for len(data) >= 3 {
			op, x, y := data[0]%4, data[1], data[2]
			data = data[3:]
			xid := uint64(x % 4)
			topic, part := "a", int32(y%2)
			if op < 2 {
				topic, part = txTopic, 0
			}
			k := partKey{topic, part}
			at := Position{topic, part, offsets[k] + int64(y%3)}
			var err error
			switch op {
			case 0:
				err = a.Marker(Marker{Status: Begin, ID: ID{xid, int64(x)}}, at)
			case 1:
				n := int64(y % 4)
				m := Marker{Status: End, ID: ID{xid, int64(x) * 10}, EventCount: n}
				if n > 0 {
					m.Collections = []Collection{{"a", n}}
				}
				err = a.Marker(m, at)
			case 2:
				total := int64(y%3) + 1
				err = a.Change(Change{At: at, Size: int64(y), Meta: Meta{Op: "u", Collection: "a", Txn: true,
					ID: ID{xid, int64(x)}, TotalOrder: total, CollectionOrder: total, PrevCommit: int64(x/4) * 10}})
			case 3:
				err = a.Pass(at)
			}
			if err != nil && !errors.Is(err, ErrInconsistent) && !errors.Is(err, ErrTooLarge) &&
				!errors.Is(err, ErrFull) && !errors.Is(err, ErrOrder) {
				t.Fatalf("untyped error %v", err)
			}
			if err == nil {
				offsets[k] = at.Offset + 1
			}
			for tx, ok := a.Next(); ok; tx, ok = a.Next() {
				if tx.Commit <= commit {
					t.Fatalf("commit %d after %d", tx.Commit, commit)
				}
				commit = tx.Commit
				for i, c := range tx.Changes {
					if c.Meta.TotalOrder != int64(i+1) {
						t.Fatalf("transaction %d: change %d has total_order %d", tx.XID, i, c.Meta.TotalOrder)
					}
				}
				for _, p := range tx.Positions {
					pk := partKey{p.Topic, p.Partition}
					if last, ok := reported[pk]; ok && p.Offset < last {
						t.Fatalf("%s/%d went back from %d to %d", p.Topic, p.Partition, last, p.Offset)
					}
					reported[pk] = p.Offset
				}
			}
			if s := a.Stats(); s.HeldEvents < 0 || s.HeldBytes < 0 {
				t.Fatalf("held %+v", s)
			}
		}
	})
}
