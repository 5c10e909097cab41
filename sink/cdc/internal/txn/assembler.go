package txn

import (
	"container/heap"
	"errors"
	"slices"
)

// ErrNotInTransaction is a change event without a transaction, a snapshot read (op r),
// given to Change: apply it as the plugin does today and Pass its position.
var ErrNotInTransaction = errors.New("txn: a snapshot read (op r) belongs to no transaction: apply it and Pass its position")

// Defaults of Config.
const (
	DefaultMaxEvents = 100_000
	DefaultMaxBytes  = 64 << 20
)

// Config bounds an Assembler and says where it starts.
type Config struct {
	// MaxEvents and MaxBytes bound what is held, all transactions together: changes and
	// ENDs count against MaxEvents, Change.Size against MaxBytes. Default
	// DefaultMaxEvents and DefaultMaxBytes.
	MaxEvents int
	MaxBytes  int64
	// Watermark is the commit LSN of the last source transaction already applied (its
	// END's LSN), 0 for none: what is at or before it is recognised as re-sent and skipped.
	Watermark int64
}

// Change is one change event given to the assembler.
type Change struct {
	At    Position // the record's topic, partition and offset
	Meta  Meta
	Size  int64 // bytes it takes held, counted against Config.MaxBytes
	Value any   // the decoded event, the caller's; the assembler does not read it
}

// Tx is a complete source transaction.
type Tx struct {
	XID    uint64
	Commit int64  // the END's LSN, the transaction's commit LSN: the new watermark
	End    Marker // its END
	// Changes are every change of the transaction, across its data collections, topics and
	// partitions, by total_order.
	Changes []Change
	// Positions are the next offsets that committing this transaction advances to: every
	// partition (the transaction topic's included) whose safe next offset moved since the
	// previous Tx. A partition may advance less than past this transaction's records, or
	// not at all, while a later transaction holds an earlier record of it.
	Positions []Position
	// Streamed is true for the end of a stream (stream.go): Changes are only its changes
	// read since the last TakeStreamed; the others were handed out before.
	Streamed bool
}

// Stats count what an Assembler read and skipped.
type Stats struct {
	Emitted    int64 // transactions returned by Next
	Duplicates int64 // re-sent copies of a change or an END the assembler holds
	Resent     int64 // changes and ENDs of transactions already emitted (at or before the watermark)
	Superseded int64 // partial transactions dropped: their changes were of an emitted transaction
	Passed     int64 // records of no transaction (Pass) and BEGINs
	// Interrupted counts BEGINs read while another transaction's BEGIN had no END: the
	// connector restarted mid-transaction and sends it (or a part of it) again.
	Interrupted int64
	HeldEvents  int64
	HeldBytes   int64
	// Streamed counts the transactions streamed (too large to hold), StreamedChanges the
	// changes they handed out without holding them (not those held when each began).
	Streamed, StreamedChanges int64
}

// Pending describes the oldest transaction whose END was read and that is not complete:
// the one Next waits for.
type Pending struct {
	XID     uint64
	Commit  int64
	Have    int64        // changes held (streamed, for a stream)
	Missing []Collection // per data collection, how many changes are still to come
	// Streaming: the transaction is being streamed; Commit is 0 before its END is read.
	Streaming bool
}

// Assembler assembles source transactions from Debezium's transaction topic and change
// topics; see the package documentation for its rules. It is not safe for concurrent use.
type Assembler struct {
	cfg   Config
	w     int64 // the watermark: commit LSN of the last transaction emitted or applied
	txs   map[uint64]*state
	ends  []*state // with an END, not emitted, by commit LSN
	parts map[partKey]*partition
	stats Stats

	stream *stream // the transaction being streamed, nil when none
	// byPrev holds the transactions by the commit their changes follow, the smallest
	// first, so that those a new watermark supersedes are found without a scan; entries of
	// transactions emitted, dropped or given their END are skipped when they come up.
	byPrev prevHeap

	open    uint64 // the xid of the last BEGIN without its END
	hasOpen bool
}

// New returns an Assembler.
func New(cfg Config) *Assembler {
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = DefaultMaxEvents
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	return &Assembler{cfg: cfg, w: cfg.Watermark, txs: map[uint64]*state{}, parts: map[partKey]*partition{}}
}

// Watermark is the commit LSN of the last transaction emitted (or Config.Watermark).
func (a *Assembler) Watermark() int64 { return a.w }

// Stats returns the counters.
func (a *Assembler) Stats() Stats { return a.stats }

// Pass records a record that belongs to no transaction (a snapshot read, a tombstone, a
// heartbeat), which the caller has dealt with: its partition's position may pass it once
// every earlier record held is released.
func (a *Assembler) Pass(at Position) error {
	p := a.part(at)
	if err := p.read(at.Offset); err != nil {
		return err
	}
	p.pass(at.Offset)
	a.stats.Passed++
	return nil
}

