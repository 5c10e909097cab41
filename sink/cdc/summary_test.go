package cdc

import (
	"slices"
	"testing"
)

func TestRouteSummary(t *testing.T) {
	p, err := New(Config{Table: "replica.${source.table}", Tables: map[string]TableConfig{"public.orders": {Table: "archive.orders"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"source table public.orders -> archive.orders",
		"any other source table -> replica.${source.table} (from each event's source, any topic)"}
	if got := p.RouteSummary(); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	p, err = New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"every source table -> ${source.schema}.${source.table} (from each event's source, any topic)"}
	if got := p.RouteSummary(); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
