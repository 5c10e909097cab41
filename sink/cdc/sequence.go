package cdc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/cdc/internal/txn"
	"github.com/eosink/eosink/sink/internal/schemaformat"
)

// consistency: transaction. The plugin is a sink.Sequencer: the sink owns the transaction
// topic and every data topic together, under a lease, and gives every record to a
// sequence, which assembles whole source transactions (package txn) and hands them out in
// commit order. Each commit applies one or more of them, with the per-partition writes of
// partition mode (write), their stored offsets and the replica's watermark, the commit LSN
// of the last one, in one transaction.

// errNotSequenced is Write called by the per-partition engine in transaction mode: the
// plugin inside multi or outbox, where the sink cannot see it as a Sequencer.
var errNotSequenced = errors.New("cdc: consistency: transaction applies through the sink's set: " +
	"the cdc plugin must be the pipeline's sink itself, not a part of multi or outbox")

func (p *CDC) sequenced() bool { return p.c.Consistency == ConsistencyTransaction }

// Sequenced reports the set of consistency: transaction.
func (p *CDC) Sequenced() (sink.SequenceOptions, bool) {
	if !p.sequenced() {
		return sink.SequenceOptions{}, false
	}
	t := p.c.TransactionTopic
	o := sink.SequenceOptions{Name: t, Topics: []string{t}, SinglePartition: []string{t}}
	if p.c.LeaseTimeout != nil {
		o.LeaseTimeout = *p.c.LeaseTimeout
	}
	if p.c.IncompleteAfter != nil {
		o.IncompleteAfter = *p.c.IncompleteAfter
	}
	return o, true
}

// NewSequence starts a sequence at the replica's stored watermark.
func (p *CDC) NewSequence(ctx context.Context, db sink.DB) (sink.Sequence, error) {
	var commit, xid, applied int64
	err := db.QueryRow(ctx, `SELECT commit_lsn, xid, transactions FROM `+p.watermarks+
		` WHERE pipeline = $1 AND transaction_topic = $2`, p.pipeline, p.c.TransactionTopic).Scan(&commit, &xid, &applied)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if err := p.checkFirstStart(ctx, db); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("cdc: watermark: %w", err)
	}
	p.log.Info("cdc: transaction consistency: resuming after the stored watermark", "transaction_topic", p.c.TransactionTopic,
		"commit_lsn", commit, "xid", xid, "transactions_applied", applied)
	return &sequence{p: p, a: txn.New(txn.Config{MaxEvents: p.c.MaxHeldEvents, MaxBytes: p.c.MaxHeldBytes, Watermark: commit})}, nil
}

// checkFirstStart refuses to start transaction consistency on a replica that partition
// mode applied: its data partitions' positions are past changes of transactions whose
// ENDs the transaction topic still holds, so those would never be complete.
func (p *CDC) checkFirstStart(ctx context.Context, db sink.DB) error {
	var marks bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+p.marks+` WHERE pipeline = $1 AND commit_lsn > 0)`,
		p.pipeline).Scan(&marks); err != nil {
		return fmt.Errorf("cdc: source marks: %w", err)
	}
	if !marks {
		return nil
	}
	return fmt.Errorf("cdc: pipeline %q applied changes in consistency: partition: its positions cannot start "+
		"transaction consistency (transactions it applied in part would never be complete). Replay from the log's start: "+
		"`eosink offsets set -to earliest` for every topic of the pipeline and the transaction topic, then record an empty "+
		"watermark: INSERT INTO %s (pipeline, transaction_topic, commit_lsn, xid, ts_ms) VALUES ('%s', '%s', 0, 0, 0); "+
		"or replicate into a new pipeline (docs/cdc.md, \"Transaction consistency\")", p.pipeline, p.watermarks, p.pipeline, p.c.TransactionTopic)
}