// Marker takes a BEGIN or END read at at, from the transaction topic, in offset order. An
// error leaves the assembler as it was.
func (a *Assembler) Marker(m Marker, at Position) error {
	p := a.part(at)
	if err := p.read(at.Offset); err != nil {
		return err
	}
	xid := m.ID.XID
	if m.Status == Begin {
		if a.hasOpen && a.open != xid {
			a.stats.Interrupted++
		}
		a.open, a.hasOpen = xid, true
		p.pass(at.Offset)
		a.stats.Passed++
		return nil
	}
	if m.ID.LSN <= a.w { // an END re-sent after the connector restarted
		if s := a.txs[xid]; s != nil && s.end == nil {
			a.drop(s)
			a.stats.Superseded++
		}
		p.pass(at.Offset)
		a.stats.Resent++
		a.closeOpen(xid)
		return nil
	}
	if a.stream != nil && a.stream.xid == xid {
		if err := a.streamEnd(p, m, at); err != nil {
			return err
		}
		a.closeOpen(xid)
		return nil
	}
	s := a.txs[xid]
	if s != nil && s.end != nil {
		if s.end.ID != m.ID || s.end.EventCount != m.EventCount || !slices.Equal(s.end.Collections, m.Collections) {
			return conflict(xid, "two ENDs: %s with %d events, %s with %d", s.end.ID, s.end.EventCount, m.ID, m.EventCount)
		}
		p.pass(at.Offset)
		a.stats.Duplicates++
		a.closeOpen(xid)
		return nil
	}
	// An END is one more thing held. The END of the transaction that commits next (the
	// oldest END not emitted, no stream open) is always taken: refusing it would free
	// nothing; past the bound its transaction streams with it. Another END is refused past
	// the later transactions' share (the caller gives it again).
	full := a.held()+1 > int64(a.cfg.MaxEvents)
	if (len(a.ends) > 0 || a.stream != nil) && a.held()+1 > a.shareEvents() {
		return &LimitError{XID: xid, Events: 1, MaxEvents: a.cfg.MaxEvents, MaxBytes: a.cfg.MaxBytes}
	}
	i, found := slices.BinarySearchFunc(a.ends, m.ID.LSN, func(s *state, lsn int64) int {
		switch {
		case s.end.ID.LSN < lsn:
			return -1
		case s.end.ID.LSN > lsn:
			return 1
		}
		return 0
	})
	if found {
		return conflict(xid, "its END's commit LSN %d is transaction %d's too", m.ID.LSN, a.ends[i].xid)
	}
	if s != nil {
		if s.hasPrev && m.ID.LSN <= s.prev {
			return conflict(xid, "its END's commit LSN %d is not after the commit its changes follow, %d", m.ID.LSN, s.prev)
		}
		for _, c := range s.changes {
			if err := s.fits(&m, c); err != nil {
				return err
			}
		}
	}
	if full {
		var prev int64
		known := s != nil && s.hasPrev
		if known {
			prev = s.prev
		}
		a.startStream(s, xid, prev, known)
		if err := a.streamEnd(p, m, at); err != nil {
			return err
		}
		a.closeOpen(xid)
		return nil
	}
	if s == nil {
		s = newState(xid)
		a.txs[xid] = s
	}
	s.end = &m
	s.endAt = heldAt{p, at.Offset}
	p.hold(at.Offset)
	a.ends = slices.Insert(a.ends, i, s)
	a.closeOpen(xid)
	return nil
}

// closeOpen notes that the END of xid was read.
func (a *Assembler) closeOpen(xid uint64) {
	if a.hasOpen && a.open == xid {
		a.hasOpen = false
	}
}

