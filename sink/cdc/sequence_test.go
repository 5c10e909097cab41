package cdc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/cdc/internal/txn"
)

// fixtureRecord is a record of the real connector's capture in internal/txn/testdata/debezium
// (see its fixture_test.go): topic is the name without the prefix.
func fixtureRecord(t *testing.T, kind, topic string, part int32, off int64) *sink.Record {
	t.Helper()
	base := filepath.Join("internal", "txn", "testdata", "debezium", fmt.Sprintf("%s-%s-p%d-o%d", kind, topic, part, off))
	value, err := os.ReadFile(base + ".json")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(base + ".key")
	if err != nil {
		t.Fatal(err)
	}
	r := &sink.Record{Topic: topic, Partition: part, Offset: off, Key: key, Value: value}
	if len(value) == 0 {
		r.Value = nil // the tombstone
	}
	return r
}

// TestSequenceFixtures feeds the real connector's records to the plugin's sequence, data
// partitions read ahead of the transaction topic: the snapshot reads come out first as one
// unit, then transaction 756 (three changes on two topics) and 757 (a delete; its tombstone
// belongs to none), each with the positions its commit stores: never past a record of a
// transaction not yet out.
func TestSequenceFixtures(t *testing.T) {
	p, err := New(Config{Schemas: []string{"public"}, TopicCheck: TopicCheckOff,
		Consistency: ConsistencyTransaction, TransactionTopic: "transaction"})
	if err != nil {
		t.Fatal(err)
	}
	q := &sequence{p: p, a: txn.New(txn.Config{})}
	ctx := context.Background()
	add := func(kind, topic string, part int32, off int64) {
		t.Helper()
		if err := q.Add(ctx, fixtureRecord(t, kind, topic, part, off)); err != nil {
			t.Fatalf("%s %s[%d]@%d: %v", kind, topic, part, off, err)
		}
	}
	type got struct {
		ops    string
		commit int64
		pos    []sink.Offset
	}
	// next returns the next unit with changes; positions is the one of positions alone
	// that came before it, if any.
	var positions []sink.Offset
	next := func() *got {
		positions = nil
		u, ok := q.Next()
		for ok && len(u.(*unit).recs) == 0 && u.(*unit).commit == 0 {
			positions = u.(*unit).pos
			u, ok = q.Next()
		}
		if !ok {
			return nil
		}
		uu := u.(*unit)
		g := &got{commit: uu.commit, pos: uu.pos}
		for _, ev := range uu.evs {
			g.ops += ev.op
		}
		return g
	}
	for off := range int64(4) {
		add("change", "public.accounts", 1, off)
	}
	add("change", "public.lines", 0, 0)
	add("change", "public.lines", 0, 1)
	add("change", "public.lines", 0, 2)
	if g := next(); g == nil || g.ops != "rr" || g.commit != 0 ||
		!reflect.DeepEqual(g.pos, []sink.Offset{{Topic: "public.accounts", Partition: 1, Next: 2}}) {
		t.Fatalf("the snapshot reads: %+v", g)
	}
	if g := next(); g != nil {
		t.Fatalf("a unit before any END: %+v", g)
	}
	if w := q.Waiting(); w != "" {
		t.Fatalf("waiting before any END: %q", w)
	}
	add("marker", "transaction", 0, 0)
	add("marker", "transaction", 0, 1)
	g := next()
	if g == nil || g.ops != "uuc" || g.commit != 39747704 {
		t.Fatalf("transaction 756: %+v", g)
	}
	// lines[0]@1 (757's delete) is still held: lines stays at 1; the transaction topic
	// passes 756's END.
	want := []sink.Offset{{Topic: "public.accounts", Partition: 1, Next: 4}, {Topic: "public.lines", Partition: 0, Next: 1},
		{Topic: "transaction", Partition: 0, Next: 2}}
	if !reflect.DeepEqual(g.pos, want) {
		t.Fatalf("756's positions %+v, want %+v", g.pos, want)
	}
	add("marker", "transaction", 0, 2)
	add("marker", "transaction", 0, 3)
	g = next()
	want = []sink.Offset{{Topic: "public.lines", Partition: 0, Next: 3}, {Topic: "transaction", Partition: 0, Next: 4}}
	if g == nil || g.ops != "d" || g.commit != 39747824 || !reflect.DeepEqual(g.pos, want) {
		t.Fatalf("transaction 757: %+v, want positions %+v", g, want)
	}
	if g := next(); g != nil {
		t.Fatalf("a unit after the last END: %+v", g)
	}

	// The same records again (a replay, or Debezium sending them again) after a restart at
	// the watermark: the snapshot reads apply again (the per-key positions skip them), no
	// transaction comes out twice, and a unit of positions alone moves past them.
	q = &sequence{p: p, a: txn.New(txn.Config{Watermark: 39747824})}
	for off := range int64(4) {
		add("change", "public.accounts", 1, off)
	}
	for off := range int64(3) {
		add("change", "public.lines", 0, off)
	}
	for off := range int64(4) {
		add("marker", "transaction", 0, off)
	}
	if g := next(); g == nil || g.ops != "rr" {
		t.Fatalf("the snapshot reads again: %+v", g)
	}
	want = []sink.Offset{{Topic: "public.accounts", Partition: 1, Next: 4}, {Topic: "public.lines", Partition: 0, Next: 3},
		{Topic: "transaction", Partition: 0, Next: 4}}
	if g := next(); g != nil || !reflect.DeepEqual(positions, want) {
		t.Fatalf("a transaction at or before the watermark came out again (%+v), or the positions past them did not: %+v, want %+v", g, positions, want)
	}
}
