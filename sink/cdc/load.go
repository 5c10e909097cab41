package cdc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eosink/eosink/sink/internal/mapping"
)

// The load of a fresh table's snapshot. A batch whose changes of a target are all snapshot
// reads (op r) of distinct keys, with no unavailable value, into a target keyed by one
// integer column, is copied straight into the target and its keys' positions straight
// into cdc_positions_int: two COPYs, where the merge copies into the staging table, then
// deduplicates, upserts the positions and upserts the rows. It writes what the merge would
// write, or nothing:
//
//   - It holds the target's merge lock shared, as a merge does: a truncate never overlaps
//     it, and after moveSQL every stored position of the target's keys is in
//     cdc_positions_int. A target with a truncate watermark (pk 'null') is never loaded:
//     the merge refuses every snapshot read older than the truncate, which a load does not
//     check.
//   - Both COPYs run under a savepoint, the positions first. The positions' primary key
//     refuses a key that has a position (a deleted key's included), the target's a key
//     that has a row. When both accept every key, no key of the batch had a position or a
//     row, and the merge would have inserted every position and every row as the load did:
//     it refuses a read only for a stored position as new or newer, or a truncate
//     watermark.
//   - A merge of another partition that writes one of the keys meets the load where the
//     merge's writes meet each other: on the key's position, whose insert waits for the
//     other transaction to end. The load that waits then fails on the key (and is merged)
//     or the merge that waits finds the load's position and merges after it, as after a
//     merge. Copying the positions first, a load never holds a row that such a merge
//     waits for while it waits for that merge (which would be a deadlock).
//   - When either COPY fails, the savepoint is rolled back and the batch goes through the
//     merge, which gives each key its due (and reports the errors the COPY hit, a NOT NULL
//     violation say, as the merge does). A unique violation also stops the target's loads
//     in this process (noLoad): the table holds rows already, and later loads would fail
//     the same way.
//
// Snapshot reads checked against the replica (watch.resnapshot: a new snapshot of a source
// with streamed history) are merged, never loaded.
const loadSavepoint = "eosink_cdc_load"

// buildLoad writes the load's statements (build calls it for an integer key).
func (t *target) buildLoad() {
	t.loadSQL = fmt.Sprintf("COPY %s (%s) FROM STDIN", t.name, quote(t.cols, ""))
	t.loadPosSQL = fmt.Sprintf("COPY %s (target, pk, commit_lsn, lsn, deleted) FROM STDIN", t.keyPositions)
	t.truncatedSQL = fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s WHERE target = $1 AND pk = 'null'::jsonb)", t.positions)
}

// loadRow is a snapshot read kept for the load and not yet staged for the merge.
type loadRow struct {
	row    []any
	commit int64
	lsn    int64
	ord    int
}

// stageLoad keeps a snapshot read of a new key for the load: its row as COPY text of the
// target's columns, its position as COPY text of cdc_positions_int. It is staged for the
// merge only if the batch is merged after all (unload): a batch that loads costs no staging
// rows. An error is the one staging the row for the merge would return.
func (s *stagedTable) stageLoad(row []any, ev *event, ord int) error {
	line, err := mapping.AppendCopyRow(s.load, row, s.t.bytea)
	if err != nil {
		return err
	}
	pos, err := s.appendLoadPosition(row[s.t.keyIdx[0]], ev.lsn)
	if err != nil {
		if err := s.unload(); err != nil {
			return err
		}
		return s.stage(row, ev.commit, ev.lsn, ord, false, nil)
	}
	s.load, s.loadPos = line, pos
	s.deferred = append(s.deferred, loadRow{row: row, commit: ev.commit, lsn: ev.lsn, ord: ord})
	return nil
}

// unload stages the rows kept for the load for the merge, and ends the load of this batch
// (mixed): a change that is not a snapshot read of a new key came, or the load was not
// taken.
func (s *stagedTable) unload() error {
	for _, d := range s.deferred {
		if err := s.stage(d.row, d.commit, d.lsn, d.ord, false, nil); err != nil {
			return err
		}
	}
	s.deferred, s.mixed, s.load, s.loadPos = nil, true, nil, nil
	return nil
}

// loadable reports whether apply tries the load first.
func (s *stagedTable) loadable(checkReads bool) bool {
	return !s.mixed && len(s.load) > 0 && !checkReads && s.t.loadSQL != "" && !s.t.noLoad.Load()
}

