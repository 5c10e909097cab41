package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
)

// A source that goes back in time. Positions (cdc_positions) are LSNs of one source
// timeline. When the source fails over to a standby that lagged, or is restored from a
// backup, its LSNs go back: every later change would compare older than the positions
// stored for its keys and be refused, silently and forever. A Debezium restart, by
// contrast, sends events again that were applied already (the same positions and the same
// source.ts_ms at newer Kafka offsets), which must stay silently skipped.
//
// Each partition keeps a high-water mark (cdc_source_marks, one row per pipeline, topic
// and partition, written once per batch in the batch's transaction): the largest
// (commit, lsn) it applied and the latest source.ts_ms (the source's commit time) among
// the changes it applied. A change is from a rewound source when its position is below the
// mark while its commit time is later than every commit time the partition has seen, by
// more than rewindSlack. An event sent again was seen before, so its commit time is never
// later than the mark's: a re-send never stops a partition, whatever the clocks did. A
// change of the new timeline is committed after the failover, so its time is later than
// the old timeline's, unless the new primary's clock is behind the old one's by more than
// the time the failover took (then it is not detected).

// rewindSlack is how much later than the mark's commit time a change below the mark must
// be to count as rewound. It covers commit timestamps that are a little out of LSN order
// (PostgreSQL takes a commit's time before it writes the commit record) for changes sent
// again that the mark did not see: those applied before the mark's table was created.
const rewindSlack = 1000 // ms

// mark is a partition's high water: the largest (commit, lsn) applied and the latest
// source.ts_ms seen. set is false for a partition that has none yet.
type mark struct {
	commit, lsn, ts int64
	set             bool
}

// seen is what the check keeps of one change of a batch.
type seen struct {
	offset          int64
	op              string
	commit, lsn, ts int64
}

// watch collects a batch's changes for the rewind check (checkRewind).
type watch struct {
	seen   []seen
	max    mark  // the batch's largest position and latest commit time
	reads  bool  // seen holds snapshot reads
	stored *mark // the partition's mark before this batch, once read (resnapshot)
}

func (w *watch) see(r *sink.Record, ev *event) {
	s := seen{offset: r.Offset, op: ev.op, commit: ev.commit, lsn: ev.lsn, ts: ev.ts}
	w.seen = append(w.seen, s)
	w.max.advance(s)
	w.reads = w.reads || s.op == "r"
}

// resnapshot reports whether the batch so far holds a snapshot read that is new to a
// partition with streamed history: the source was snapshotted again (a read sent again
// by a replay is as old as the mark). The merge then checks such reads against the
// replica (snapshotCheckSQL). It reads the partition's mark once per batch, and only for
// batches with snapshot reads.
func (w *watch) resnapshot(ctx context.Context, tx pgx.Tx, p *CDC, b sink.Batch) (bool, error) {
	if !w.reads {
		return false, nil
	}
	if w.stored == nil {
		var m mark
		err := tx.QueryRow(ctx, `SELECT commit_lsn, lsn, ts_ms FROM `+p.marks+` WHERE pipeline = $1 AND topic = $2 AND partition = $3`,
			p.pipeline, b.Topic, b.Partition).Scan(&m.commit, &m.lsn, &m.ts)
		switch {
		case err == nil:
			m.set = true
		case !errors.Is(err, pgx.ErrNoRows):
			return false, fmt.Errorf("cdc: source mark of %s[%d]: %w", b.Topic, b.Partition, err)
		}
		w.stored = &m
	}
	m := *w.stored
	if !m.set || m.commit == 0 {
		return false, nil
	}
	for _, s := range w.seen {
		if s.op == "r" && s.ts > m.ts+rewindSlack {
			return true, nil
		}
	}
	return false, nil
}

// at returns what the watch saw of the record at offset (zero if none).
func (w *watch) at(offset int64) seen {
	for _, s := range w.seen {
		if s.offset == offset {
			return s
		}
	}
	return seen{}
}

// before reports whether the position (commit, lsn) is below m's.
func (m mark) before(commit, lsn int64) bool {
	return commit < m.commit || (commit == m.commit && lsn < m.lsn)
}

func (m *mark) advance(s seen) {
	if !m.set || (mark{commit: s.commit, lsn: s.lsn}).before(m.commit, m.lsn) {
		m.commit, m.lsn = s.commit, s.lsn
	}
	if !m.set || s.ts > m.ts {
		m.ts = s.ts
	}
	m.set = true
}

