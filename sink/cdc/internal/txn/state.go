package txn

import (
	"cmp"
	"slices"
)

// state is one source transaction being assembled, keyed by its xid.
type state struct {
	xid   uint64
	end   *Marker // nil before its END
	endAt heldAt

	prev    int64 // the PrevCommit of its changes
	hasPrev bool

	changes map[int64]*Change          // by total_order
	byColl  map[string]map[int64]int64 // collection → data_collection_order → total_order
	bytes   int64
	held    []heldAt // its changes' records
}

func newState(xid uint64) *state {
	return &state{xid: xid, changes: map[int64]*Change{}, byColl: map[string]map[int64]int64{}}
}

// fits checks a change against the END: its orders within the END's counts.
func (s *state) fits(end *Marker, c *Change) error {
	if c.Meta.TotalOrder > end.EventCount {
		return conflict(s.xid, "a change's total_order %d is above the END's event_count %d", c.Meta.TotalOrder, end.EventCount)
	}
	for _, col := range end.Collections {
		if col.Name == c.Meta.Collection {
			if c.Meta.CollectionOrder > col.EventCount {
				return conflict(s.xid, "a change of %s has data_collection_order %d, above the END's event_count %d for it",
					col.Name, c.Meta.CollectionOrder, col.EventCount)
			}
			return nil
		}
	}
	return conflict(s.xid, "a change of %s, which the END's data_collections do not list", c.Meta.Collection)
}

// same reports whether c is a re-sent copy of a change s holds, and a conflict when c
// takes one of its orders with other contents.
func (s *state) same(c *Change) (dup bool, err error) {
	m := c.Meta
	if old, ok := s.changes[m.TotalOrder]; ok {
		if old.Meta.Collection != m.Collection || old.Meta.CollectionOrder != m.CollectionOrder {
			return false, conflict(s.xid, "total_order %d is %s #%d and %s #%d", m.TotalOrder,
				old.Meta.Collection, old.Meta.CollectionOrder, m.Collection, m.CollectionOrder)
		}
		return true, nil
	}
	if t, ok := s.byColl[m.Collection][m.CollectionOrder]; ok {
		return false, conflict(s.xid, "%s #%d has total_order %d and %d", m.Collection, m.CollectionOrder, t, m.TotalOrder)
	}
	return false, nil
}

// forget lets go of the changes of a state the assembler no longer holds (emitted,
// streamed or dropped): byPrev keeps such states until they come up, and each change holds
// its record and decoded event (the cdc plugin's), which would stay reachable through them.
func (s *state) forget() {
	s.changes, s.byColl, s.held = nil, nil, nil
}

func (s *state) add(c *Change, at heldAt) {
	s.changes[c.Meta.TotalOrder] = c
	col := s.byColl[c.Meta.Collection]
	if col == nil {
		col = map[int64]int64{}
		s.byColl[c.Meta.Collection] = col
	}
	col[c.Meta.CollectionOrder] = c.Meta.TotalOrder
	s.bytes += c.Size
	s.held = append(s.held, at)
	if !s.hasPrev {
		s.prev, s.hasPrev = c.Meta.PrevCommit, true
	}
}

// complete: its END was read and, the orders being distinct and within the END's counts,
// as many changes as the END's event_count, so every data collection's event_count.
func (s *state) complete() bool {
	return s.end != nil && int64(len(s.changes)) == s.end.EventCount
}

// sorted returns its changes by total_order.
func (s *state) sorted() []Change {
	out := make([]Change, 0, len(s.changes))
	for _, c := range s.changes {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(x, y Change) int { return cmp.Compare(x.Meta.TotalOrder, y.Meta.TotalOrder) })
	return out
}

// missing lists, per data collection of the END, how many changes are still to come.
func (s *state) missing() []Collection {
	var out []Collection
	if s.end == nil {
		return nil
	}
	for _, col := range s.end.Collections {
		if n := col.EventCount - int64(len(s.byColl[col.Name])); n > 0 {
			out = append(out, Collection{Name: col.Name, EventCount: n})
		}
	}
	return out
}