// sequence is one ownership's assembly.
type sequence struct {
	p     *CDC
	a     *txn.Assembler
	ready []*unit
	open  *unit // the last of ready when it holds snapshot reads and may take more
	piece *unit // the last of ready when it holds streamed changes and may take more
	// streaming is the xid of the last transaction that streamed, for its log line.
	streaming uint64

	// waiting holds the changes the assembler could not take yet (sink.ErrSequenceFull),
	// decoded, until the sink gives their records again.
	waiting map[txn.Position]txn.Change
}

// unit is one source transaction, or a run of snapshot reads (which belong to none), or a
// piece of a source transaction streamed (too large to hold: txn's streams).
type unit struct {
	recs   []*sink.Record
	evs    []*event
	pos    []sink.Offset
	bytes  int
	xid    uint64
	commit int64 // the END's LSN; 0 for snapshot reads and the pieces before a stream's end
	ts     int64
	// streamed: a piece or the end of a stream; continued: handed out while a stream is
	// open, so that the sink commits it with the stream's end.
	streamed, continued bool
}

func (u *unit) Positions() []sink.Offset { return u.pos }
func (u *unit) Size() (int, int)         { return len(u.recs), u.bytes }
func (u *unit) Continued() bool          { return u.continued }

// held is a change the assembler holds.
type held struct {
	r  *sink.Record
	ev *event
}

