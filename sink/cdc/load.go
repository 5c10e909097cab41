package cdc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eosink/eosink/sink/internal/mapping"
)

// The load of a fresh table's snapshot. A batch whose changes of a target are all snapshot
// reads (op r) of distinct keys at one LSN, with no unavailable value, into a target keyed
// by one integer column, is copied straight into the target: one COPY, where the merge
// copies into the staging table, then deduplicates, upserts the positions and upserts the
// rows. Its keys get no position row each: the target's load floor (cdc_load_floors,
// migration 6) records the LSN once, and a key with a row and no position row is at (0,
// that LSN) for the merge (positionsSQL). It writes what the merge would write, or nothing:
//
//   - It holds the target's merge lock exclusive, as a truncate does: no merge or other
//     load of the target overlaps it, and it sees what they committed. (The per-key
//     position rows that the load no longer writes were where a load and a merge of
//     another partition met; the lock is where they meet now.) Loads of one target by
//     several partitions take turns; each is one COPY.
//   - In the lock's round trip it checks, after moveSQL put every stored position of the
//     target's keys in cdc_positions_int, that the target has no truncate watermark (pk
//     'null': the merge refuses every snapshot read older than the truncate, which a load
//     does not check), that no key of the batch has a position (a deleted key's included),
//     that the target's floor is at the batch's LSN, or absent and the target empty (so
//     that every row without a position row was loaded at the floor: a replay of the
//     snapshot is then refused, as stored positions would refuse it), and that the
//     transaction is READ COMMITTED (the checks must see what merges committed before the
//     lock; a transaction's older snapshot would not). Then the rows' COPY, under a
//     savepoint: the target's primary key refuses a key that has a row. When all of that
//     holds, no key of the batch had a position or a row, and the merge would have inserted
//     every position (0, lsn) and every row, as the load did: it refuses a read only for a
//     stored position as new or newer, or a truncate watermark. The floor is then written if
//     it was absent.
//   - Otherwise (or when the COPY fails), the savepoint is rolled back and the batch goes
//     through the merge, which gives each key its due (and reports the errors the COPY hit,
//     a NOT NULL violation say, as the merge does). A key with a position or a row, a
//     watermark, a floor at another LSN, rows without a floor, another isolation level, or
//     a floor that could not be written also stop the target's loads in this process
//     (noLoad): later loads would fail the same way. Loads and merges of one transaction
//     take the lock in turn, so two partitions that each merged a target and then load it
//     in one transaction can deadlock; PostgreSQL ends one (40P01), and the engine retries
//     its batch.
//
// Snapshot reads checked against the replica (watch.resnapshot: a new snapshot of a source
// with streamed history) are merged, never loaded.
const loadSavepoint = "eosink_cdc_load"

// buildLoad writes the load's statements (build calls it for an integer key).
func (t *target) buildLoad() {
	t.loadSQL = fmt.Sprintf("COPY %s (%s) FROM STDIN", t.name, quote(t.cols, ""))
	t.loadCheckSQL = fmt.Sprintf(`WITH f AS (SELECT lsn FROM %[3]s WHERE target = $1)
SELECT EXISTS (SELECT 1 FROM %[1]s WHERE target = $1 AND pk = 'null'::jsonb),
       EXISTS (SELECT 1 FROM %[2]s WHERE target = $1 AND pk = ANY($2::bigint[])),
       (SELECT lsn FROM f),
       NOT EXISTS (SELECT 1 FROM f) AND EXISTS (SELECT 1 FROM %[4]s),
       current_setting('transaction_isolation') <> 'read committed'`, t.positions, t.keyPositions, t.floors, t.name)
	t.floorSQL = fmt.Sprintf("INSERT INTO %s (target, lsn) VALUES ($1, $2) ON CONFLICT (target) DO NOTHING", t.floors)
}

// loadRow is a snapshot read kept for the load and not yet staged for the merge.
type loadRow struct {
	row    []any
	commit int64
	lsn    int64
	ord    int
}

// stageLoad keeps a snapshot read of a new key for the load: its row as COPY text of the
// target's columns, its key as an int64. It is staged for the merge only if the batch is
// merged after all (unload): a batch that loads costs no staging rows. A read at another
// LSN than the batch's first, or whose key is not an int64, is staged for the merge, with
// the rows kept before it. An error is the one staging the row for the merge would return.
func (s *stagedTable) stageLoad(row []any, ev *event, ord int) error {
	key, ok := int64Key(row[s.t.keyIdx[0]])
	if !ok || (len(s.deferred) > 0 && ev.lsn != s.loadLSN) {
		if err := s.unload(); err != nil {
			return err
		}
		return s.stage(row, ev.commit, ev.lsn, ord, false, nil)
	}
	line, err := mapping.AppendCopyRow(s.load, row, s.t.bytea)
	if err != nil {
		return err
	}
	s.load, s.loadKeys, s.loadLSN = line, append(s.loadKeys, key), ev.lsn
	s.deferred = append(s.deferred, loadRow{row: row, commit: ev.commit, lsn: ev.lsn, ord: ord})
	return nil
}

// int64Key reads an integer key's value as the row holds it (an int64, or the text of one).
func int64Key(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
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
	s.deferred, s.mixed, s.load, s.loadKeys = nil, true, nil, nil
	return nil
}

// loadable reports whether apply tries the load first: not when a key is in the batch
// twice (the merge keeps the later read). It sorts loadKeys.
func (s *stagedTable) loadable(checkReads bool) bool {
	if s.mixed || len(s.load) == 0 || checkReads || s.t.loadSQL == "" || s.t.noLoad.Load() {
		return false
	}
	slices.Sort(s.loadKeys)
	for i := 1; i < len(s.loadKeys); i++ {
		if s.loadKeys[i] == s.loadKeys[i-1] {
			return false
		}
	}
	return true
}

// applyLoad loads the batch (see loadSavepoint) and reports whether it did; when it did
// not, and err is nil, the transaction is as before but for the merge lock (held
// exclusive) and the moved positions, and the caller merges the batch.
func (s *stagedTable) applyLoad(ctx context.Context, tx pgx.Tx) (bool, error) {
	t := s.t
	b := &pgx.Batch{}
	b.Queue(t.truncLockSQL, t.name)
	b.Queue(t.moveSQL, t.name)
	b.Queue(t.loadCheckSQL, t.name, s.loadKeys)
	b.Queue("SAVEPOINT " + loadSavepoint)
	br := tx.SendBatch(ctx, b)
	var truncated, held, rows, isolated bool
	var floor *int64
	err := func() error {
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("cdc: load %s: merge lock: %w", t.name, err)
		}
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("cdc: load %s: move positions: %w", t.name, err)
		}
		if err := br.QueryRow().Scan(&truncated, &held, &floor, &rows, &isolated); err != nil {
			return fmt.Errorf("cdc: load %s: check the positions: %w", t.name, err)
		}
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("cdc: load %s: savepoint: %w", t.name, err)
		}
		return br.Close()
	}()
	if err != nil {
		return false, err
	}
	if truncated || held || (floor != nil && *floor != s.loadLSN) || rows || isolated {
		t.noLoad.Store(true)
		return false, s.release(ctx, tx)
	}
	if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(s.load), t.loadSQL); err != nil {
		return false, s.rollBack(ctx, tx, err)
	}
	if floor == nil {
		if _, err := tx.Exec(ctx, t.floorSQL, t.name, s.loadLSN); err != nil {
			t.noLoad.Store(true) // a role without INSERT on cdc_load_floors, say: every load would fail so
			return false, s.rollBack(ctx, tx, err)
		}
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
