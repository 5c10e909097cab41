package cdc

import (
	"fmt"
	"maps"
	"slices"
	"strings"
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
	return append(lines, other+" -> "+strings.Join(p.rs.def.tmpl.parts, ".")+p.rs.def.columnsNote("from each event's source, any topic"))
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
