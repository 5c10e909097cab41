package txn

// A stream is the source transaction that commits next when holding it would pass the
// assembler's bound: its changes are handed out as they are read (TakeStreamed) instead of
// held, for the caller to write into one open replica transaction, and the Tx that Next
// returns at its END (Tx.Streamed) is its end: the caller commits then. Only the
// transaction that commits next streams (every earlier one was emitted), so its changes
// may be written at once; one stream at a time.
//
// What a stream keeps is bounded by its partitions and data collections, not its size:
//   - positions: its first record on each partition stays held until it is emitted, the
//     later ones are passed (a partition's safe offset is its smallest held offset, which
//     that first record bounds);
//   - re-sent copies (a connector restarted mid-transaction and sends it again): per
//     partition and data collection, the highest data_collection_order streamed. One
//     collection's changes reach one partition in data_collection_order (Debezium sends
//     them in order; a key's changes share a partition), so a copy comes at or below it;
//   - completeness: the count of changes streamed, per data collection and in all, against
//     the END's event_count.
//
// A stream does not tell two changes with one total_order on different partitions apart
// (a hostile producer's), beyond the counts: those pass the END's per-collection counts
// and are refused as a *ConflictError.
type stream struct {
	xid     uint64
	prev    int64 // the PrevCommit of its changes
	hasPrev bool  // false for a stream begun at its END, before any change

	end   *Marker // nil before its END
	endAt heldAt

	holds   []heldAt // its first record on each partition
	holding map[*partition]bool
	last    map[orderKey]int64 // highest data_collection_order streamed
	perColl map[string]int64   // changes streamed per data collection
	count   int64
	out     []Change // streamed, not taken yet
}

type orderKey struct {
	part partKey
	coll string
}

// next reports whether the transaction of a change with meta m, held as s (nil when
// nothing of it is), commits next: the oldest END read is its, or its changes follow the
// last commit emitted.
func (a *Assembler) next(s *state, m Meta) bool {
	if a.stream != nil {
		return false // the stream commits next
	}
	if len(a.ends) > 0 {
		return a.ends[0] == s && s != nil
	}
	return a.w > 0 && m.PrevCommit == a.w
}

// startStream turns transaction xid (held as s, or nil) into the stream: what is held of it
// goes out, in total_order, and its records stay held at their first offset on each
// partition. prev is its changes' PrevCommit, when known.
func (a *Assembler) startStream(s *state, xid uint64, prev int64, hasPrev bool) {
	st := &stream{xid: xid, prev: prev, hasPrev: hasPrev, holding: map[*partition]bool{},
		last: map[orderKey]int64{}, perColl: map[string]int64{}}
	if s != nil {
		for _, h := range s.held {
			if st.holding[h.part] {
				h.part.release(h.offset)
				continue
			}
			st.holding[h.part] = true
			st.holds = append(st.holds, h)
		}
		for _, ch := range s.sorted() {
			st.note(ch)
			st.out = append(st.out, ch)
		}
		if s.end != nil {
			st.end, st.endAt = s.end, s.endAt
			a.ends[0] = nil
			a.ends = a.ends[1:] // s was the oldest END: next says so
		}
		delete(a.txs, s.xid)
		a.stats.HeldEvents -= int64(len(s.changes))
		a.stats.HeldBytes -= s.bytes
		s.forget()
	}
	a.stream = st
	a.stats.Streamed++
}

func (st *stream) note(c Change) {
	k := orderKey{partKey{c.At.Topic, c.At.Partition}, c.Meta.Collection}
	st.last[k] = max(st.last[k], c.Meta.CollectionOrder)
	st.perColl[c.Meta.Collection]++
	st.count++
}

