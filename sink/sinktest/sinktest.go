// Package sinktest is the conformance suite for sink plugins. Every plugin, built-in or not,
// runs it against a real PostgreSQL server:
//
//	func TestConformance(t *testing.T) {
//		sinktest.Run(t, sinktest.Harness{
//			New:    func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin { ... },
//			Record: func(i int) sink.Record { ... },  // the i-th valid record
//			Poison: func(i int) sink.Record { ... },  // a record the plugin must refuse
//			State:  func(ctx context.Context, db sink.DB, schema string) ([]string, error) { ... },
//			Expect: func(r sink.Record) string { ... }, // r's entry in State
//		})
//	}
//
// The server comes from DATABASE_URL; without it the suite fails (it never skips). Each run
// uses schemas of its own, so suites run in parallel.
//
// What it checks, through the write step the sink runs for every batch:
//   - an empty batch writes nothing;
//   - a committed batch has exactly its records' effects;
//   - a rolled-back batch leaves nothing, and delivering it again (as the engine does after a
//     transient error or an unknown commit outcome) has its effects once;
//   - a batch written in parts within one transaction, as poison isolation does, equals it
//     written whole;
//   - poison records (first, middle, last of a batch) are refused as poison, and isolation
//     dead-letters exactly them while the rest commits once;
//   - a large batch (10,000 records);
//   - the lifecycle: Open, Write and Close for two partitions concurrently, then a revoke and
//     a new Open of the same partition.
package sinktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/sink"
)

// Harness describes the plugin under test.
type Harness struct {
	// New returns a new plugin writing into schema, which exists and holds the framework's
	// tables (dead_letters). New creates what the plugin needs there (its tables, or its
	// migrations through sink.MigratePlugin). Required.
	New func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin
	// Record returns the i-th valid record; different i must have different effects. The
	// suite sets Topic, Partition and Offset. Required.
	Record func(i int) sink.Record
	// Poison returns a record the plugin must refuse with a poison error (sink.IsPoison):
	// undecodable, missing a required field, or breaking a constraint. Required.
	Poison func(i int) sink.Record
	// State returns the plugin's effects in schema, one string per effect, in any order.
	// Required.
	State func(ctx context.Context, db sink.DB, schema string) ([]string, error)
	// Expect returns the entry State shows for a committed record. Required.
	Expect func(r sink.Record) string
}

const topic = "sinktest"

// Run runs the suite as subtests of t.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Record == nil || h.Poison == nil || h.State == nil || h.Expect == nil {
		t.Fatal("sinktest: Harness needs New, Record, Poison, State and Expect")
	}
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("sinktest: DATABASE_URL is not set; the conformance suite needs a real PostgreSQL server")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("sinktest: %v", err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("sinktest: cannot reach PostgreSQL from DATABASE_URL: %v", err)
	}
	s := &suite{h: h, pool: pool, url: url}
	t.Run("EmptyBatch", s.emptyBatch)
	t.Run("CommitHasEffectsOnce", s.commitOnce)
	t.Run("RollbackLeavesNothingAndRedeliveryAppliesOnce", s.rollbackThenRedeliver)
	t.Run("PartsEqualWhole", s.partsEqualWhole)
	t.Run("PoisonIsolated", s.poison)
	t.Run("LargeBatch", s.large)
	t.Run("Lifecycle", s.lifecycle)
}

type suite struct {
	h    Harness
	pool *pgxpool.Pool
	url  string
}

// env is one subtest's schema and plugin.
type env struct {
	t      *testing.T
	s      *suite
	schema string
	p      sink.Plugin
}

