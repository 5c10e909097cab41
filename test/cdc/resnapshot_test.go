package cdc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/cdc"
)

// sourcedChange is a change event of table items (itemFieldsV1) as Debezium sends it:
// source.lsn, source.sequence ([commit, lsn], or [null, lsn] for a snapshot read) and
// source.ts_ms, the source's commit time (for a snapshot read: when it was read).
func sourcedChange(op string, id, commit, lsn, ts int64, name string) testbed.Msg {
	before, after := "null", "null"
	row := fmt.Sprintf(`{"id":%d,"name":%q,"amount":null,"at":null,"doc":null}`, id, name)
	switch op {
	case "c", "u", "r":
		after = row
	case "d":
		before = fmt.Sprintf(`{"id":%d,"name":null,"amount":null,"at":null,"doc":null}`, id)
	}
	seq := fmt.Sprintf(`[\"%d\",\"%d\"]`, commit, lsn)
	if op == "r" {
		seq = fmt.Sprintf(`[null,\"%d\"]`, lsn)
	}
	value := fmt.Sprintf(`{"schema":{"type":"struct","name":"dbz.public.items.Envelope","fields":[
{"type":"struct","optional":true,"name":"dbz.public.items.Value","field":"before","fields":[%[1]s]},
{"type":"struct","optional":true,"name":"dbz.public.items.Value","field":"after","fields":[%[1]s]},
{"type":"struct","optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source","fields":[
 {"type":"string","field":"db"},{"type":"string","field":"schema"},{"type":"string","field":"table"},{"type":"int64","optional":true,"field":"lsn"},
 {"type":"string","optional":true,"field":"sequence"},{"type":"int64","optional":true,"field":"ts_ms"}]},
{"type":"string","optional":false,"field":"op"}]},
"payload":{"before":%[2]s,"after":%[3]s,"source":{"db":"src","schema":"public","table":"items","lsn":%[4]d,"sequence":"%[6]s","ts_ms":%[7]d},"op":"%[5]s"}}`,
		itemFieldsV1, before, after, lsn, op, seq, ts)
	key := fmt.Sprintf(`{"schema":{"type":"struct","name":"dbz.public.items.Key","fields":[{"type":"int64","optional":false,"field":"id"}]},"payload":{"id":%d}}`, id)
	return testbed.Msg{Key: []byte(key), Value: []byte(value)}
}

