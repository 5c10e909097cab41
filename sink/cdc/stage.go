package cdc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink/internal/mapping"
	"github.com/eosink/eosink/sink/internal/stage"
)

// stagedTable accumulates one batch's changes of one target as COPY text.
type stagedTable struct {
	t       *target
	stages  *stage.Sessions // the plugin's; nil keeps every staging table (tests)
	buf     []byte
	changes []prior          // the changes staged, in order, for fill
	priors  map[string][]int // by key (keyString), the indexes of its changes: built by the first fill
	reads   int              // snapshot reads staged (op r): the merge then checks them (snapshotCheckSQL)
	unavail int              // staged upserts left with unavailable values: the merge is applySQL, else upsertSQL

	// The load of a fresh table's snapshot (load.go): while the batch holds only snapshot
	// reads of distinct keys at one LSN (loadLSN) of a target keyed by one integer column,
	// their rows as COPY text of the target's columns, and their keys. mixed: the batch
	// holds something else (no load; load and loadKeys are dropped).
	load     []byte
	loadKeys []int64
	loadLSN  int64
	deferred []loadRow // the rows in load, not yet staged for the merge (unload)
	mixed    bool
	loaded   bool // apply loaded the rows (tests)
}

// add stages the rows of one change: an upsert of after for c, r and u (and, for a u that
// changes the primary key, a delete of the old key), a delete for d. Columns of after that
// hold the connector's unavailable-value placeholder take the key's earlier value in the
// batch (fill), else stay flagged for the merge to keep the replica's.
func (s *stagedTable) add(ev *event, ord int) error {
	t := s.t
	ord *= 2 // room for the delete of an old key before the upsert of its new one
	switch ev.op {
	case "c", "r", "u":
		if ev.after == nil {
			return fmt.Errorf("cdc: op %s without an after image", ev.op)
		}
		row, unavail, err := t.row(ev.after, false)
		if err != nil {
			return err
		}
		if ev.op == "u" && ev.before != nil {
			old, err := t.keyRow(ev.before, nil)
			if err != nil {
				return err
			}
			if !sameKey(t, old, row) {
				if err := s.append(old, nil, ev, ord, true); err != nil {
					return err
				}
			}
		}
		if ev.op == "r" {
			s.reads++
		}
		return s.append(row, unavail, ev, ord+1, false)
	case "d":
		row, err := t.keyRow(ev.before, ev.key)
		if err != nil {
			return err
		}
		return s.append(row, nil, ev, ord+1, true)
	}
	return fmt.Errorf("cdc: op %q", ev.op)
}

func (s *stagedTable) append(row []any, unavail []int, ev *event, ord int, del bool) error {
	key := s.t.keyString(row)
	if len(unavail) > 0 {
		var err error
		if unavail, err = s.fill(key, ev.commit, ev.lsn, row, unavail); err != nil {
			return err
		}
	}
	if len(unavail) > 0 {
		s.unavail++
	}
	p := prior{key: key, commit: ev.commit, lsn: ev.lsn, del: del, unavail: unavail}
	if !del {
		p.row = row
	}
	s.changes = append(s.changes, p)
	if s.priors != nil {
		s.priors[key] = append(s.priors[key], len(s.changes)-1)
	}
	if !s.mixed && s.t.intKey && ev.op == "r" && !del && len(unavail) == 0 { // a key twice: loadable says
		return s.stageLoad(row, ev, ord)
	}
	if err := s.unload(); err != nil {
		return err
	}
	return s.stage(row, ev.commit, ev.lsn, ord, del, unavail)
}

// riderMarks are a batch's source marks to be sent with the first merge (watches.riding):
// sent once they were.
type riderMarks struct {
	ws   *watches
	p    *CDC
	sent bool
}

// stage appends a row to the staging table's COPY text: the target's columns, then
// eosink_commit, eosink_lsn, eosink_ord, eosink_del and eosink_unavail.
func (s *stagedTable) stage(row []any, commit, lsn int64, ord int, del bool, unavail []int) error {
	row = append(row[:len(row):len(row)], strconv.FormatInt(commit, 10), strconv.FormatInt(lsn, 10), strconv.Itoa(ord), strconv.FormatBool(del), intArray(unavail))
	buf, err := mapping.AppendCopyRow(s.buf, row, s.t.bytea)
	if err != nil {
		return err
	}
	s.buf = buf
	return nil
}

