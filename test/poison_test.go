package test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/table"
)

// poisonStream produces n records per partition over 3 partitions; every 7th is poison, of
// the kinds the exactly-once contract names: bad JSON, a NOT NULL violation, an oversize
// value (an index row too large, SQLSTATE 54000), a NUL byte, a tombstone. It returns the
// keys of the good and the poison records.
func poisonStream(t *testing.T, e testbed.Env, topic string, n int) (good, bad []string) {
	big := make([]byte, 9000)
	_, _ = rand.Read(big)
	oversize := base64.StdEncoding.EncodeToString(big) // incompressible: past the btree limit
	var msgs []testbed.Msg
	for p := range int32(3) {
		for i := range n {
			key := fmt.Sprintf("p%d-%d", p, i)
			val := fmt.Sprintf(`{"id": %d, "amount": %d, "note": "n%d"}`, int(p)*100000+i, i, i)
			if i%7 == 3 {
				switch kind := (i / 7) % 5; kind {
				case 0:
					val = `{"id": 1, "amount": `
				case 1:
					val = fmt.Sprintf(`{"id": %d, "note": "no amount"}`, i)
				case 2:
					val = fmt.Sprintf(`{"id": %d, "amount": 1, "note": %q}`, i, oversize)
				case 3:
					val = fmt.Sprintf(`{"id": %d, "amount": 1, "note": "nul \u0000 byte"}`, i)
				case 4:
					val = ""
				}
				key = "poison-" + key
				bad = append(bad, key)
			} else {
				good = append(good, key)
			}
			m := testbed.Msg{Partition: p, Key: []byte(key), Value: []byte(val)}
			if val == "" {
				m.Value = nil
			}
			msgs = append(msgs, m)
		}
	}
	testbed.Produce(t, e, topic, msgs)
	return good, bad
}