// rewound reports whether s, a change that follows m in its partition, comes from a source
// that went back in time. A change without source.ts_ms (0) is never counted rewound. A
// snapshot read (op r, commit 0, lsn the snapshot's) orders before every streamed change,
// so for it the snapshot's own LSN is compared: a snapshot of a healthy source is taken
// after every change already applied, at an LSN at least as high.
func rewound(m mark, s seen) bool {
	if !m.set || s.ts == 0 || s.ts <= m.ts+rewindSlack {
		return false
	}
	if s.op == "r" {
		return s.lsn < max(m.commit, m.lsn)
	}
	return m.before(s.commit, s.lsn)
}

// ErrSourceRewound matches every *RewoundError; it is sink.ErrSourceRewound.
var ErrSourceRewound = sink.ErrSourceRewound

// RewoundError says that a change event's source position is below what its partition
// already applied while its source commit time is later: the source went back in time (a
// failover to a standby that lagged, a restore from a backup). The partition stops (reason
// source_rewound); docs/cdc.md "A source that fails over" says how to resync.
type RewoundError struct {
	Topic     string
	Partition int32
	Offset    int64
	Op        string
	Commit    int64 // the change's position (commit, lsn) and source.ts_ms
	LSN       int64
	TsMs      int64
	// The partition's mark: the position applied and the latest commit time seen.
	AppliedCommit, AppliedLSN, AppliedTsMs int64
	// ByPartition is set when the position was applied by another partition of the topic
	// (a new snapshot read below what the other partition applied); nil: this partition.
	ByPartition *int32
	// Key is set when a snapshot read of this key contradicts the replica although the
	// key's stored change (AppliedCommit, AppliedLSN) is older than the snapshot: the
	// replica's row is missing (Deleted: its stored change is a delete) or differs from
	// the read (snapshotCheckSQL). Table is the target.
	Key, Table string
	Deleted    bool
}

func (e *RewoundError) Error() string {
	if e.Key != "" {
		what := "differs from the replica's row"
		if e.Deleted {
			what = "holds a row the replica deleted"
		}
		return fmt.Sprintf("cdc: source rewound: %s[%d]@%d: the snapshot read (source LSN %d) of key %s in %s %s, although the "+
			"key's last applied change, at source position (%d, %d), is older than the snapshot: a snapshot of the same history "+
			"would equal it, so the source failed over to a standby that lagged or was restored from a backup (or the replica "+
			"was changed by hand, or changes were lost before this snapshot); resync the replica (docs/cdc.md, \"A source that fails over\")",
			e.Topic, e.Partition, e.Offset, e.LSN, e.Key, e.Table, what, e.AppliedCommit, e.AppliedLSN)
	}
	by := "this partition"
	if e.ByPartition != nil {
		by = fmt.Sprintf("partition %d of the topic", *e.ByPartition)
	}
	return fmt.Sprintf("cdc: source rewound: %s[%d]@%d: change (op %s) at source position (%d, %d) with source.ts_ms %d is older "+
		"than the position (%d, %d) already applied on %s, yet committed later (applied up to source.ts_ms %d): "+
		"the source failed over to a standby that lagged or was restored from a backup, and its changes would be refused; "+
		"resync the replica (docs/cdc.md, \"A source that fails over\")",
		e.Topic, e.Partition, e.Offset, e.Op, e.Commit, e.LSN, e.TsMs, e.AppliedCommit, e.AppliedLSN, by, e.AppliedTsMs)
}

// Is reports whether target is ErrSourceRewound.
func (e *RewoundError) Is(target error) bool { return target == sink.ErrSourceRewound }

// marksSQL records the batch's mark (the greater of the stored one and $4..$6) and returns
// the one stored before, if any: one round trip per batch, on the partition's own row.
func marksSQL(table string) string {
	return fmt.Sprintf(`WITH old AS (SELECT commit_lsn, lsn, ts_ms FROM %[1]s WHERE pipeline = $1 AND topic = $2 AND partition = $3),
up AS (INSERT INTO %[1]s AS m (pipeline, topic, partition, commit_lsn, lsn, ts_ms) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (pipeline, topic, partition) DO UPDATE SET
         commit_lsn = CASE WHEN (m.commit_lsn, m.lsn) < (EXCLUDED.commit_lsn, EXCLUDED.lsn) THEN EXCLUDED.commit_lsn ELSE m.commit_lsn END,
         lsn = CASE WHEN (m.commit_lsn, m.lsn) < (EXCLUDED.commit_lsn, EXCLUDED.lsn) THEN EXCLUDED.lsn ELSE m.lsn END,
         ts_ms = greatest(m.ts_ms, EXCLUDED.ts_ms))
SELECT commit_lsn, lsn, ts_ms FROM old`, table)
}