// apply copies the staged rows and merges them (merge.go): under the target's shared merge
// lock, the positions moved to the key's table if needed (moveKeysSQL), the positions
// first, then the target rows, each in a statement of its own, in one round trip. A batch
// of snapshot reads of new keys is loaded instead when it can be (load.go). Without
// unavailable values the rows are merged by upsertSQL, else by applySQL; an upsert left with
// unavailable values and no row to keep them from is *errUnavailable. With checkReads (a
// new snapshot of a source with streamed history: watch.resnapshot), staged snapshot reads
// are first checked against the replica, and the first that contradicts it is
// *errSnapshotDiffers.
//
// With marks (not nil and not sent), the batch's source marks (watches.queue) go first in
// the merge's round trip, are checked before the merge's results are read, and marks is
// set sent; a batch that does not merge here (nothing staged, or loaded) leaves them.
func (s *stagedTable) apply(ctx context.Context, tx pgx.Tx, checkReads bool, marks *riderMarks) error {
	if len(s.buf) == 0 && len(s.deferred) == 0 {
		return nil
	}
	t := s.t
	if s.loadable(checkReads) {
		if done, err := s.applyLoad(ctx, tx); done || err != nil {
			return err
		}
	}
	if err := s.unload(); err != nil { // the merge stages every row
		return err
	}
	if err := s.stages.Ready(ctx, tx, t.stage, t.stageSQL, len(s.buf)); err != nil {
		return fmt.Errorf("cdc: %s: %w", t.name, err)
	}
	if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(s.buf), t.copySQL); err != nil {
		return fmt.Errorf("cdc: copy into the staging table of %s: %w", t.name, err)
	}
	b := &pgx.Batch{}
	var readMarks func(context.Context, pgx.Tx, pgx.BatchResults) error
	if marks != nil && !marks.sent {
		readMarks, marks.sent = marks.ws.queue(marks.p, b), true
	}
	b.Queue(t.lockSQL, t.name)
	b.Queue(t.moveSQL, t.name)
	checkReads = checkReads && s.reads > 0
	if checkReads {
		b.Queue(t.snapSQL, t.name)
	}
	b.Queue(t.positionsSQL, t.name)
	b.Queue(joinsSaveSQL)
	b.Queue(joinsOffSQL)
	if s.unavail > 0 {
		b.Queue(t.applySQL)
	} else {
		b.Queue(t.upsertSQL)
	}
	b.Queue(joinsBackSQL)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if readMarks != nil {
		if err := readMarks(ctx, tx, br); err != nil {
			return err
		}
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("cdc: merge lock of %s: %w", t.name, err)
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("cdc: move the positions of %s: %w", t.name, err)
	}
	if checkReads {
		var d errSnapshotDiffers
		switch err := br.QueryRow().Scan(&d.ord, &d.commit, &d.lsn, &d.deleted, &d.stored, &d.key); {
		case err == nil:
			d.table = t.name
			return &d
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("cdc: snapshot check of %s: %w", t.name, err)
		}
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("cdc: merge positions of %s: %w", t.name, err)
	}
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("cdc: merge into %s: planner settings: %w", t.name, err)
		}
	}
	if s.unavail == 0 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("cdc: merge into %s: %w", t.name, err)
		}
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("cdc: merge into %s: planner settings: %w", t.name, err)
		}
		return br.Close()
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("cdc: merge into %s: %w", t.name, err)
	}
	var refused *errUnavailable
	var ord int
	var unavail []int32
	if _, err := pgx.ForEachRow(rows, []any{&ord, &unavail}, func() error {
		if refused == nil || ord < refused.ord {
			idx := make([]int, len(unavail))
			for i, u := range unavail {
				idx[i] = int(u)
			}
			refused = &errUnavailable{ord: ord, table: t.name, cols: t.names(idx)}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("cdc: merge into %s: %w", t.name, err)
	}
	if refused != nil {
		return refused
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("cdc: merge into %s: planner settings: %w", t.name, err)
	}
	return br.Close()
}

// row converts an image into the table's replicated columns. A field of the image that is
// replicated but has no column is an error: data would be lost silently. unavail lists
// the columns (indexes into t.cols) that hold the connector's unavailable-value
// placeholder; their row values are nil. A key column never may.
func (t *target) row(img image, keyOnly bool) (row []any, unavail []int, err error) {
	row = make([]any, len(t.cols))
	for f, iv := range img {
		i, ok := t.colIdx[f]
		if !ok {
			if t.r.replicated(f) && !keyOnly {
				return nil, nil, fmt.Errorf("cdc: field %q has no column in %s (exclude it to drop it)", f, t.name)
			}
			continue
		}
		if keyOnly && !contains(t.keys, f) {
			continue
		}
		v := iv.value()
		v.t.decimals = t.r.decimals
		if v.v != nil && t.r.ph.is(v.v) {
			if contains(t.keys, f) {
				return nil, nil, fmt.Errorf("cdc: primary key column %q of %s holds the unavailable-value placeholder", f, t.name)
			}
			unavail = append(unavail, i)
			continue
		}
		cv, err := convert(v, t.types[i])
		if err != nil {
			return nil, nil, fmt.Errorf("cdc: field %q: %w", f, err)
		}
		row[i] = cv
	}
	for _, k := range t.keyIdx {
		if row[k] == nil {
			return nil, nil, fmt.Errorf("cdc: primary key column %q of %s missing from the event", t.cols[k], t.name)
		}
	}
	sort.Ints(unavail)
	return row, unavail, nil
}

// missing returns the replicated fields of img that have no column.
func (t *target) missing(img image) []string {
	var out []string
	for f := range img {
		if _, ok := t.colIdx[f]; !ok && t.r.replicated(f) {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// keyRow is the row of a delete: the key columns only, from the Kafka key when it holds
// them all, else from img (before).
func (t *target) keyRow(img, key image) ([]any, error) {
	if key != nil {
		all := true
		for _, k := range t.keys {
			if _, ok := key[k]; !ok {
				all = false
			}
		}
		if all {
			row, _, err := t.row(key, true)
			return row, err
		}
	}
	if img == nil {
		return nil, fmt.Errorf("cdc: delete of %s without its key (no key fields and no before image)", t.name)
	}
	row, _, err := t.row(img, true)
	return row, err
}

// keyString identifies row's key within a batch.
// A key of one column is its text; a key of several, their texts quoted one after another.
func (t *target) keyString(row []any) string {
	if len(t.keyIdx) == 1 {
		return keyText(row[t.keyIdx[0]])
	}
	var b []byte
	for _, k := range t.keyIdx {
		b = strconv.AppendQuote(b, keyText(row[k]))
	}
	return string(b)
}

// keyText is fmt.Sprint(v), without fmt for the types a key column's value has most.
func keyText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return fmt.Sprint(v)
}

func sameKey(t *target, a, b []any) bool {
	for _, k := range t.keyIdx {
		if keyText(a[k]) != keyText(b[k]) {
			return false
		}
	}
	return true
}