func poisonTable(t *testing.T, p *pipeline) *table.Table {
	db := testbed.Pool(t, p.Env)
	tbl := pgx.Identifier{p.Schema, "events"}.Sanitize()
	if _, err := db.Exec(context.Background(), "CREATE TABLE "+tbl+` (k text NOT NULL, id bigint NOT NULL, amount integer NOT NULL, note text)`+
		`; CREATE INDEX ON `+tbl+` (note)`); err != nil {
		t.Fatal(err)
	}
	pl, err := table.New(table.Config{Table: p.Schema + ".events", Columns: map[string]table.Column{
		"k": {From: "key"}, "id": {From: "value.id", Required: true}, "amount": {From: "value.amount"}, "note": {From: "value.note"}}})
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func pluginConfig(t *testing.T, p *pipeline, pl sink.Plugin, policy sink.PoisonPolicy) sink.Config {
	return sink.Config{
		Brokers: p.Env.Brokers, GroupID: p.Group, Topics: []string{p.Topic},
		DatabaseURL: p.Env.DatabaseURL, Schema: p.OffsetsSchema, Plugin: pl, OnPoison: policy,
		Kafka:           kafka.ConfigMap{"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
		MaxBatchRecords: 40,
		Logger:          slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
}

func strs(t *testing.T, db sink.DB, sql string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	slices.Sort(out)
	return out
}

// TestPoisonRecordsAreDeadLettered: with the dead-letter policy, each poison record is
// dead-lettered once, in the same transaction as the rest of its batch, every good record is
// applied once, and the stored offsets reach the log end.
func TestPoisonRecordsAreDeadLettered(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 3)
	good, bad := poisonStream(t, p.Env, p.Topic, 200)
	r := startSink(t, pluginConfig(t, p, poisonTable(t, p), sink.DeadLetter))
	ends := p.logEnds(t)
	testbed.Eventually(t, 90*time.Second, "every partition to reach its log end", func() (bool, string) {
		var st []string
		done := true
		for part, end := range ends {
			n, _ := p.storedOrZero(t, part)
			done = done && n == end
			st = append(st, fmt.Sprintf("p%d %d/%d", part, n, end))
		}
		return done, strings.Join(st, " ")
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	db := testbed.Pool(t, p.Env)
	gotGood := strs(t, db, "SELECT k FROM "+pgx.Identifier{p.Schema, "events"}.Sanitize())
	gotBad := strs(t, db, "SELECT convert_from(key, 'UTF8') FROM "+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize())
	slices.Sort(good)
	slices.Sort(bad)
	if !slices.Equal(gotGood, good) {
		t.Errorf("applied %d records, want the %d good ones exactly once", len(gotGood), len(good))
	}
	if !slices.Equal(gotBad, bad) {
		t.Errorf("dead-lettered %d records, want the %d poison ones exactly once: %v", len(gotBad), len(bad), gotBad)
	}
	if st := r.s.Stats(); st.DeadLetters != int64(len(bad)) || st.Records != int64(len(good)) {
		t.Errorf("stats: %d applied, %d dead letters; want %d, %d", st.Records, st.DeadLetters, len(good), len(bad))
	}
	// Every kind is there, with its reason.
	reasons := strings.Join(strs(t, db, "SELECT error FROM "+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize()), "\n")
	for _, want := range []string{"value is not JSON", "23502", "54000", "NUL", "tombstone"} {
		if !strings.Contains(reasons, want) {
			t.Errorf("no dead letter with %q among the reasons", want)
		}
	}
}

// TestPoisonStopsPartitionByDefault: with the stop policy a poison record stops its
// partition before it: nothing at or after it is applied, and the partition error says why.
func TestPoisonStopsPartitionByDefault(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 3)
	poisonStream(t, p.Env, p.Topic, 20) // the first poison record of each partition is offset 3
	r := startSink(t, pluginConfig(t, p, poisonTable(t, p), sink.StopOnPoison))
	testbed.Eventually(t, 60*time.Second, "all three partitions to stop", func() (bool, string) {
		return len(r.s.PartitionErrors()) == 3, fmt.Sprint(r.s.PartitionErrors())
	})
	for _, err := range r.s.PartitionErrors() {
		var he *sink.HandlerError
		if !errors.As(err, &he) || !errors.Is(err, sink.ErrPoison) {
			t.Errorf("partition error %v: want a *HandlerError wrapping ErrPoison", err)
		}
	}
	for part := range int32(3) {
		if n, _ := p.storedOrZero(t, part); n > 3 {
			t.Errorf("partition %d stored next offset %d: moved past the poison record at 3", part, n)
		}
	}
	db := testbed.Pool(t, p.Env)
	if n := len(strs(t, db, "SELECT k FROM "+pgx.Identifier{p.Schema, "events"}.Sanitize()+" WHERE k LIKE 'poison%'")); n != 0 {
		t.Errorf("%d poison rows applied", n)
	}
	if n := len(strs(t, db, "SELECT key::text FROM "+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize())); n != 0 {
		t.Errorf("%d dead letters written under the stop policy", n)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestDeferredConstraintViolationIsDeadLettered: a deferred unique constraint fails only at
// COMMIT; with the dead-letter policy the batch is isolated with immediate checks, so the
// duplicates are dead-lettered and the rest applied once.
func TestDeferredConstraintViolationIsDeadLettered(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	db := testbed.Pool(t, p.Env)
	tbl := pgx.Identifier{p.Schema, "codes"}.Sanitize()
	if _, err := db.Exec(context.Background(), "CREATE TABLE "+tbl+` (code text NOT NULL, CONSTRAINT code_unique UNIQUE (code) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	pl, err := table.New(table.Config{Table: p.Schema + ".codes", Columns: map[string]table.Column{"code": {From: "value.code", Required: true}}})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []testbed.Msg
	for i := range 100 {
		code := fmt.Sprintf("c%d", i)
		if i%25 == 24 {
			code = "c0" // a duplicate of the first: only COMMIT sees it
		}
		msgs = append(msgs, testbed.Msg{Partition: 0, Value: []byte(fmt.Sprintf(`{"code": %q}`, code))})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	r := startSink(t, pluginConfig(t, p, pl, sink.DeadLetter))
	testbed.Eventually(t, 60*time.Second, "the partition to reach its log end", func() (bool, string) {
		n, _ := p.storedOrZero(t, 0)
		return n == 100, fmt.Sprintf("%d/100 %v", n, r.s.PartitionErrors())
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := len(strs(t, db, "SELECT code FROM "+tbl)); got != 96 {
		t.Errorf("%d rows, want the 96 distinct codes", got)
	}
	if got := strs(t, db, `SELECT "offset"::text FROM `+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize()); len(got) != 4 {
		t.Errorf("dead letters at %v, want the 4 duplicates", got)
	}
}
