package cdc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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

// TestSequenceStreamsFixtures reads the real connector's records under a bound of one
// event, as the sink does: a record refused with sink.ErrSequenceFull waits (its partition
// paused) and is given again after each record taken. Transaction 756 (three changes)
// passes the bound and streams: its changes come out in pieces marked Continued, with
// every unit handed out until its end, which is not continued and carries its commit LSN;
// 757 follows. Each change comes out once.
func TestSequenceStreamsFixtures(t *testing.T) {
	p, err := New(Config{Schemas: []string{"public"}, TopicCheck: TopicCheckOff,
		Consistency: ConsistencyTransaction, TransactionTopic: "transaction"})
	if err != nil {
		t.Fatal(err)
	}
	q := &sequence{p: p, a: txn.New(txn.Config{MaxEvents: 1})}
	ctx := context.Background()
	type rec struct {
		kind, topic string
		part        int32
		off         int64
	}
	// Each partition's records; the data partitions are read ahead of the transaction
	// topic, a paused partition not at all until its refused record is taken.
	queues := [][]rec{{}, {}, {}}
	for off := range int64(4) {
		queues[0] = append(queues[0], rec{"change", "public.accounts", 1, off})
		queues[2] = append(queues[2], rec{"marker", "transaction", 0, off})
	}
	for off := range int64(3) {
		queues[1] = append(queues[1], rec{"change", "public.lines", 0, off})
	}
	deferred := map[string]*sink.Record{}
	refusals := 0
	var units []*unit
	give := func(key string, r *sink.Record) bool {
		err := q.Add(ctx, r)
		if errors.Is(err, sink.ErrSequenceFull) {
			deferred[key] = r
			refusals++
			return false
		}
		if err != nil {
			t.Fatalf("%s@%d: %v", key, r.Offset, err)
		}
		delete(deferred, key)
		for u, ok := q.Next(); ok; u, ok = q.Next() {
			units = append(units, u.(*unit))
		}
		return true
	}
	for {
		read := false
		for i := range queues {
			if len(queues[i]) == 0 {
				continue
			}
			x := queues[i][0]
			key := fmt.Sprintf("%s[%d]", x.topic, x.part)
			if deferred[key] != nil {
				continue // paused
			}
			queues[i] = queues[i][1:]
			read = true
			if give(key, fixtureRecord(t, x.kind, x.topic, x.part, x.off)) {
				for k, r := range deferred {
					give(k, r)
				}
			}
			break
		}
		if !read {
			for k, r := range deferred {
				read = give(k, r) || read
			}
		}
		if !read {
			break
		}
	}
	for i := range queues {
		if len(queues[i]) > 0 {
			t.Fatalf("deadlock: %v left unread, %d records refused", queues[i], len(deferred))
		}
	}
	if len(deferred) > 0 {
		t.Fatalf("records never taken: %v", deferred)
	}
	if refusals == 0 {
		t.Fatal("no record was refused: the bound of one event is not exercised")
	}
	var desc []string
	ops := map[int64]string{}
	streaming := false
	for _, u := range units {
		var s string
		for _, ev := range u.evs {
			s += ev.op
		}
		desc = append(desc, fmt.Sprintf("%s commit=%d streamed=%v continued=%v", s, u.commit, u.streamed, u.continued))
		if u.streamed && u.commit == 0 {
			streaming = true
		}
		if streaming && u.commit == 0 && !u.continued {
			t.Errorf("a unit handed out while 756 streams is not continued: %s", desc[len(desc)-1])
		}
		if u.commit > 0 {
			if u.continued {
				t.Errorf("a transaction's end is continued: %s", desc[len(desc)-1])
			}
			streaming = false
		}
		if u.xid == 756 || u.xid == 757 {
			ops[int64(u.xid)] += s
		}
	}
	t.Logf("units:\n  %s", strings.Join(desc, "\n  "))
	if ops[756] != "uuc" && ops[756] != "ucu" && ops[756] != "cuu" {
		t.Errorf("756's changes %q, want its three (u, u, c) once", ops[756])
	}
	if ops[757] != "d" {
		t.Errorf("757's changes %q, want its delete once", ops[757])
	}
	var streamedEnd bool
	for _, u := range units {
		streamedEnd = streamedEnd || (u.xid == 756 && u.streamed && u.commit == 39747704)
	}
	if !streamedEnd {
		t.Errorf("756 did not stream (bound 1, three changes): %s", strings.Join(desc, "; "))
	}
}
