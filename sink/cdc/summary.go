package cdc

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/eosink/eosink/sink/cdc/internal/txn"
)

// RouteSummary lists where change events go, for `eosink run -validate`: the per-table
// overrides, then the template every other source table takes. The cdc plugin routes by
// each event's source table, whatever its topic, so every topic of the subscription
// (names and patterns alike) has a route: it does not implement sink.TopicRouter.
func (p *CDC) RouteSummary() []string {
	var lines []string
	for _, st := range slices.Sorted(maps.Keys(p.rs.byST)) {
		r := p.rs.byST[st]
		lines = append(lines, fmt.Sprintf("source table %s -> %s%s", st, strings.Join(r.tmpl.parts, "."), r.columnsNote("")))
	}
	other := "any other source table"
	if len(lines) == 0 {
		other = "every source table"
	}
	note := "from each event's source, any topic"
	if p.cf.topicCheck {
		note = "from each event's source, which its topic must name"
	}
	lines = append(lines, other+" -> "+strings.Join(p.rs.def.tmpl.parts, ".")+p.rs.def.columnsNote(note))
	lines = append(lines, p.cf.summary(p.c.TopicCheck == TopicCheckOff)...)
	if p.sequenced() {
		lines = append(lines, p.consistencySummary())
	}
	return lines
}

// consistencySummary says how consistency: transaction applies.
func (p *CDC) consistencySummary() string {
	o, _ := p.Sequenced()
	lease := "10s"
	if o.LeaseTimeout > 0 {
		lease = o.LeaseTimeout.String()
	}
	events, bytes := p.heldBounds()
	return fmt.Sprintf("consistency: transaction (each source transaction whole, in commit order, from %s, which must have one partition); "+
		"one member owns every partition under a lease, standbys take over after %s; at most %d changes, %d MiB held",
		p.c.TransactionTopic, lease, events, bytes>>20)
}

// summary lists the confinement for RouteSummary: the schemas a template's event-chosen
// schema may be, and the topic check.
func (cf confinement) summary(off bool) []string {
	var lines []string
	if len(cf.schemas) > 0 {
		lines = append(lines, "event-chosen schemas confined to: "+strings.Join(slices.Sorted(maps.Keys(cf.schemas)), ", ")+
			" (the schemas option; eosink's own, pg_* and information_schema never)")
	}
	switch {
	case cf.topicCheck:
		lines = append(lines, "topic check: each event's source table must be the one its topic names (<topic.prefix>.<schema>.<table>), "+
			"else it is poison; set topic_check: off if a topic-routing transform (ByLogicalTableRouter) renames the topics")
	case off:
		lines = append(lines, "topic check: off (topic_check: off): an event on any subscribed topic may write any table its source routes to")
	}
	return lines
}

// columnsNote is " (include a, b; note)", " (exclude c; note)" or " (note)".
func (r route) columnsNote(note string) string {
	var notes []string
	if len(r.include) > 0 {
		notes = append(notes, "include "+strings.Join(r.include, ", "))
	}
	if len(r.exclude) > 0 {
		notes = append(notes, "exclude "+strings.Join(r.exclude, ", "))
	}
	if note != "" {
		notes = append(notes, note)
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, "; ") + ")"
}

// heldBounds returns max_held_events and max_held_bytes, defaults filled in.
func (p *CDC) heldBounds() (events int, bytes int64) {
	events, bytes = p.c.MaxHeldEvents, p.c.MaxHeldBytes
	if events == 0 {
		events = txn.DefaultMaxEvents
	}
	if bytes == 0 {
		bytes = txn.DefaultMaxBytes
	}
	return events, bytes
}
