package txn

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

const txTopic = "dbz.transaction"

// step is one input of an assembler test: a marker, a change or a pass, and the error it
// should give (nil: none).
type step struct {
	m       *Marker
	c       *Change
	pass    *Position
	at      Position
	wantErr error
}

func begin(off int64, xid uint64, lsn int64) step {
	return step{m: &Marker{Status: Begin, ID: ID{xid, lsn}}, at: Position{txTopic, 0, off}}
}

// end is an END at off on the transaction topic; colls are name, count pairs.
func end(off int64, xid uint64, commit int64, colls ...any) step {
	m := &Marker{Status: End, ID: ID{xid, commit}}
	for i := 0; i < len(colls); i += 2 {
		n := int64(colls[i+1].(int))
		m.Collections = append(m.Collections, Collection{Name: colls[i].(string), EventCount: n})
		m.EventCount += n
	}
	return step{m: m, at: Position{txTopic, 0, off}}
}

// chg is a change of xid at topic/part/off, in data collection coll = the topic's name.
func chg(topic string, part int32, off int64, xid uint64, total, corder, prev int64) step {
	return step{c: &Change{At: Position{topic, part, off}, Size: 100, Meta: Meta{
		Op: "u", Collection: topic, Txn: true, ID: ID{xid, 1000 + total},
		TotalOrder: total, CollectionOrder: corder, PrevCommit: prev}}}
}

func pass(topic string, part int32, off int64) step {
	return step{pass: &Position{topic, part, off}}
}

func (s step) fails(err error) step { s.wantErr = err; return s }

// run feeds steps to a, draining Next after each, and returns what was emitted, one line
// per transaction: "xid [total orders] positions".
func run(t *testing.T, a *Assembler, steps []step) []string {
	t.Helper()
	var out []string
	for i, s := range steps {
		apply(t, a, i, s)
		for {
			tx, ok := a.Next()
			if !ok {
				break
			}
			out = append(out, describe(tx))
		}
	}
	return out
}

func describe(tx *Tx) string {
	var orders []string
	for _, c := range tx.Changes {
		orders = append(orders, fmt.Sprintf("%d", c.Meta.TotalOrder))
	}
	return fmt.Sprintf("%d [%s] %s", tx.XID, strings.Join(orders, " "), positions(tx.Positions))
}

func positions(ps []Position) string {
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%s/%d@%d", p.Topic, p.Partition, p.Offset))
	}
	return strings.Join(s, ",")
}

func want(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("emitted:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// apply gives step i to a and checks its error.
func apply(t *testing.T, a *Assembler, i int, s step) {
	t.Helper()
	var err error
	switch {
	case s.m != nil:
		err = a.Marker(*s.m, s.at)
	case s.c != nil:
		err = a.Change(*s.c)
	default:
		err = a.Pass(*s.pass)
	}
	if s.wantErr == nil && err != nil {
		t.Fatalf("step %d: %v", i, err)
	}
	if s.wantErr != nil && !errorIs(err, s.wantErr) {
		t.Fatalf("step %d: error %v, want %v", i, err, s.wantErr)
	}
}