// check records the batch's mark and returns a *RewoundError for the first change of the
// batch that comes from a rewound source (the transaction then rolls back, the mark with
// it). A batch without changes (tombstones, skipped truncates) costs nothing.
func (w *watch) check(ctx context.Context, tx pgx.Tx, p *CDC, b sink.Batch) error {
	if len(w.seen) == 0 {
		return nil
	}
	m, err := w.stored1(tx.QueryRow(ctx, p.marksSQL, w.marksArgs(p, b)...), b)
	if err != nil {
		return err
	}
	return w.against(ctx, tx, p, b, m)
}

func (w *watch) marksArgs(p *CDC, b sink.Batch) []any {
	return []any{p.pipeline, b.Topic, b.Partition, w.max.commit, w.max.lsn, w.max.ts}
}

// stored1 reads marksSQL's answer: the partition's mark before this batch (unset if none).
func (w *watch) stored1(row pgx.Row, b sink.Batch) (mark, error) {
	var m mark
	err := row.Scan(&m.commit, &m.lsn, &m.ts)
	switch {
	case err == nil:
		m.set = true
	case !errors.Is(err, pgx.ErrNoRows):
		return m, fmt.Errorf("cdc: source mark of %s[%d]: %w", b.Topic, b.Partition, err)
	}
	return m, nil
}

// against checks the batch's changes against m, the partition's mark before the batch.
func (w *watch) against(ctx context.Context, tx pgx.Tx, p *CDC, b sink.Batch, m mark) error {
	if w.stored == nil {
		stored := m // the mark before this batch, for the merge's resnapshot check
		w.stored = &stored
	}
	resnapshot := -1 // the first snapshot read of the batch after streamed changes, if any
	for i, s := range w.seen {
		if rewound(m, s) {
			return &RewoundError{Topic: b.Topic, Partition: b.Partition, Offset: s.offset, Op: s.op,
				Commit: s.commit, LSN: s.lsn, TsMs: s.ts, AppliedCommit: m.commit, AppliedLSN: m.lsn, AppliedTsMs: m.ts}
		}
		if resnapshot < 0 && s.op == "r" && s.ts > 0 && m.set && m.commit > 0 && s.ts > m.ts+rewindSlack {
			resnapshot = i
		}
		m.advance(s)
	}
	if resnapshot >= 0 {
		return w.checkResnapshot(ctx, tx, p, b, w.seen[resnapshot])
	}
	return nil
}

// checkResnapshot checks a snapshot read s that follows streamed changes on its partition
// (a new snapshot of the source) against the other partitions of the topic, which capture
// the same source table: a snapshot of a healthy source is taken after every change they
// applied before it was read, so its LSN is not below theirs. Its own partition's mark
// may be below the snapshot's LSN while another partition's, of the old timeline, is not.
// Only a mark whose latest commit time is earlier than the snapshot read by more than
// rewindSlack counts, and only streamed positions (commit > 0). It runs only for batches
// with such a snapshot read: never while streaming.
func (w *watch) checkResnapshot(ctx context.Context, tx pgx.Tx, p *CDC, b sink.Batch, s seen) error {
	var part int32
	var o mark
	err := tx.QueryRow(ctx, `SELECT partition, commit_lsn, lsn, ts_ms FROM `+p.marks+`
WHERE pipeline = $1 AND topic = $2 AND partition <> $3 AND commit_lsn > 0 AND ts_ms < $4
ORDER BY greatest(commit_lsn, lsn) DESC LIMIT 1`, p.pipeline, b.Topic, b.Partition, s.ts-rewindSlack).Scan(&part, &o.commit, &o.lsn, &o.ts)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cdc: source marks of %s: %w", b.Topic, err)
	}
	if s.lsn >= max(o.commit, o.lsn) {
		return nil
	}
	return &RewoundError{Topic: b.Topic, Partition: b.Partition, Offset: s.offset, Op: s.op,
		Commit: s.commit, LSN: s.lsn, TsMs: s.ts, AppliedCommit: o.commit, AppliedLSN: o.lsn, AppliedTsMs: o.ts, ByPartition: &part}
}

// errSnapshotDiffers is a staged snapshot read that contradicts the replica
// (snapshotCheckSQL); Write makes it a *RewoundError for its record.
type errSnapshotDiffers struct {
	ord             int // the staged row (record index × 2 + 1)
	commit, lsn     int64
	deleted, stored bool
	key, table      string
}

func (e *errSnapshotDiffers) Error() string {
	return fmt.Sprintf("cdc: %s: snapshot read of key %s contradicts the replica (stored change at (%d, %d))", e.table, e.key, e.commit, e.lsn)
}