func (s *suite) setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	schema := fmt.Sprintf("sinktest_%d_%s", time.Now().UnixNano()%1_000_000_000, strings.ToLower(t.Name()[strings.LastIndex(t.Name(), "/")+1:]))
	if len(schema) > 63 {
		schema = schema[:63]
	}
	if err := sink.Migrate(ctx, s.url, schema); err != nil {
		t.Fatalf("sinktest: migrate framework tables: %v", err)
	}
	t.Cleanup(func() {
		_, _ = s.pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	p := s.h.New(t, s.pool, schema)
	if p == nil {
		t.Fatal("sinktest: New returned a nil plugin")
	}
	if pr, ok := p.(sink.Preparer); ok {
		if err := pr.Prepare(ctx, s.pool); err != nil {
			t.Fatalf("sinktest: Prepare: %v", err)
		}
	}
	return &env{t: t, s: s, schema: schema, p: p}
}

// records returns records for offsets [from, from+n) of partition, using Record(i) for i == offset,
// or Poison(i) where poison(offset) is true.
func (e *env) records(partition int32, from, n int, poison func(int) bool) []sink.Record {
	rs := make([]sink.Record, n)
	for k := range n {
		i := from + k
		var r sink.Record
		if poison != nil && poison(i) {
			r = e.s.h.Poison(i)
		} else {
			r = e.s.h.Record(i)
		}
		r.Topic, r.Partition, r.Offset = topic, partition, int64(i)
		if r.Timestamp.IsZero() {
			r.Timestamp = time.Unix(1_700_000_000+int64(i), 0).UTC()
		}
		rs[k] = r
	}
	return rs
}

func (e *env) open(partition int32, epoch int64) {
	e.t.Helper()
	if err := e.p.Open(context.Background(), sink.Partition{Topic: topic, Partition: partition, Epoch: epoch}); err != nil {
		e.t.Fatalf("Open(%d): %v", partition, err)
	}
}

func (e *env) close(partition int32) {
	e.t.Helper()
	if err := e.p.Close(context.Background(), sink.Partition{Topic: topic, Partition: partition}); err != nil {
		e.t.Fatalf("Close(%d): %v", partition, err)
	}
}

// write runs one transaction: WriteBatch for each part, then COMMIT (or ROLLBACK).
func (e *env) write(commit, isolate bool, parts ...[]sink.Record) (engine.WriteResult, error) {
	ctx := context.Background()
	tx, err := e.s.pool.Begin(ctx)
	if err != nil {
		e.t.Fatalf("begin: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var total engine.WriteResult
	for _, part := range parts {
		b := sink.Batch{Topic: topic, Records: part}
		if len(part) > 0 {
			b.Partition = part[0].Partition
		}
		res, err := engine.WriteBatch(ctx, tx, e.p, b, engine.WriteOptions{Isolate: isolate, Schema: e.schema, Pipeline: "sinktest"})
		if err != nil {
			return total, err
		}
		total.Applied += res.Applied
		total.DeadLettered = append(total.DeadLettered, res.DeadLettered...)
	}
	if commit {
		if err := tx.Commit(ctx); err != nil {
			e.t.Fatalf("commit: %v", err)
		}
	}
	return total, nil
}

func (e *env) mustWrite(commit bool, parts ...[]sink.Record) {
	e.t.Helper()
	if _, err := e.write(commit, false, parts...); err != nil {
		e.t.Fatalf("Write: %v", err)
	}
}

// checkState compares State with the effects of want, as multisets.
func (e *env) checkState(want []sink.Record) {
	e.t.Helper()
	got, err := e.s.h.State(context.Background(), e.s.pool, e.schema)
	if err != nil {
		e.t.Fatalf("State: %v", err)
	}
	exp := make([]string, len(want))
	for i := range want {
		exp[i] = e.s.h.Expect(want[i])
	}
	slices.Sort(got)
	slices.Sort(exp)
	if !slices.Equal(got, exp) {
		e.t.Fatalf("state differs from the records' effects:\n%s", diff(got, exp))
	}
}

func diff(got, want []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "got %d effects, want %d\n", len(got), len(want))
	g := map[string]int{}
	for _, s := range got {
		g[s]++
	}
	for _, s := range want {
		g[s]--
	}
	n := 0
	for s, c := range g {
		if c != 0 && n < 10 {
			fmt.Fprintf(&b, "  %+d  %s\n", c, s)
			n++
		}
	}
	return b.String()
}

func (s *suite) emptyBatch(t *testing.T) {
	e := s.setup(t)
	e.open(0, 1)
	defer e.close(0)
	e.mustWrite(true, nil)
	e.checkState(nil)
}

func (s *suite) commitOnce(t *testing.T) {
	e := s.setup(t)
	e.open(0, 1)
	defer e.close(0)
	rs := e.records(0, 0, 20, nil)
	e.mustWrite(true, rs)
	e.checkState(rs)
	more := e.records(0, 20, 5, nil)
	e.mustWrite(true, more)
	e.checkState(append(rs, more...))
}

func (s *suite) rollbackThenRedeliver(t *testing.T) {
	e := s.setup(t)
	e.open(0, 1)
	defer e.close(0)
	rs := e.records(0, 0, 50, nil)
	e.mustWrite(false, rs) // rolled back: a failed or unknown commit
	e.checkState(nil)
	e.mustWrite(false, rs)
	e.mustWrite(true, rs) // the delivery that commits
	e.checkState(rs)
}

func (s *suite) partsEqualWhole(t *testing.T) {
	e := s.setup(t)
	e.open(0, 1)
	defer e.close(0)
	rs := e.records(0, 0, 30, nil)
	e.mustWrite(true, rs[:1], rs[1:10], rs[10:11], rs[11:])
	e.checkState(rs)
	// Isolation of a clean batch writes it in one savepoint and applies all.
	rs2 := e.records(0, 30, 30, nil)
	res, err := e.write(true, true, rs2)
	if err != nil {
		t.Fatalf("WriteBatch with isolation: %v", err)
	}
	if res.Applied != len(rs2) || len(res.DeadLettered) != 0 {
		t.Fatalf("isolated clean batch: applied %d, dead-lettered %d; want %d, 0", res.Applied, len(res.DeadLettered), len(rs2))
	}
	e.checkState(append(rs, rs2...))
}

func (s *suite) poison(t *testing.T) {
	e := s.setup(t)
	e.open(0, 1)
	defer e.close(0)
	const n = 40
	isPoison := func(i int) bool { return i == 0 || i == 17 || i == 18 || i == n-1 }
	rs := e.records(0, 0, n, isPoison)

	// Without isolation the batch fails as poison and leaves nothing.
	_, err := e.write(true, false, rs)
	if err == nil || !sink.IsPoison(err) {
		t.Fatalf("Write of a batch with poison records: got %v, want a poison error (sink.IsPoison)", err)
	}
	e.checkState(nil)

	// With isolation the poison records are dead-lettered and the rest applied once.
	res, err := e.write(true, true, rs)
	if err != nil {
		t.Fatalf("WriteBatch with isolation: %v", err)
	}
	var good []sink.Record
	var wantDead []int64
	for _, r := range rs {
		if isPoison(int(r.Offset)) {
			wantDead = append(wantDead, r.Offset)
		} else {
			good = append(good, r)
		}
	}
	var gotDead []int64
	for _, d := range res.DeadLettered {
		gotDead = append(gotDead, d.Record.Offset)
		if !sink.IsPoison(d.Err) {
			t.Errorf("dead letter %d: error %v is not a poison error", d.Record.Offset, d.Err)
		}
	}
	if !slices.Equal(gotDead, wantDead) || res.Applied != len(good) {
		t.Fatalf("isolation: dead-lettered %v, applied %d; want %v, %d", gotDead, res.Applied, wantDead, len(good))
	}
	e.checkState(good)
	var stored []int64
	rows, err := s.pool.Query(context.Background(), fmt.Sprintf(`SELECT "offset" FROM %s ORDER BY "offset"`, pgx.Identifier{e.schema, "dead_letters"}.Sanitize()))
	if err == nil {
		stored, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		t.Fatalf("read dead letters: %v", err)
	}
	if !slices.Equal(stored, wantDead) {
		t.Fatalf("dead_letters holds offsets %v, want %v", stored, wantDead)
	}
}

func (s *suite) large(t *testing.T) {
	e := s.setup(t)
	e.open(0, 1)
	defer e.close(0)
	rs := e.records(0, 0, 10_000, nil)
	e.mustWrite(true, rs)
	e.checkState(rs)
}

func (s *suite) lifecycle(t *testing.T) {
	e := s.setup(t)
	e.open(0, 1)
	e.open(1, 1)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	batches := [][]sink.Record{e.records(0, 0, 200, nil), e.records(1, 1000, 200, nil)}
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 200; k += 50 {
				if _, err := e.write(true, false, batches[p][k:k+50]); err != nil {
					errs[p] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent writes to two partitions: %v", err)
	}
	// Revoke partition 0 and assign it again with a new epoch.
	e.close(0)
	e.open(0, 2)
	again := e.records(0, 200, 10, nil)
	e.mustWrite(true, again)
	e.close(0)
	e.close(1)
	e.checkState(slices.Concat(batches[0], batches[1], again))
}