// writeTx returns a function that writes a batch with p in a transaction of its own and
// commits it, or rolls it back when Write fails, as the engine does.
func writeTx(t *testing.T, db *pgxpool.Pool, p *cdc.CDC) func(sink.Batch) error {
	return func(b sink.Batch) error {
		ctx := context.Background()
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if err := p.Write(ctx, tx, b); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
}

// TestCDCResnapshotContradictsReplica: a partition streamed changes of a key, then the
// source is snapshotted again (reads later than every commit the partition saw). A read
// equal to the replica's row is skipped silently, as before; a read that differs from it,
// or holds a key the replica deleted, while the key's applied change is older than the
// snapshot, stops the partition with source_rewound and names the key: a snapshot of the
// same history would equal the replica (a promoted standby that lagged and whose WAL has
// since passed the old primary's, which the partition's mark cannot see). A read sent again
// by a replay (as old as the mark) is never checked. On the old code every case wrote
// nothing and returned nil: the differing reads were refused silently.
func TestCDCResnapshotContradictsReplica(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	const before, later = 1_700_000_000_000, 1_700_000_600_000 // source.ts_ms: streamed, re-snapshot
	streamed := []testbed.Msg{
		sourcedChange("r", 1, 0, 90, before-5000, "one"), sourcedChange("r", 2, 0, 90, before-5000, "two"),
		sourcedChange("u", 1, 100, 110, before, "one streamed"), sourcedChange("u", 2, 120, 130, before, "two streamed"),
		sourcedChange("d", 2, 140, 150, before, ""),
	}
	for _, c := range []struct {
		name    string
		then    testbed.Msg
		rewound bool
	}{
		{"a new snapshot read equal to the replica", sourcedChange("r", 1, 0, 5000, later, "one streamed"), false},
		{"a new snapshot read that differs, past every position", sourcedChange("r", 1, 0, 5000, later, "new timeline"), true},
		{"a new snapshot read of a key the replica deleted", sourcedChange("r", 2, 0, 5000, later, "two again"), true},
		{"a replayed snapshot read (as old as the mark)", sourcedChange("r", 1, 0, 90, before-5000, "one"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			replica, positions, table := itemsReplica(t, e, db)
			p := newPlugin(t, e, replica, positions, cdc.Config{})
			write := writeTx(t, db, p)
			if err := write(records(0, streamed...)); err != nil {
				t.Fatal(err)
			}
			b := records(0, c.then)
			b.Records[0].Offset = int64(len(streamed))
			err := write(b)
			var re *cdc.RewoundError
			switch {
			case !c.rewound && err != nil:
				t.Fatalf("Write: %v; want it applied (skipped) silently", err)
			case c.rewound && (!errors.As(err, &re) || !errors.Is(err, sink.ErrSourceRewound) || re.Key == ""):
				t.Fatalf("Write: %v; want a *cdc.RewoundError naming the key", err)
			case c.rewound:
				t.Logf("stopped as wanted: %v", err)
			}
			var got string
			if err := db.QueryRow(ctx, "SELECT coalesce(string_agg(id || ' ' || name, ', ' ORDER BY id), '') FROM "+table).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != "1 one streamed" {
				t.Fatalf("the replica holds %q, want %q", got, "1 one streamed")
			}
		})
	}
}

// TestCDCRewoundStreamedChangeRefusesTheBatch: a batch of streamed changes only (no
// snapshot read) whose last change is older than the partition's mark yet committed later
// (a source rewound by a failover): the batch's marks travel in the merge's round trip, so
// the merge runs before the mark is read back; Write must still return the *RewoundError,
// and the transaction, rolled back as the engine does, leaves the replica as it was.
func TestCDCRewoundStreamedChangeRefusesTheBatch(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	const before, later = 1_700_000_000_000, 1_700_000_600_000
	replica, positions, table := itemsReplica(t, e, db)
	p := newPlugin(t, e, replica, positions, cdc.Config{})
	write := writeTx(t, db, p)
	first := []testbed.Msg{sourcedChange("c", 1, 100, 110, before, "one"), sourcedChange("c", 2, 120, 130, before, "two")}
	if err := write(records(0, first...)); err != nil {
		t.Fatal(err)
	}
	replica1 := func() string {
		var got string
		if err := db.QueryRow(ctx, "SELECT coalesce(string_agg(id || ' ' || name, ', ' ORDER BY id), '') FROM "+table).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := replica1()
	if want != "1 one, 2 two" {
		t.Fatalf("after the first batch the replica holds %q", want)
	}
	// A change past the mark, then one at an older position committed ten minutes later.
	b := records(0, sourcedChange("u", 1, 200, 210, before+1000, "one later"), sourcedChange("u", 2, 50, 60, later, "two rewound"),
		sourcedChange("c", 3, 60, 70, later, "three rewound"))
	for i := range b.Records {
		b.Records[i].Offset = int64(len(first) + i)
	}
	err := write(b)
	var re *cdc.RewoundError
	if !errors.As(err, &re) || !errors.Is(err, sink.ErrSourceRewound) || re.Offset != int64(len(first)+1) {
		t.Fatalf("Write: %v; want a *cdc.RewoundError at offset %d", err, len(first)+1)
	}
	if got := replica1(); got != want {
		t.Fatalf("after the refused batch the replica holds %q, want %q", got, want)
	}
	// The same batch without the rewound changes applies.
	b.Records = b.Records[:1]
	if err := write(b); err != nil {
		t.Fatal(err)
	}
	if got := replica1(); got != "1 one later, 2 two" {
		t.Fatalf("the replica holds %q, want %q", got, "1 one later, 2 two")
	}
}