// rewoundAt makes e the *RewoundError of record r (the read at source LSN lsn).
func (e *errSnapshotDiffers) rewoundAt(r *sink.Record, lsn, ts int64) *RewoundError {
	return &RewoundError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Op: "r", LSN: lsn, TsMs: ts,
		AppliedCommit: e.commit, AppliedLSN: e.lsn, Key: e.key, Table: e.table, Deleted: e.deleted || !e.stored}
}

// watches are a write's watches, one per partition of its records, in the order first seen.
type watches struct {
	by    map[sink.Partition]*watch
	order []sink.Partition
}

// of returns the watch of r's partition.
func (ws *watches) of(r *sink.Record) *watch {
	k := sink.Partition{Topic: r.Topic, Partition: r.Partition}
	w := ws.by[k]
	if w == nil {
		if ws.by == nil {
			ws.by = map[sink.Partition]*watch{}
		}
		w = &watch{}
		ws.by[k] = w
		ws.order = append(ws.order, k)
	}
	return w
}

// resnapshot reports whether any partition's watch found a snapshot read new to a
// partition with streamed history (watch.resnapshot).
func (ws *watches) resnapshot(ctx context.Context, tx pgx.Tx, p *CDC) (bool, error) {
	for _, k := range ws.order {
		reads, err := ws.by[k].resnapshot(ctx, tx, p, sink.Batch{Topic: k.Topic, Partition: k.Partition})
		if err != nil || reads {
			return reads, err
		}
	}
	return false, nil
}

// check runs each partition's check (watch.check). With more than one partition (a group
// of consistency: transaction) and no snapshot reads, their marks are recorded in one round
// trip, then checked in the order first seen: the first rewound change is the error, as one
// check after another would find it. Snapshot reads keep one check after another: a new
// snapshot's check (checkResnapshot) reads the other partitions' marks as the checks before
// it left them.
func (ws *watches) check(ctx context.Context, tx pgx.Tx, p *CDC) error {
	var ks []sink.Partition
	reads := false
	for _, k := range ws.order {
		if w := ws.by[k]; len(w.seen) > 0 {
			ks = append(ks, k)
			reads = reads || w.reads
		}
	}
	if len(ks) <= 1 || reads {
		for _, k := range ks {
			if err := ws.by[k].check(ctx, tx, p, sink.Batch{Topic: k.Topic, Partition: k.Partition}); err != nil {
				return err
			}
		}
		return nil
	}
	b := &pgx.Batch{}
	read := ws.queue(p, b)
	br := tx.SendBatch(ctx, b)
	if err := read(ctx, tx, br); err != nil {
		br.Close()
		return err
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("cdc: source marks: %w", err)
	}
	return nil
}

// riding reports whether the batch's marks may travel with the first merge's statements
// (queue) instead of in a round trip of their own before the merges (check): a mark is to
// be recorded, and no partition's changes hold a snapshot read, the only changes whose
// merge depends on the mark (resnapshot). A rewound change is then found after the merge's
// statements ran, in the same transaction, which it fails as before.
func (ws *watches) riding() bool {
	changes := false
	for _, w := range ws.by {
		if w.reads {
			return false
		}
		changes = changes || len(w.seen) > 0
	}
	return changes
}

// queue queues on b the marks of the partitions with changes, in the order first seen, and
// returns what reads their answers back (first among b's results) and checks the changes
// against them, the first rewound change being the error, as check does. For batches
// without snapshot reads (check, riding).
func (ws *watches) queue(p *CDC, b *pgx.Batch) func(ctx context.Context, tx pgx.Tx, br pgx.BatchResults) error {
	var ks []sink.Partition
	for _, k := range ws.order {
		if w := ws.by[k]; len(w.seen) > 0 {
			ks = append(ks, k)
			b.Queue(p.marksSQL, w.marksArgs(p, sink.Batch{Topic: k.Topic, Partition: k.Partition})...)
		}
	}
	// against runs no statement for changes without snapshot reads: the batch's results may
	// still be open.
	return func(ctx context.Context, tx pgx.Tx, br pgx.BatchResults) error {
		marks := make([]mark, len(ks))
		for i, k := range ks {
			m, err := ws.by[k].stored1(br.QueryRow(), sink.Batch{Topic: k.Topic, Partition: k.Partition})
			if err != nil {
				return err
			}
			marks[i] = m
		}
		for i, k := range ks {
			if err := ws.by[k].against(ctx, tx, p, sink.Batch{Topic: k.Topic, Partition: k.Partition}, marks[i]); err != nil {
				return err
			}
		}
		return nil
	}
}
