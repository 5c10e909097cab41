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
		lines = append(lines, fmt.Sprintf("source table %s -> %s", st, strings.Join(p.rs.byST[st].tmpl.parts, ".")))
	}
	other := "any other source table"
	if len(lines) == 0 {
		other = "every source table"
	}
	return append(lines, other+" -> "+strings.Join(p.rs.def.tmpl.parts, ".")+" (from each event's source, any topic)")
}