// applyLoad loads the batch (see loadSavepoint) and reports whether it did; when it did
// not, and err is nil, the transaction is as before but for the merge lock and the moved
// positions, and the caller merges the batch.
func (s *stagedTable) applyLoad(ctx context.Context, tx pgx.Tx) (bool, error) {
	t := s.t
	b := &pgx.Batch{}
	b.Queue(t.lockSQL, t.name)
	b.Queue(t.moveSQL, t.name)
	b.Queue(t.truncatedSQL, t.name)
	b.Queue("SAVEPOINT " + loadSavepoint)
	br := tx.SendBatch(ctx, b)
	var truncated bool
	err := func() error {
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("cdc: load %s: merge lock: %w", t.name, err)
		}
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("cdc: load %s: move positions: %w", t.name, err)
		}
		if err := br.QueryRow().Scan(&truncated); err != nil {
			return fmt.Errorf("cdc: load %s: truncate watermark: %w", t.name, err)
		}
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("cdc: load %s: savepoint: %w", t.name, err)
		}
		return br.Close()
	}()
	if err != nil {
		return false, err
	}
	if truncated {
		t.noLoad.Store(true)
		return false, s.release(ctx, tx)
	}
	pg := tx.Conn().PgConn()
	if _, err := pg.CopyFrom(ctx, bytes.NewReader(s.loadPos), t.loadPosSQL); err != nil {
		return false, s.rollBack(ctx, tx, err)
	}
	if _, err := pg.CopyFrom(ctx, bytes.NewReader(s.load), t.loadSQL); err != nil {
		return false, s.rollBack(ctx, tx, err)
	}
	s.loaded = true
	return true, s.release(ctx, tx)
}

// release ends the load's savepoint, so that the loads of one transaction do not nest.
func (s *stagedTable) release(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT "+loadSavepoint); err != nil {
		return fmt.Errorf("cdc: load %s: release the savepoint: %w", s.t.name, err)
	}
	return nil
}

// rollBack rolls a failed load back to its savepoint, for the merge to apply the batch. An
// error that is not PostgreSQL's (the connection, the context) is returned as it is.
func (s *stagedTable) rollBack(ctx context.Context, tx pgx.Tx, cause error) error {
	var pe *pgconn.PgError
	if !errors.As(cause, &pe) {
		return fmt.Errorf("cdc: load %s: %w", s.t.name, cause)
	}
	if pe.Code == "23505" { // unique_violation: the table holds rows or positions already
		s.t.noLoad.Store(true)
	}
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+loadSavepoint); err != nil {
		return fmt.Errorf("cdc: load %s: roll back to the savepoint after %v: %w", s.t.name, cause, err)
	}
	return s.release(ctx, tx)
}

// appendLoadPosition appends a snapshot read's position row (target, pk, commit 0, lsn, not
// deleted) to loadPos: written by hand for a key that is an int64 or a string of an
// integer (the target's name escaped once per batch), else by mapping.AppendCopyRow.
func (s *stagedTable) appendLoadPosition(pk any, lsn int64) ([]byte, error) {
	var k string
	switch v := pk.(type) {
	case string:
		k = v
	case int64:
		k = strconv.FormatInt(v, 10)
	}
	if isInteger(k) {
		if s.loadPosPrefix == nil {
			prefix, err := mapping.AppendCopyRow(nil, []any{s.t.name}, nil)
			if err != nil {
				return nil, err
			}
			s.loadPosPrefix = append(prefix[:len(prefix)-1], '\t') // the newline becomes the tab before pk
		}
		b := append(append(s.loadPos, s.loadPosPrefix...), k...)
		b = strconv.AppendInt(append(b, "\t0\t"...), lsn, 10)
		return append(b, "\tfalse\n"...), nil
	}
	return mapping.AppendCopyRow(s.loadPos, []any{s.t.name, pk, int64(0), lsn, false}, nil)
}

// isInteger reports whether k is an optional minus and 1 to 19 digits.
func isInteger(k string) bool {
	k = strings.TrimPrefix(k, "-")
	if len(k) == 0 || len(k) > 19 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < '0' || k[i] > '9' {
			return false
		}
	}
	return true
}