func at(r *sink.Record) txn.Position {
	return txn.Position{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
}

func offsetsOf(ps []txn.Position) []sink.Offset {
	out := make([]sink.Offset, len(ps))
	for i, p := range ps {
		out[i] = sink.Offset{Topic: p.Topic, Partition: p.Partition, Next: p.Offset}
	}
	return out
}

// Add takes one record of the set.
func (q *sequence) Add(ctx context.Context, r *sink.Record) error {
	p := q.p
	if r.Topic == p.c.TransactionTopic {
		if r.Value == nil {
			return q.a.Pass(at(r))
		}
		m, err := q.marker(r)
		if err != nil {
			return fmt.Errorf("cdc: transaction marker %s[%d]@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		if err := q.a.Marker(m, at(r)); err != nil {
			return q.refused(r, err)
		}
		q.streamed() // an END past the bound streams its transaction
		q.drain()
		return nil
	}
	if r.Value == nil {
		p.tombstones.Add(1)
		return q.a.Pass(at(r))
	}
	if c, ok := q.waiting[at(r)]; ok { // given again: decoded when it was refused
		if err := q.a.Change(c); err != nil {
			return q.refused(r, err)
		}
		delete(q.waiting, at(r))
		q.streamed()
		q.drain()
		return nil
	}
	ev, err := p.decode(r)
	if err != nil {
		return err
	}
	meta, err := txn.DecodeChange(map[string]any{"op": ev.op, "source": ev.source(), "transaction": ev.txBlock})
	if err != nil {
		return fmt.Errorf("cdc: change event %s[%d]@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	if !meta.Txn { // a snapshot read: applied in arrival order, before what comes after it
		if err := q.a.Pass(at(r)); err != nil {
			return q.refused(r, err)
		}
		u := q.open
		if u == nil {
			u = q.add(&unit{})
			q.open = u
		}
		u.recs, u.evs = append(u.recs, r), append(u.evs, ev)
		u.bytes += len(r.Key) + len(r.Value)
		u.pos = mergeOffsets(u.pos, offsetsOf(q.a.Moved()))
		return nil
	}
	c := txn.Change{At: at(r), Meta: meta, Size: int64(len(r.Key) + len(r.Value)), Value: &held{r: r, ev: ev}}
	if err := q.a.Change(c); err != nil {
		if errors.Is(err, txn.ErrFull) || errors.Is(err, txn.ErrTooLarge) {
			if q.waiting == nil {
				q.waiting = map[txn.Position]txn.Change{}
			}
			q.waiting[at(r)] = c
		}
		return q.refused(r, err)
	}
	q.streamed()
	q.drain()
	return nil
}

// add appends u to ready: continued while a stream is open.
func (q *sequence) add(u *unit) *unit {
	_, u.continued = q.a.Streaming()
	q.ready = append(q.ready, u)
	q.open, q.piece = nil, nil
	return u
}

// streamed puts the changes a stream handed out into a piece.
func (q *sequence) streamed() {
	chs := q.a.TakeStreamed()
	if len(chs) == 0 {
		return
	}
	xid, _ := q.a.Streaming()
	if xid != q.streaming {
		q.streaming = xid
		events, bytes := q.p.heldBounds()
		q.p.log.Info("cdc: a source transaction too large to hold streams into one replica transaction", "xid", xid,
			"max_held_events", events, "max_held_bytes", bytes)
	}
	u := q.piece
	if u == nil {
		u = q.add(&unit{xid: xid, streamed: true})
		q.piece = u
	}
	u.take(chs)
}

// take appends changes the assembler handed out.
func (u *unit) take(chs []txn.Change) {
	for _, c := range chs {
		h := c.Value.(*held)
		u.recs, u.evs = append(u.recs, h.r), append(u.evs, h.ev)
		u.bytes += len(h.r.Key) + len(h.r.Value)
	}
}

// marker decodes a BEGIN or END.
func (q *sequence) marker(r *sink.Record) (txn.Marker, error) {
	if !q.p.avro {
		return decodeMarkerJSON(r.Value)
	}
	msg, err := q.p.dec.Decode(schemaformat.Avro, r.Value)
	if err != nil {
		return txn.Marker{}, err
	}
	return txn.DecodeMarker(msg.Value)
}

// refused names the record the assembler did not take. One that would pass the bound is
// sink.ErrSequenceFull: the sink pauses its partition and gives it again.
func (q *sequence) refused(r *sink.Record, err error) error {
	if errors.Is(err, txn.ErrTooLarge) || errors.Is(err, txn.ErrFull) {
		return fmt.Errorf("cdc: %s[%d]@%d: %w: %v", r.Topic, r.Partition, r.Offset, sink.ErrSequenceFull, err)
	}
	return fmt.Errorf("cdc: %s[%d]@%d: %w", r.Topic, r.Partition, r.Offset, err)
}

// drain moves every complete transaction to ready.
func (q *sequence) drain() {
	for {
		tx, ok := q.a.Next()
		if !ok {
			return
		}
		u := q.add(&unit{xid: tx.XID, commit: tx.Commit, ts: tx.End.TsMs, pos: offsetsOf(tx.Positions), streamed: tx.Streamed})
		u.take(tx.Changes)
	}
}

// Next returns the oldest unit ready; when none is, and positions moved past records that
// need no apply (events sent again, BEGINs, tombstones), a unit of those positions alone,
// so that an idle replica's stored positions (and its lag) reach the log's end.
func (q *sequence) Next() (sink.Unit, bool) {
	if len(q.ready) == 0 {
		if moved := q.a.Moved(); len(moved) > 0 {
			_, streaming := q.a.Streaming()
			return &unit{pos: offsetsOf(moved), continued: streaming}, true
		}
		return nil, false
	}
	u := q.ready[0]
	q.ready[0] = nil
	q.ready = q.ready[1:]
	if u == q.open {
		q.open = nil
	}
	if u == q.piece {
		q.piece = nil
	}
	return u, true
}

// Waiting describes the oldest transaction whose END was read and that is not complete.
func (q *sequence) Waiting() string {
	w, ok := q.a.Waiting()
	if !ok {
		return ""
	}
	if w.Streaming {
		if w.Commit == 0 {
			return fmt.Sprintf("source transaction %d, streamed into one open replica transaction: %d changes written, its END not read yet", w.XID, w.Have)
		}
		return fmt.Sprintf("source transaction %d (commit LSN %d), streamed into one open replica transaction: %d changes written, still missing %v",
			w.XID, w.Commit, w.Have, w.Missing)
	}
	return fmt.Sprintf("source transaction %d (commit LSN %d): %d changes held, still missing %v", w.XID, w.Commit, w.Have, w.Missing)
}

// Apply writes the units' changes in one write, as partition mode writes a batch: staged
// per target table and merged once per table, with a rewind watch per partition. Each
// partition's records are in offset order (one key's changes share a partition, and units
// come in commit order), so a row's history applies in order. Then the watermark moves to
// the last transaction's commit LSN.
func (q *sequence) Apply(ctx context.Context, tx pgx.Tx, units []sink.Unit) error {
	var b sink.Batch
	var evs []*event
	var last *unit
	n := 0
	for _, su := range units {
		u := su.(*unit)
		if u.commit > 0 {
			last = u
			n++
		}
		for i, r := range u.recs {
			b.Records = append(b.Records, *r)
			evs = append(evs, u.evs[i])
		}
	}
	if len(b.Records) > 0 {
		// By partition and offset: a run of snapshot reads handed out before a transaction
		// may follow some of its changes on their partition.
		idx := make([]int, len(evs))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(x, y int) int {
			rx, ry := &b.Records[x], &b.Records[y]
			return cmp.Or(cmp.Compare(rx.Topic, ry.Topic), cmp.Compare(rx.Partition, ry.Partition), cmp.Compare(rx.Offset, ry.Offset))
		})
		sorted := sink.Batch{Records: make([]sink.Record, len(idx))}
		sortedEvs := make([]*event, len(idx))
		for i, j := range idx {
			sorted.Records[i], sortedEvs[i] = b.Records[j], evs[j]
		}
		b, evs = sorted, sortedEvs
		b.Topic, b.Partition = b.Records[0].Topic, b.Records[0].Partition
		if err := q.p.write(ctx, tx, b, evs); err != nil {
			return q.applyErr(units, err)
		}
	}
	if last == nil {
		return nil
	}
	tag, err := tx.Exec(ctx, `INSERT INTO `+q.p.watermarks+` AS w (pipeline, transaction_topic, commit_lsn, xid, ts_ms, transactions)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (pipeline, transaction_topic) DO UPDATE SET commit_lsn = EXCLUDED.commit_lsn, xid = EXCLUDED.xid,
  ts_ms = EXCLUDED.ts_ms, transactions = w.transactions + EXCLUDED.transactions, updated_at = now()
WHERE w.commit_lsn < EXCLUDED.commit_lsn`, q.p.pipeline, q.p.c.TransactionTopic, last.commit, int64(last.xid), last.ts, n)
	if err != nil {
		return fmt.Errorf("cdc: watermark: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("cdc: watermark: the stored one is at or past commit LSN %d: another writer applied this replica", last.commit)
	}
	return nil
}

// applyErr names the source transactions a failed apply was applying.
func (q *sequence) applyErr(units []sink.Unit, err error) error {
	var first, last *unit
	for _, su := range units {
		if u := su.(*unit); u.commit > 0 || u.streamed {
			if first == nil {
				first = u
			}
			last = u
		}
	}
	switch {
	case first == nil:
		return fmt.Errorf("cdc: applying snapshot reads: %w", err)
	case first.streamed && first.commit == 0:
		return fmt.Errorf("cdc: applying source transaction %d (streamed), none of it applied: %w", first.xid, err)
	case first == last || first.xid == last.xid:
		return fmt.Errorf("cdc: applying source transaction %d (commit LSN %d), none of it applied: %w", first.xid, first.commit, err)
	}
	return fmt.Errorf("cdc: applying source transactions %d (commit LSN %d) to %d (commit LSN %d), none of them applied: %w",
		first.xid, first.commit, last.xid, last.commit, err)
}

// mergeOffsets returns a with b's offsets put in (b's win).
func mergeOffsets(a, b []sink.Offset) []sink.Offset {
	for _, o := range b {
		i := slices.IndexFunc(a, func(x sink.Offset) bool { return x.Topic == o.Topic && x.Partition == o.Partition })
		if i >= 0 {
			a[i] = o
		} else {
			a = append(a, o)
		}
	}
	return a
}