// Change takes a change event read at c.At, in offset order on its partition. A snapshot
// read is ErrNotInTransaction; a change that would pass the bound is a *LimitError and is
// not taken. An error leaves the assembler as it was.
func (a *Assembler) Change(c Change) error {
	if !c.Meta.Txn {
		return ErrNotInTransaction
	}
	c.Size = max(c.Size, 0)
	p := a.part(c.At)
	if err := p.read(c.At.Offset); err != nil {
		return err
	}
	xid := c.Meta.ID.XID
	if a.w > 0 && c.Meta.PrevCommit < a.w { // committed at or before the watermark
		p.pass(c.At.Offset)
		a.stats.Resent++
		return nil
	}
	if a.stream != nil && a.stream.xid == xid {
		return a.streamChange(p, c)
	}
	s := a.txs[xid]
	if s != nil {
		if s.hasPrev && s.prev != c.Meta.PrevCommit {
			return conflict(xid, "changes after two commits, LSN %d and %d", s.prev, c.Meta.PrevCommit)
		}
		dup, err := s.same(&c)
		if err != nil {
			return err
		}
		if dup {
			p.pass(c.At.Offset)
			a.stats.Duplicates++
			return nil
		}
		if s.end != nil {
			if err := s.fits(s.end, &c); err != nil {
				return err
			}
		}
	}
	e := &LimitError{XID: xid, Events: 1, Bytes: c.Size, MaxEvents: a.cfg.MaxEvents, MaxBytes: a.cfg.MaxBytes}
	if s != nil {
		e.Events, e.Bytes = int64(len(s.changes))+1, s.bytes+c.Size
	}
	e.Alone = e.Events > int64(a.cfg.MaxEvents) || e.Bytes > a.cfg.MaxBytes
	if a.next(s, c.Meta) {
		// The transaction that commits next is held up to the whole bound (with what the
		// others hold), and streams past it: refusing its changes would never free
		// anything.
		if e.Alone || a.held()+1 > int64(a.cfg.MaxEvents) || a.stats.HeldBytes+c.Size > a.cfg.MaxBytes {
			a.startStream(s, xid, c.Meta.PrevCommit, true)
			return a.streamChange(p, c)
		}
	} else if e.Alone || a.held()+1 > a.shareEvents() || a.stats.HeldBytes+c.Size > a.shareBytes() {
		// The later ones share half of it, so that the next one has room to be held
		// whole rather than streamed: the caller gives the change again later.
		return e
	}
	if s == nil {
		s = newState(xid)
		a.txs[xid] = s
	}
	first := !s.hasPrev
	s.add(&c, heldAt{p, c.At.Offset})
	if first {
		heap.Push(&a.byPrev, s)
	}
	p.hold(c.At.Offset)
	a.stats.HeldEvents++
	a.stats.HeldBytes += c.Size
	return nil
}

// Next returns the next complete source transaction in commit order, and false when the
// oldest one read is not complete (or none is read). Its records are released: the
// positions it reports may pass them.
func (a *Assembler) Next() (*Tx, bool) {
	if a.stream != nil {
		return a.endStream()
	}
	if len(a.ends) == 0 || !a.ends[0].complete() {
		return nil, false
	}
	s := a.ends[0]
	a.ends[0] = nil // the array's slots before the slice's start are still reachable
	a.ends = a.ends[1:]
	tx := &Tx{XID: s.xid, Commit: s.end.ID.LSN, End: *s.end, Changes: s.sorted()}
	a.drop(s)
	a.emitted(tx)
	return tx, true
}

// emitted moves the watermark to tx, drops what it supersedes and sets its positions.
func (a *Assembler) emitted(tx *Tx) {
	a.w = tx.Commit
	a.stats.Emitted++
	// A transaction held without its END whose changes follow a commit before the new
	// watermark committed at or before it: a partial copy of an emitted transaction.
	for len(a.byPrev) > 0 && a.byPrev[0].prev < a.w {
		o := heap.Pop(&a.byPrev).(*state)
		if a.txs[o.xid] == o && o.end == nil {
			a.drop(o)
			a.stats.Superseded++
		}
	}
	tx.Positions = a.positions()
}

// Waiting describes the transaction Next waits for, when its END was read.
func (a *Assembler) Waiting() (Pending, bool) {
	if st := a.stream; st != nil {
		w := Pending{XID: st.xid, Have: st.count, Streaming: true}
		if st.end != nil {
			w.Commit = st.end.ID.LSN
			for _, col := range st.end.Collections {
				if n := col.EventCount - st.perColl[col.Name]; n > 0 {
					w.Missing = append(w.Missing, Collection{Name: col.Name, EventCount: n})
				}
			}
		}
		return w, true
	}
	if len(a.ends) == 0 {
		return Pending{}, false
	}
	s := a.ends[0]
	return Pending{XID: s.xid, Commit: s.end.ID.LSN, Have: int64(len(s.changes)), Missing: s.missing()}, true
}

// shareEvents and shareBytes are the part of the bound that transactions other than the
// one that commits next may hold: half.
func (a *Assembler) shareEvents() int64 { return max(int64(a.cfg.MaxEvents)/2, 1) }
func (a *Assembler) shareBytes() int64  { return max(a.cfg.MaxBytes/2, 1) }

// held counts what is held against MaxEvents: the changes and the ENDs not emitted.
func (a *Assembler) held() int64 { return a.stats.HeldEvents + int64(len(a.ends)) }

// drop forgets s and releases its records.
func (a *Assembler) drop(s *state) {
	delete(a.txs, s.xid)
	for _, h := range s.held {
		h.part.release(h.offset)
	}
	if s.end != nil {
		s.endAt.part.release(s.endAt.offset)
	}
	a.stats.HeldEvents -= int64(len(s.changes))
	a.stats.HeldBytes -= s.bytes
	s.forget()
}

// prevHeap is a min-heap of transactions by prev (container/heap).
type prevHeap []*state

func (h prevHeap) Len() int           { return len(h) }
func (h prevHeap) Less(i, j int) bool { return h[i].prev < h[j].prev }
func (h prevHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *prevHeap) Push(x any)        { *h = append(*h, x.(*state)) }
func (h *prevHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}
