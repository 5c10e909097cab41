package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/table"
)

// TestIsolationKeepsChildWithItsParent: a batch holds a child row before its parent (a
// foreign key in the same table) and one poison record (a NOT NULL violation). Isolating
// the poison must not dead-letter the child, which commits fine with the rest of the batch:
// with a DEFERRABLE INITIALLY DEFERRED key (checked at COMMIT), and with a plain key, which
// one COPY checks at its end, when halving puts the child and its parent in different parts.
func TestIsolationKeepsChildWithItsParent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, fk string }{
		{"deferred", "DEFERRABLE INITIALLY DEFERRED"},
		{"immediate", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPipeline(t, 1)
			ctx := context.Background()
			db := testbed.Pool(t, p.Env)
			tbl := pgx.Identifier{p.Schema, "nodes"}.Sanitize()
			if _, err := db.Exec(ctx, "CREATE TABLE "+tbl+` (id bigint PRIMARY KEY, parent bigint REFERENCES `+tbl+` (id) `+tc.fk+`, note text NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			pl, err := table.New(table.Config{Table: p.Schema + ".nodes", Columns: map[string]table.Column{
				"id": {From: "value.id", Required: true}, "parent": {From: "value.parent"}, "note": {From: "value.note"}}})
			if err != nil {
				t.Fatal(err)
			}
			// Halving the five records splits them into [x, child] and [parent, poison, y].
			vals := []string{
				`{"id": 10, "note": "x"}`,
				`{"id": 2, "parent": 1, "note": "child"}`,
				`{"id": 1, "note": "parent"}`,
				`{"id": 20}`, // poison: note is NOT NULL
				`{"id": 30, "note": "y"}`,
			}
			var msgs []testbed.Msg
			for _, v := range vals {
				msgs = append(msgs, testbed.Msg{Partition: 0, Value: []byte(v)})
			}
			testbed.Produce(t, p.Env, p.Topic, msgs)
			cfg := pluginConfig(t, p, pl, sink.DeadLetter)
			cfg.MaxBatchWait = 2 * time.Second // the five records in one batch
			r := startSink(t, cfg)
			testbed.Eventually(t, 60*time.Second, "the partition to reach its log end", func() (bool, string) {
				n, _ := p.storedOrZero(t, 0)
				return n == int64(len(vals)), fmt.Sprintf("%d/%d %v", n, len(vals), r.s.PartitionErrors())
			})
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if got := strs(t, db, `SELECT "offset"::text FROM `+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize()); len(got) != 1 || got[0] != "3" {
				t.Errorf("dead letters at offsets %v, want only the poison record at 3", got)
			}
			if got := strs(t, db, "SELECT id::text FROM "+tbl); fmt.Sprint(got) != "[1 10 2 30]" {
				t.Errorf("rows %v, want ids [1 10 2 30]: the child applied with its parent", got)
			}
			if st := r.s.Stats(); st.Records != 4 || st.DeadLetters != 1 {
				t.Errorf("stats: %d applied, %d dead letters; want 4, 1", st.Records, st.DeadLetters)
			}
		})
	}
}
