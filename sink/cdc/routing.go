package cdc

import "github.com/jackc/pgx/v5"

// routed is where the events of one source table go in one Write: their route, the target
// table's id and quoted name, and the confinement check's verdict, which are the same for
// every event of the table and topic. Computed once per Write and source table (routings),
// not per event: rendering the template and quoting the name were a tenth of the plugin's
// CPU on a snapshot load.
type routed struct {
	rt   route
	id   pgx.Identifier
	name string // id.Sanitize()
	err  error  // cf.target's: the events are refused
}

type routeKey struct{ db, schema, table, topic string }

// routings memoizes routed for one Write; last serves a run of events of one table
// without a map lookup.
type routings struct {
	m       map[routeKey]*routed
	last    *routed
	lastKey routeKey
}

func (rs *routings) of(p *CDC, ev *event, topic string) *routed {
	k := routeKey{ev.db, ev.schema, ev.table, topic}
	if rs.last != nil && k == rs.lastKey {
		return rs.last
	}
	ro := rs.m[k]
	if ro == nil {
		rt := p.rs.lookup(ev.schema, ev.table)
		id := rt.tmpl.render(ev.db, ev.schema, ev.table, topic)
		ro = &routed{rt: rt, id: id, name: id.Sanitize(), err: p.cf.target(id, rt, ev, topic)}
		if rs.m == nil {
			rs.m = map[routeKey]*routed{}
		}
		rs.m[k] = ro
	}
	rs.last, rs.lastKey = ro, k
	return ro
}
