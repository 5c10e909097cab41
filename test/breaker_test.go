package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/table"
)

// breakerPipeline makes a one-partition pipeline writing to a table whose amount is NOT
// NULL, produces n records of which those with poison(i) lack the amount, and starts a
// dead-letter sink with a breaker of 20% over 100 records, in batches of 10.
func breakerPipeline(t *testing.T, n int, poison func(i int) bool) (*pipeline, *running) {
	p := newPipeline(t, 1)
	cfg := breakerConfig(t, p)
	produceAmounts(t, p, 0, n, poison)
	return p, startSink(t, cfg)
}

// breakerConfig creates the amounts table of p and returns the dead-letter sink's config
// with a breaker of 20% over 100 records, in batches of 10.
func breakerConfig(t *testing.T, p *pipeline) sink.Config {
	db := testbed.Pool(t, p.Env)
	if _, err := db.Exec(context.Background(), "CREATE TABLE "+pgx.Identifier{p.Schema, "amounts"}.Sanitize()+` (id bigint NOT NULL, amount integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	pl, err := table.New(table.Config{Table: p.Schema + ".amounts", Columns: map[string]table.Column{
		"id": {From: "value.id", Required: true}, "amount": {From: "value.amount"}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := pluginConfig(t, p, pl, sink.DeadLetter)
	cfg.MaxBatchRecords, cfg.DeadLetterWindow, cfg.MaxDeadLetterRatio = 10, 100, 0.2
	return cfg
}

// produceAmounts produces the records with ids from .. from+n-1 to partition 0; those with
// poison(id) lack the amount.
func produceAmounts(t *testing.T, p *pipeline, from, n int, poison func(i int) bool) {
	var msgs []testbed.Msg
	for i := from; i < from+n; i++ {
		v := fmt.Sprintf(`{"id": %d, "amount": %d}`, i, i)
		if poison(i) {
			v = fmt.Sprintf(`{"id": %d}`, i) // a schema drift: amount is NOT NULL
		}
		msgs = append(msgs, testbed.Msg{Partition: 0, Value: []byte(v)})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
}

func (p *pipeline) deadLetterCount(t *testing.T) int {
	t.Helper()
	var n int
	if err := connect(t, p).QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDeadLetterBreakerStopsAPoisonedStream: when every record violates NOT NULL, the
// partition stops with ErrTooManyDeadLetters (wrapping the 23502) once the window holds the
// allowed 20 dead letters; the batch that tripped it is rolled back, nothing is applied, and
// no more than 20 records are dead-lettered.
func TestDeadLetterBreakerStopsAPoisonedStream(t *testing.T) {
	t.Parallel()
	p, r := breakerPipeline(t, 300, func(int) bool { return true })
	testbed.Eventually(t, 60*time.Second, "the partition to stop", func() (bool, string) {
		return len(r.s.PartitionErrors()) == 1, fmt.Sprint(r.s.PartitionErrors())
	})
	err := r.s.PartitionErrors()[0]
	var tm *sink.TooManyDeadLettersError
	var pe *pgconn.PgError
	if !errors.Is(err, sink.ErrTooManyDeadLetters) || !errors.As(err, &tm) || !errors.As(err, &pe) || pe.Code != "23502" {
		t.Fatalf("partition error %v: want a *TooManyDeadLettersError wrapping the NOT NULL violation (23502)", err)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	n := p.deadLetterCount(t)
	next, _ := p.storedOrZero(t, 0)
	if n == 0 || n > 20 || next != int64(n) || tm.FirstOffset != next {
		t.Fatalf("%d dead letters, stored next offset %d, refused batch at %d: want 1..20 dead letters, each record below the stored offset dead-lettered, and the refused batch at the stored offset", n, next, tm.FirstOffset)
	}
	if rows := strs(t, testbed.Pool(t, p.Env), "SELECT id::text FROM "+pgx.Identifier{p.Schema, "amounts"}.Sanitize()); len(rows) != 0 {
		t.Fatalf("%d rows applied from a stream of poison", len(rows))
	}
}

// TestDeadLetterBreakerLetsSparsePoisonThrough: one record in seven is poison, under the
// same breaker: the stream is applied to its end, each poison record dead-lettered once.
func TestDeadLetterBreakerLetsSparsePoisonThrough(t *testing.T) {
	t.Parallel()
	poison := func(i int) bool { return i%7 == 3 }
	p, r := breakerPipeline(t, 300, poison)
	testbed.Eventually(t, 60*time.Second, "the partition to reach its log end", func() (bool, string) {
		n, _ := p.storedOrZero(t, 0)
		return n == 300, fmt.Sprintf("%d/300 %v", n, r.s.PartitionErrors())
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	want := 0
	for i := range 300 {
		if poison(i) {
			want++
		}
	}
	if n := p.deadLetterCount(t); n != want || len(r.s.PartitionErrors()) != 0 {
		t.Fatalf("%d dead letters (want %d), partition errors %v", n, want, r.s.PartitionErrors())
	}
	if rows := strs(t, testbed.Pool(t, p.Env), "SELECT id::text FROM "+pgx.Identifier{p.Schema, "amounts"}.Sanitize()); len(rows) != 300-want {
		t.Fatalf("%d rows applied, want %d", len(rows), 300-want)
	}
}

// TestDeadLetterBreakerRemembersAcrossRestarts: 15 records are dead-lettered (under the limit
// of 20 in 100) and the sink stops; 15 more poison records follow and a new sink claims the
// partition. Its breaker counts the 15 already in the dead_letters table among the last 100
// offsets, so the batch 15..24 (25 dead letters) trips it: the partition stops at 15 with
// 15 dead letters. A window kept only in memory started empty and let all 30 through.
func TestDeadLetterBreakerRemembersAcrossRestarts(t *testing.T) {
	t.Parallel()
	all := func(int) bool { return true }
	p := newPipeline(t, 1)
	cfg := breakerConfig(t, p)
	db := testbed.Pool(t, p.Env) // one pool for the polls (a connection per poll runs out)
	state := func() (next int64, dead int) {
		_ = db.QueryRow(context.Background(), `SELECT coalesce((SELECT next_offset FROM `+p.offsetsTable()+
			` WHERE pipeline = $1 AND topic = $2 AND partition = 0), 0), (SELECT count(*) FROM `+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize()+`)`,
			p.Group, p.Topic).Scan(&next, &dead)
		return next, dead
	}
	produceAmounts(t, p, 0, 15, all)
	r := startSink(t, cfg)
	testbed.Eventually(t, 60*time.Second, "the first 15 records dead-lettered", func() (bool, string) {
		n, _ := state()
		return n == 15, fmt.Sprintf("stored %d/15 %v", n, r.s.PartitionErrors())
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := p.deadLetterCount(t); n != 15 || len(r.s.PartitionErrors()) != 0 {
		t.Fatalf("first run: %d dead letters (want 15), partition errors %v", n, r.s.PartitionErrors())
	}

	produceAmounts(t, p, 15, 15, all)
	r = startSink(t, cfg)
	testbed.Eventually(t, 60*time.Second, "the restarted sink's breaker to trip", func() (bool, string) {
		n, dead := state()
		if n == 30 && len(r.s.PartitionErrors()) == 0 {
			t.Fatalf("the restarted sink never tripped: all 30 records dead-lettered (%d dead letters, stored next %d): its window started empty", dead, n)
		}
		return len(r.s.PartitionErrors()) == 1, fmt.Sprintf("stored %d, %d dead letters, errors %v", n, dead, r.s.PartitionErrors())
	})
	var tm *sink.TooManyDeadLettersError
	if err := r.s.PartitionErrors()[0]; !errors.As(err, &tm) {
		t.Fatalf("partition error %v: want a *TooManyDeadLettersError", err)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	next, _ := p.storedOrZero(t, 0)
	if n := p.deadLetterCount(t); n != 15 || next != 15 || tm.FirstOffset != 15 || tm.DeadLetters != 25 {
		t.Fatalf("after the restart: %d dead letters, stored next %d, refused batch at %d with %d dead letters in the window: want 15, 15, 15, 25",
			n, next, tm.FirstOffset, tm.DeadLetters)
	}
}
