package fidelity

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// TestFidelityCatalogue runs every generator of the catalogue and the whole workload on a
// source database, without Debezium: every value is an SQL literal the source accepts, the
// slugs are unique, and the source's own DDL (pg_dump) makes replica tables.
func TestFidelityCatalogue(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for _, ct := range types {
		if seen[ct.slug] {
			t.Errorf("slug %s twice", ct.slug)
		}
		seen[ct.slug] = true
		for range 2000 {
			if ct.gen(r) == "" {
				t.Errorf("%s: empty value", ct.name)
			}
		}
		if ct.toast && len(big(ct, r)) < 20<<10 {
			t.Errorf("%s: TOAST value under 20 KB", ct.name)
		}
	}
	for _, s := range shortTypes {
		typeBySlug(s)
	}

	e := testbed.Require(t)
	ctx := context.Background()
	srcURL, _ := testbed.SourceDatabase(t, e, "fidcat")
	src, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(ctx)
	tables := tablesOf(types)
	if _, err := src.Exec(ctx, sourceDDL(tables)); err != nil {
		t.Fatal(err)
	}
	w := newWorkload(src, 3, tables, 2, true)
	if err := w.fill(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := w.touchBig(ctx); err != nil {
		t.Fatal(err)
	}
	for range 300 {
		if err := w.step(ctx, 4); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.truncate(ctx, tables[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.addColumn(ctx, tables[2]); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := w.step(ctx, 4); err != nil {
			t.Fatal(err)
		}
	}
	schema := testbed.Schema(t, e)
	db := testbed.Pool(t, e)
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()+";\n"+pgDumpDDL(t, srcURL, schema)); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1", schema).Scan(&n); err != nil || n != len(tables)+1 {
		t.Fatalf("replica from pg_dump: %d tables (%v), want %d", n, err, len(tables)+1)
	}
}
