package test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/table"
)

// The values of redactStream's poison records that PostgreSQL's errors quote.
var redactValues = []string{"918273645", "-73519", "abc46"}

// redactStream produces, on one partition: a good record, its duplicate id (a unique
// violation, whose DETAIL names the id), a negative qty (a check violation, whose DETAIL
// shows the row) and a qty that is no integer (COPY's message quotes it), then a good record.
func redactStream(t *testing.T, p *pipeline) *table.Table {
	db := testbed.Pool(t, p.Env)
	tbl := pgx.Identifier{p.Schema, "events"}.Sanitize()
	if _, err := db.Exec(context.Background(), "CREATE TABLE "+tbl+
		` (id bigint PRIMARY KEY, qty integer NOT NULL CONSTRAINT qty_positive CHECK (qty > 0), note text)`); err != nil {
		t.Fatal(err)
	}
	pl, err := table.New(table.Config{Table: p.Schema + ".events", Columns: map[string]table.Column{
		"id": {From: "value.id"}, "qty": {From: "value.qty"}, "note": {From: "value.note"}}})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []testbed.Msg
	for _, v := range []string{
		`{"id": 918273645, "qty": 5, "note": "first"}`,
		`{"id": 918273645, "qty": 6, "note": "again"}`,
		`{"id": 2, "qty": -73519, "note": "negative"}`,
		`{"id": 3, "qty": "abc46", "note": "text"}`,
		`{"id": 4, "qty": 7, "note": "good"}`,
	} {
		msgs = append(msgs, testbed.Msg{Key: []byte("k"), Value: []byte(v)})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	return pl
}

// TestRedactErrorValues runs poison records violating a unique key and a check constraint,
// and one PostgreSQL cannot parse, through the dead-letter policy with
// Config.RedactErrorValues off and on, and through the stop policy with it on: off, the
// dead letters' errors and the log lines carry the values (DETAIL); on, neither they nor a
// stopped partition's stopped_error do, while the SQLSTATE, the constraint and table names
// and the record's offset stay.
func TestRedactErrorValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		redact bool
		policy sink.PoisonPolicy
	}{{"off", false, sink.DeadLetter}, {"on", true, sink.DeadLetter}, {"on-stop", true, sink.StopOnPoison}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPipeline(t, 1)
			pl := redactStream(t, p)
			logs := &syncBuffer{}
			cfg := pluginConfig(t, p, pl, tc.policy)
			cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), logs), nil))
			cfg.RedactErrorValues = tc.redact
			r := startSink(t, cfg)
			db := testbed.Pool(t, p.Env)
			offsets := pgx.Identifier{p.OffsetsSchema, "offsets"}.Sanitize()
			var texts []string // what the sink wrote: dead letters' errors or stopped_error
			if tc.policy == sink.DeadLetter {
				testbed.Eventually(t, 90*time.Second, "the partition to reach its log end", func() (bool, string) {
					n, _ := p.storedOrZero(t, 0)
					return n == 5, fmt.Sprintf("next offset %d", n)
				})
				texts = strs(t, db, `SELECT "offset" || ' ' || error FROM `+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize())
				if len(texts) != 3 {
					t.Fatalf("dead letters %q, want offsets 1, 2 and 3", texts)
				}
			} else {
				testbed.Eventually(t, 90*time.Second, "the partition's stop to be recorded", func() (bool, string) {
					texts = strs(t, db, "SELECT stopped_error FROM "+offsets+" WHERE stopped_error IS NOT NULL")
					return len(texts) == 1, fmt.Sprintf("%q", texts)
				})
				errs := r.s.PartitionErrors()
				if len(errs) != 1 {
					t.Fatalf("partition errors %v, want one", errs)
				}
				texts = append(texts, sink.ErrorText(errs[0], true))
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			all := strings.Join(texts, "\n")
			logged := logs.String()
			for _, v := range redactValues {
				if in, inLog := strings.Contains(all, v), strings.Contains(logged, v); in == tc.redact || inLog == tc.redact {
					t.Errorf("value %s: in the error texts %t, in the logs %t; want both %t (redact %t)\n%s", v, in, inLog, !tc.redact, tc.redact, all)
				}
			}
			// The stop policy stops at the batch's first poison record that PostgreSQL reports.
			want := []string{"(SQLSTATE 2", "table events", "values redacted", fmt.Sprintf("%s[0]@", p.Topic)}
			if tc.policy == sink.DeadLetter {
				want = []string{"SQLSTATE 23505", `violates unique constraint "events_pkey"`, fmt.Sprintf("%s[0]@1", p.Topic),
					"SQLSTATE 23514", `check constraint "qty_positive"`, fmt.Sprintf("%s[0]@2", p.Topic),
					"SQLSTATE 22P02", "column qty", fmt.Sprintf("%s[0]@3", p.Topic)}
				if tc.redact {
					want = append(want, "table events", "constraint events_pkey", "constraint qty_positive", "values redacted")
				} else {
					want = append(want, "DETAIL: Key (id)=(918273645) already exists.", "DETAIL: Failing row contains (2, -73519, negative).")
				}
			}
			for _, w := range want {
				if !strings.Contains(all, w) {
					t.Errorf("the error texts lack %q:\n%s", w, all)
				}
				if tc.policy == sink.DeadLetter && !strings.Contains(strings.ReplaceAll(logged, `\"`, `"`), w) {
					t.Errorf("the log lines lack %q", w)
				}
			}
		})
	}
}
