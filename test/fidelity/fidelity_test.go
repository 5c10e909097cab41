package fidelity

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// form is what one run covers.
type form struct {
	name        string
	variants    []variant
	types       []colType
	rows        int // rows per table before Debezium starts (its snapshot)
	steps       int // source transactions per streaming phase (three, then one during the replay)
	ops         int // changes per transaction, at most
	bigs        int // TOASTed values per TOAST table
	pkChangeBig bool
}

func chooseForm(t *testing.T) form {
	switch f := os.Getenv("FIDELITY"); f {
	case "full":
		return form{name: "full", variants: variants, types: types, rows: 12, steps: 120, ops: 4, bigs: 3, pkChangeBig: true}
	case "", "short":
		f := form{name: "short", rows: 8, steps: 40, ops: 3, bigs: 1}
		for _, v := range variants {
			if slices.Contains(shortVariants, v.name) {
				f.variants = append(f.variants, v)
			}
		}
		for _, s := range shortTypes {
			f.types = append(f.types, typeBySlug(s))
		}
		return f
	default:
		t.Fatalf("FIDELITY=%q: want full or short", f)
		return form{}
	}
}

// narrow keeps the variants and types named in FIDELITY_VARIANTS and FIDELITY_TYPES (comma
// separated names and slugs), when set: to rerun part of the matrix.
func narrow(f form) form {
	if s := os.Getenv("FIDELITY_VARIANTS"); s != "" {
		var vs []variant
		for _, v := range f.variants {
			if slices.Contains(strings.Split(s, ","), v.name) {
				vs = append(vs, v)
			}
		}
		f.variants = vs
	}
	if s := os.Getenv("FIDELITY_TYPES"); s != "" {
		f.types = nil
		for _, slug := range strings.Split(s, ",") {
			f.types = append(f.types, typeBySlug(slug))
		}
	}
	return f
}

// TestFidelity is the replica fidelity suite: for each converter variant, a randomized
// workload on a real source database (a table per type and replica identity), the real
// Debezium connector, `eosink run` with the cdc plugin into a replica made from the source's
// own DDL (pg_dump) and, with schemas, one made by create: true; the sinks are SIGKILLed
// twice mid-stream and replayed from the earliest offset at the end while the replica is
// polled for any row moving backwards; then every row of every table is compared. It prints
// a line per cell, per table counts and a total, and fails on any mismatch, unexpected
// refusal, stale expected-lossy entry or backwards move. FIDELITY=full (make fidelity) runs
// the whole matrix; the default is the short form (expect_test.go says which cells).
func TestFidelity(t *testing.T) {
	f := narrow(chooseForm(t))
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FIDELITY_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	fmt.Printf("fidelity: %s form, seed %d (FIDELITY_SEED), %d variants, %d types\n", f.name, seed, len(f.variants), len(f.types))
	var (
		mu  sync.Mutex
		all []cell
		bad int
		sem = make(chan struct{}, 2) // at most two connectors at once
	)
	t.Run("variants", func(t *testing.T) {
		for i, v := range f.variants {
			t.Run(strings.ReplaceAll(v.name, "/", "_"), func(t *testing.T) {
				t.Parallel()
				sem <- struct{}{}
				defer func() { <-sem }()
				cells, backs := runVariant(t, f, v, seed+uint64(i))
				mu.Lock()
				defer mu.Unlock()
				all = append(all, cells...)
				for _, b := range backs {
					t.Errorf("%s: replay moved a row backwards: %s", v.name, b)
				}
				for _, c := range cells {
					if !c.ok {
						bad++
						t.Errorf("cell: %s %s %s: %s", c.tb.typ.name, c.rp.label, c.tb.identity(), c.status)
					}
				}
			})
		}
	})
	if len(all) == 0 {
		t.Fatal("fidelity: no cell compared")
	}
	tables, srcRows, mism, lossyCells := 0, 0, 0, 0
	for _, c := range all {
		tables++
		srcRows += c.source
		if c.expectedL {
			lossyCells++
		} else {
			mism += len(c.differ)
		}
	}
	fmt.Printf("fidelity: %d tables, %d rows, %d mismatches (%d expected lossy cells not counted, %d cells not as expected)\n",
		tables, srcRows, mism, lossyCells, bad)
}