// streamChange takes a change of the stream's transaction, read on p.
func (a *Assembler) streamChange(p *partition, c Change) error {
	st := a.stream
	if st.hasPrev && c.Meta.PrevCommit != st.prev {
		return conflict(st.xid, "changes after two commits, LSN %d and %d", st.prev, c.Meta.PrevCommit)
	}
	if st.end != nil && !st.hasPrev && st.end.ID.LSN <= c.Meta.PrevCommit {
		return conflict(st.xid, "its END's commit LSN %d is not after the commit its changes follow, %d", st.end.ID.LSN, c.Meta.PrevCommit)
	}
	if c.Meta.CollectionOrder <= st.last[orderKey{partKey{c.At.Topic, c.At.Partition}, c.Meta.Collection}] {
		p.pass(c.At.Offset) // a re-sent copy of a change streamed
		a.stats.Duplicates++
		return nil
	}
	if st.end != nil {
		if err := st.fits(st.end, c, 1); err != nil {
			return err
		}
	}
	st.note(c)
	st.prev, st.hasPrev = c.Meta.PrevCommit, true
	if st.holding[p] {
		p.pass(c.At.Offset)
	} else {
		st.holding[p] = true
		st.holds = append(st.holds, heldAt{p, c.At.Offset})
		p.hold(c.At.Offset)
	}
	st.out = append(st.out, c)
	a.stats.StreamedChanges++
	return nil
}

// fits checks that the stream with n more changes of c's collection stays within end.
func (st *stream) fits(end *Marker, c Change, n int64) error {
	if c.Meta.TotalOrder > end.EventCount {
		return conflict(st.xid, "a change's total_order %d is above the END's event_count %d", c.Meta.TotalOrder, end.EventCount)
	}
	return st.within(end, c.Meta.Collection, st.perColl[c.Meta.Collection]+n)
}

// within checks that n changes of collection coll, and the stream's count, fit end.
func (st *stream) within(end *Marker, coll string, n int64) error {
	for _, col := range end.Collections {
		if col.Name == coll {
			if n > col.EventCount {
				return conflict(st.xid, "%d changes of %s streamed, above the END's event_count %d for it", n, coll, col.EventCount)
			}
			return nil
		}
	}
	return conflict(st.xid, "a change of %s, which the END's data_collections do not list", coll)
}

// streamEnd takes the END of the stream's transaction.
func (a *Assembler) streamEnd(p *partition, m Marker, at Position) error {
	st := a.stream
	if st.end != nil {
		if st.end.ID != m.ID || st.end.EventCount != m.EventCount {
			return conflict(st.xid, "two ENDs: %s with %d events, %s with %d", st.end.ID, st.end.EventCount, m.ID, m.EventCount)
		}
		p.pass(at.Offset)
		a.stats.Duplicates++
		return nil
	}
	if st.hasPrev && m.ID.LSN <= st.prev {
		return conflict(st.xid, "its END's commit LSN %d is not after the commit its changes follow, %d", m.ID.LSN, st.prev)
	}
	if st.count > m.EventCount {
		return conflict(st.xid, "%d changes streamed, above the END's event_count %d", st.count, m.EventCount)
	}
	for coll, n := range st.perColl {
		if err := st.within(&m, coll, n); err != nil {
			return err
		}
	}
	st.end = &m
	st.endAt = heldAt{p, at.Offset}
	p.hold(at.Offset)
	return nil
}

// Streaming reports the xid of the transaction being streamed.
func (a *Assembler) Streaming() (uint64, bool) {
	if a.stream == nil {
		return 0, false
	}
	return a.stream.xid, true
}

// TakeStreamed returns the changes of the stream read since the last call, in the order
// read (each partition's in offset order), for the caller to write before it takes the
// stream's end from Next.
func (a *Assembler) TakeStreamed() []Change {
	if a.stream == nil {
		return nil
	}
	out := a.stream.out
	a.stream.out = nil
	return out
}

// endStream emits the stream when its END was read and every change streamed.
func (a *Assembler) endStream() (*Tx, bool) {
	st := a.stream
	if st.end == nil || st.count != st.end.EventCount {
		return nil, false
	}
	a.stream = nil
	for _, h := range st.holds {
		h.part.release(h.offset)
	}
	st.endAt.part.release(st.endAt.offset)
	tx := &Tx{XID: st.xid, Commit: st.end.ID.LSN, End: *st.end, Changes: st.out, Streamed: true}
	a.emitted(tx)
	return tx, true
}
