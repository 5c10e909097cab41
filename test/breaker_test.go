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
	db := testbed.Pool(t, p.Env)
	if _, err := db.Exec(context.Background(), "CREATE TABLE "+pgx.Identifier{p.Schema, "amounts"}.Sanitize()+` (id bigint NOT NULL, amount integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	pl, err := table.New(table.Config{Table: p.Schema + ".amounts", Columns: map[string]table.Column{
		"id": {From: "value.id", Required: true}, "amount": {From: "value.amount"}}})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []testbed.Msg
	for i := range n {
		v := fmt.Sprintf(`{"id": %d, "amount": %d}`, i, i)
		if poison(i) {
			v = fmt.Sprintf(`{"id": %d}`, i) // a schema drift: amount is NOT NULL
		}
		msgs = append(msgs, testbed.Msg{Partition: 0, Value: []byte(v)})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	cfg := pluginConfig(t, p, pl, sink.DeadLetter)
	cfg.MaxBatchRecords, cfg.DeadLetterWindow, cfg.MaxDeadLetterRatio = 10, 100, 0.2
	return p, startSink(t, cfg)
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