// runVariant runs one connector variant end to end and returns its cells and any backwards
// moves seen during the replay.
func runVariant(t *testing.T, f form, v variant, seed uint64) ([]cell, []string) {
	e := testbed.Require(t)
	registryURL := testbed.RequireRegistry(t)
	ctx := context.Background()
	tables := tablesOf(f.types)
	srcURL, _ := testbed.SourceDatabase(t, e, "fidsrc")
	src, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(context.Background()) })
	if _, err := src.Exec(ctx, sourceDDL(tables)); err != nil {
		t.Fatal(err)
	}
	w := newWorkload(src, seed, tables, f.bigs, f.pkChangeBig)
	if err := w.fill(ctx, f.rows); err != nil {
		t.Fatal(err)
	}
	steps := func(n int) {
		t.Helper()
		if err := w.touchBig(ctx); err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := w.step(ctx, f.ops); err != nil {
				t.Fatal(err)
			}
		}
	}
	db := testbed.Pool(t, e)

	// The replicas: from the source's own DDL, and made by create: true.
	kinds := []string{"ddl"}
	if v.create {
		kinds = append(kinds, "create")
	}
	var reps []*replica
	for _, kind := range kinds {
		rp := &replica{kind: kind, label: v.name, schema: testbed.Schema(t, e), offsets: testbed.Schema(t, e), pipeline: testbed.Name(t, "fid")}
		if kind == "create" {
			rp.label += "/create"
		}
		conn, err := pgx.Connect(ctx, e.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		ddl := "CREATE SCHEMA " + pgx.Identifier{rp.schema}.Sanitize() + ";\n"
		if kind == "ddl" {
			ddl += pgDumpDDL(t, srcURL, rp.schema)
		}
		_, err = conn.Exec(ctx, ddl)
		conn.Close(ctx)
		if err != nil {
			t.Fatalf("replica DDL: %v\n%s", err, ddl)
		}
		reps = append(reps, rp)
	}

	conn := map[string]string{"skipped.operations": "none"} // truncates are events too
	for k, val := range v.connector {
		conn[k] = val
	}
	names := []string{"fid.marker"}
	for _, tb := range tables {
		names = append(names, "fid."+tb.name)
	}
	prefix := testbed.Name(t, "fid")
	var topics []string
	for _, n := range names {
		topics = append(topics, prefix+"."+n)
	}
	createTopics(t, e.Brokers, topics) // at once: Connect creating 80 topics one by one takes minutes here
	d := testbed.RunDebezium(t, testbed.DebeziumOptions{Brokers: e.Brokers, SourceURL: srcURL, Tables: []string{`fid\..*`},
		TopicPrefix: prefix, Converter: v.conv, RegistryURL: registryURL, DecimalHandling: v.decimal, Connector: conn,
		StartTimeout: 8 * time.Minute}) // two connectors start at once on a loaded machine
	t.Logf("Debezium (%s) running after %s", v.name, d.StartedIn.Round(time.Millisecond))
	waitTopics(t, e.Brokers, topics)
	topicTable := func(topic string) string { return strings.TrimPrefix(topic, d.Topic("fid.")) }
	for _, rp := range reps {
		rp.writeConfig(t, e, v, topics, registryURL)
		rp.start(t)
	}
	settle := func(what string) map[*replica]map[string]string {
		t.Helper()
		n, err := w.mark(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[*replica]map[string]string{}
		for _, rp := range reps {
			out[rp] = rp.settled(t, ctx, db, n, 10*time.Minute) // a create: true replica of 80 tables under load takes minutes
		}
		t.Logf("%s: settled", what)
		return out
	}

	// Stream, SIGKILL every sink, stream (a truncate, a column added), SIGKILL again, stream.
	steps(f.steps)
	for _, rp := range reps {
		rp.kill(t)
	}
	steps(f.steps / 2)
	if err := w.truncate(ctx, tables[0]); err != nil {
		t.Fatal(err)
	}
	evolved := tables[min(2, len(tables)-1)]
	for _, rp := range reps {
		if rp.kind == "ddl" { // as an operator would: the replica first, then the source
			if _, err := db.Exec(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN extra text", pgx.Identifier{rp.schema, evolved.name}.Sanitize())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.addColumn(ctx, evolved); err != nil {
		t.Fatal(err)
	}
	steps(f.steps / 2)
	for _, rp := range reps {
		rp.kill(t)
	}
	steps(f.steps)
	settle("streamed, two SIGKILLs")

	// The operator's replay from the earliest offset while the source changes more, the
	// replicas polled for any row moving backwards.
	var backs []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, rp := range reps {
		before, err := versions(ctx, db, rp.schema, tables)
		if err != nil {
			t.Fatal(err)
		}
		rp.replay(t, e)
		wg.Add(1)
		go func(rp *replica, first map[string]int64) {
			defer wg.Done()
			samples := []map[string]int64{first}
			for {
				select {
				case <-stop:
					b := backwards(samples)
					mu.Lock()
					backs = append(backs, b...)
					mu.Unlock()
					fmt.Printf("replay %s: %d samples of the replica, %d moves backwards\n", rp.label, len(samples), len(b))
					return
				case <-time.After(100 * time.Millisecond):
				}
				if s, err := versions(ctx, db, rp.schema, tables); err == nil {
					samples = append(samples, s)
				}
			}
		}(rp, before)
	}
	steps(f.steps / 2)
	settled := settle("replayed")
	close(stop)
	wg.Wait()

	// Every row of every table.
	var cells []cell
	var out strings.Builder
	for _, tb := range tables {
		if tb.typ.toast {
			fmt.Fprintf(&out, "%s: %s: %d updates of other columns of rows holding a TOASTed value\n", v.name, tb.name, w.touched[tb.name])
		}
	}
	for _, rp := range reps {
		refused, err := refusals(ctx, db, rp, topicTable, settled[rp])
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables {
			c := compareCell(ctx, src, db, tb, rp, v, refused)
			fmt.Fprintf(&out, "cell: %s %s %s: %s\n", tb.typ.name, rp.label, tb.identity(), c.status)
			cells = append(cells, c)
		}
		for _, c := range cells[len(cells)-len(tables):] {
			// An expected lossy or refused cell's differences are not mismatches; the line says
			// how many rows differ and why, so that a count that differs is never unexplained.
			if c.expectedL {
				fmt.Fprintf(&out, "table %s.%s: source rows %d, replica rows %d, mismatches 0 (%d rows differ as expected: %s)\n",
					rp.label, c.tb.name, c.source, c.replica, len(c.differ), c.status)
				continue
			}
			fmt.Fprintf(&out, "table %s.%s: source rows %d, replica rows %d, mismatches %d\n", rp.label, c.tb.name, c.source, c.replica, len(c.differ))
		}
		if rp.kind == "ddl" {
			for _, p := range verifyAgrees(t, ctx, db, rp, srcURL, cells[len(cells)-len(tables):], &out) {
				t.Error(p)
			}
		}
	}
	fmt.Print(out.String())
	for _, rp := range reps {
		rp.sink.StopClean(60 * time.Second)
	}
	return cells, backs
}
