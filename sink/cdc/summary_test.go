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
	check := "topic check: each event's source table must be the one its topic names (<topic.prefix>.<schema>.<table>), " +
		"else it is poison; set topic_check: off if a topic-routing transform (ByLogicalTableRouter) renames the topics"
	want := []string{"source table public.orders -> archive.orders",
		"any other source table -> replica.${source.table} (from each event's source, which its topic must name)", check}
	if got := p.RouteSummary(); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	p, err = New(Config{Schemas: []string{"public", "inventory"}})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"every source table -> ${source.schema}.${source.table} (from each event's source, which its topic must name)",
		"event-chosen schemas confined to: inventory, public (the schemas option; eosink's own, pg_* and information_schema never)", check}
	if got := p.RouteSummary(); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	p, err = New(Config{Table: "replica.${source.table}", TopicCheck: TopicCheckOff})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"every source table -> replica.${source.table} (from each event's source, any topic)",
		"topic check: off (topic_check: off): an event on any subscribed topic may write any table its source routes to"}
	if got := p.RouteSummary(); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	p, err = New(Config{Table: "replica.all"})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"every source table -> replica.all (from each event's source, any topic)"}
	if got := p.RouteSummary(); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
