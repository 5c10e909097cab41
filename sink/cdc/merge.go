package cdc

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// mergeLockClass is the first key of the merge locks, pg_advisory_xact_lock(int, int):
// the two-key space of advisory locks, apart from the one-bigint key of the DDL lock
// (ddl.go), so the two never collide. The second key is hashtext of the target's name; two
// targets sharing it only wait for each other.
const mergeLockClass = 0x65636463 // "ecdc"

// build writes the statements. A batch's changes of the table are copied into a temporary
// staging table; then, in one round trip, three statements, each with its own snapshot
// (READ COMMITTED), so that none misses a row that another partition's transaction wrote
// while this one waited for it:
//
//  1. lockSQL takes the target's merge lock shared (truncates take it exclusive): a merge
//     and a truncate of one target never overlap, and each sees what the other committed.
//  2. positionsSQL keeps the last change per key (by source position, then offset),
//     records each key's new position in the positions table unless the stored one is as
//     new or newer (the ON CONFLICT ... WHERE re-checks it under the row lock, waiting for
//     a concurrent partition that holds it), and deletes the other staged rows. A key
//     with a row and no stored position was loaded (load.go) at the target's floor: a
//     snapshot read as old as the floor or older is not recorded either.
//  3. applySQL, in a snapshot taken after those waits, applies the winners: deletes, then
//     updates of the stored rows (a column flagged unavailable keeps the stored value),
//     then inserts of the keys without a row. It returns the winners that carry unavailable
//     columns and have no row: they are refused (errUnavailable), never written. It is
//     planned with hash and merge joins off (joinsOffSQL, then joinsBackSQL; see there).
func (t *target) build(positions string) {
	t.positions, t.keyPositions, t.floors = positions, positions, loadFloors(positions)
	from := intPositions(positions)
	if t.intKey {
		t.keyPositions, from = from, positions
	}
	t.moveSQL = t.moveKeysSQL(from)
	// The staging table lives as long as the session, or until the session has used
	// stage.MaxPerSession others since (stage.Sessions.Ready drops it). Its name is its shape:
	// the columns' names, types, typmods and collations, not the target's name, so that
	// targets of one shape (a pattern over sharded or per-tenant tables) share one per
	// session instead of one each, and a session never copies into one made before a column
	// was added or changed. applySQL and upsertSQL empty it; stage.Sessions.Ready (which
	// makes it ON COMMIT DELETE ROWS or plain by the batch's size, and truncates a plain one
	// past stage.TruncateBytes) empties it too after stageSQL, for a merge earlier in the
	// transaction that stopped between the COPY and applySQL (the snapshot check refuses
	// without an error of PostgreSQL's) and a target of the same shape next.
	h := fnv.New64a()
	for i, c := range t.cols {
		h.Write([]byte{0})
		h.Write([]byte(c))
		h.Write([]byte{0})
		h.Write([]byte(t.types[i]))
		for _, n := range t.shape[3*i : 3*i+3] {
			h.Write([]byte(strconv.FormatInt(n, 10) + " "))
		}
	}
	h.Write([]byte{0, 4}) // the staging table's own columns, version 4 (named by shape; its kind by the batch's size)
	t.stage = pgx.Identifier{fmt.Sprintf("eosink_cdc_%x", h.Sum64())}.Sanitize()
	cols := quote(t.cols, "")
	t.stageSQL = fmt.Sprintf(`CREATE TEMP TABLE IF NOT EXISTS %s AS
SELECT %s, 0::bigint AS %s, 0::bigint AS %s, 0::bigint AS %s, false AS %s, NULL::int[] AS %s FROM %s WITH NO DATA`,
		t.stage, cols, colCommit, colLSN, colOrd, colDel, colUnav, t.name)
	t.copySQL = fmt.Sprintf("COPY %s (%s, %s, %s, %s, %s, %s) FROM STDIN", t.stage, cols, colCommit, colLSN, colOrd, colDel, colUnav)
	t.lockSQL = fmt.Sprintf("SELECT pg_advisory_xact_lock_shared(%d, hashtext($1))", mergeLockClass)
	t.truncLockSQL = fmt.Sprintf("SELECT pg_advisory_xact_lock(%d, hashtext($1))", mergeLockClass)

	keys := quote(t.keys, "")
	var join, set, keep []string
	for _, k := range t.keys {
		q := pgx.Identifier{k}.Sanitize()
		join = append(join, fmt.Sprintf("t.%s = a.%s", q, q))
	}
	for i, c := range t.cols {
		if !contains(t.keys, c) {
			q := pgx.Identifier{c}.Sanitize()
			set = append(set, fmt.Sprintf("%s = EXCLUDED.%s", q, q))
			keep = append(keep, fmt.Sprintf("%[1]s = CASE WHEN %[2]d = ANY(a.%[3]s) THEN t.%[1]s ELSE a.%[1]s END", q, i, colUnav))
		}
	}
	var loaded []string // the staged key's row in the target: the load floor's condition
	for _, k := range t.keys {
		q := pgx.Identifier{k}.Sanitize()
		loaded = append(loaded, fmt.Sprintf("t.%s = l.%s", q, q))
	}
	t.positionsSQL = fmt.Sprintf(`WITH last AS (SELECT DISTINCT ON (%[2]s) %[2]s, %[5]s, %[8]s AS eosink_pk, %[3]s, %[4]s, %[7]s FROM %[1]s
         ORDER BY %[2]s, %[3]s DESC, %[4]s DESC, %[5]s DESC),
won AS (INSERT INTO %[9]s AS p (target, pk, commit_lsn, lsn, deleted)
        SELECT $1, eosink_pk, %[3]s, %[4]s, %[7]s FROM last l
        WHERE NOT EXISTS (SELECT 1 FROM %[6]s w WHERE w.target = $1 AND w.pk = 'null'::jsonb
                          AND (l.%[3]s, l.%[4]s) <= (w.commit_lsn, w.lsn))
          AND NOT (l.%[3]s = 0 AND l.%[4]s <= coalesce((SELECT f.lsn FROM %[10]s f WHERE f.target = $1), -1)
                   AND EXISTS (SELECT 1 FROM %[11]s t WHERE %[12]s)
                   AND NOT EXISTS (SELECT 1 FROM %[9]s k WHERE k.target = $1 AND k.pk = l.eosink_pk))
        ON CONFLICT (target, pk) DO UPDATE SET commit_lsn = EXCLUDED.commit_lsn, lsn = EXCLUDED.lsn, deleted = EXCLUDED.deleted
        WHERE (p.commit_lsn, p.lsn) < (EXCLUDED.commit_lsn, EXCLUDED.lsn)
        RETURNING p.pk)
DELETE FROM %[1]s s WHERE NOT EXISTS (SELECT 1 FROM last l JOIN won ON won.pk = l.eosink_pk WHERE l.%[5]s = s.%[5]s)`,
		t.stage, keys, colCommit, colLSN, colOrd, positions, colDel, t.posKey(""), t.keyPositions, t.floors, t.name, strings.Join(loaded, " AND "))

	t.snapSQL = t.snapshotCheckSQL()
	if t.intKey {
		t.buildLoad()
	}

	conflict, upd := "DO NOTHING", fmt.Sprintf(`SELECT a.%s FROM a JOIN %s t ON %s WHERE NOT a.%s`, colOrd, t.name, strings.Join(join, " AND "), colDel)
	if len(set) > 0 {
		conflict = "DO UPDATE SET " + strings.Join(set, ", ")
		upd = fmt.Sprintf(`UPDATE %s t SET %s FROM a WHERE NOT a.%s AND %s RETURNING a.%s`,
			t.name, strings.Join(keep, ", "), colDel, strings.Join(join, " AND "), colOrd)
	}
	t.applySQL = fmt.Sprintf(`WITH a AS (DELETE FROM %[1]s RETURNING *),
deleted AS (DELETE FROM %[2]s t USING a WHERE a.%[3]s AND %[4]s),
updated AS (%[5]s),
inserted AS (INSERT INTO %[2]s AS t (%[6]s) SELECT %[6]s FROM a
             WHERE NOT a.%[3]s AND a.%[7]s IS NULL AND a.%[8]s NOT IN (SELECT u.%[8]s FROM updated u)
             ON CONFLICT (%[9]s) %[10]s)
SELECT a.%[8]s, a.%[7]s FROM a WHERE NOT a.%[3]s AND a.%[7]s IS NOT NULL AND a.%[8]s NOT IN (SELECT u.%[8]s FROM updated u)`,
		t.stage, t.name, colDel, strings.Join(join, " AND "), upd, cols, colUnav, colOrd, keys, conflict)

	// upsertSQL is applySQL for a batch without unavailable values (stagedTable.unavail 0):
	// with nothing to keep from a stored row and nothing to refuse, the deletes, then one
	// INSERT … ON CONFLICT DO UPDATE of the upserts instead of an UPDATE of the stored rows and
	// an INSERT of the others (two probes of the primary key per stored row, one per new one,
	// instead of three and two). The staged rows are one per key (positionsSQL deleted the
	// others), so no row is affected twice.
	t.upsertSQL = fmt.Sprintf(`WITH a AS (DELETE FROM %[1]s RETURNING *),
deleted AS (DELETE FROM %[2]s t USING a WHERE a.%[3]s AND %[4]s)
INSERT INTO %[2]s AS t (%[5]s) SELECT %[5]s FROM a WHERE NOT a.%[3]s ON CONFLICT (%[6]s) %[7]s`,
		t.stage, t.name, colDel, strings.Join(join, " AND "), cols, keys, conflict)

	notMark := ""
	if !t.intKey {
		notMark = " AND p.pk <> 'null'::jsonb"
	}
	// A truncate, under the exclusive merge lock, deletes the rows whose position is older
	// than its own, marks their positions deleted, and records itself as the table's
	// watermark (pk 'null'): a change at or before it is never applied afterwards.
	t.truncSQL = fmt.Sprintf(`WITH mark AS (
  INSERT INTO %[1]s AS p (target, pk, commit_lsn, lsn, deleted) VALUES ($1, 'null'::jsonb, $2, $3, true)
  ON CONFLICT (target, pk) DO UPDATE SET commit_lsn = EXCLUDED.commit_lsn, lsn = EXCLUDED.lsn
  WHERE (p.commit_lsn, p.lsn) < (EXCLUDED.commit_lsn, EXCLUDED.lsn) RETURNING 1),
gone AS (DELETE FROM %[2]s t WHERE EXISTS (SELECT 1 FROM mark) AND NOT EXISTS (
  SELECT 1 FROM %[4]s p WHERE p.target = $1 AND p.pk = %[3]s AND (p.commit_lsn, p.lsn) > ($2, $3)))
UPDATE %[4]s p SET deleted = true, commit_lsn = $2, lsn = $3
WHERE EXISTS (SELECT 1 FROM mark) AND p.target = $1%[5]s AND (p.commit_lsn, p.lsn) < ($2, $3)`,
		positions, t.name, t.posKey("t."), t.keyPositions, notMark)
}

// The merge's plan. applySQL joins the staged rows to the target by its primary key three
// times (deleted, updated, inserted's ON CONFLICT). Left to the planner, the first two are
// hash joins that read the whole target whenever the batch is more than a few hundred rows
// (random_page_cost prices each index probe as a disk read) or the plan was made while the
// target was small: pgx prepares the statement once per session, and a statement without
// parameters keeps its first (generic) plan until the target is analyzed again. So a merge
// cost in proportion to the replica, not the batch: 23 of 30 ms building the hashes for 1,000
// staged rows against a 30,000-row replica, where nested loops over the primary key take
// 4 ms. joinsOffSQL turns hash and merge joins off for the transaction while applySQL is
// planned and run (every execution is preceded by it, so every plan of it is made so), and
// joinsBackSQL restores what they were (joinsSaveSQL keeps it in a custom setting), so
// that no other statement of the transaction is planned without them. The staged rows'
// own anti-join against the updated ones is a NOT IN (a hashed subplan, which the settings
// do not touch; eosink_ord is never null).
const (
	joinsSaveSQL = `SELECT set_config('eosink.cdc_joins', current_setting('enable_hashjoin') || ' ' || current_setting('enable_mergejoin'), true)`
	joinsOffSQL  = `SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)`
	joinsBackSQL = `SELECT set_config('enable_hashjoin', split_part(current_setting('eosink.cdc_joins'), ' ', 1), true),
       set_config('enable_mergejoin', split_part(current_setting('eosink.cdc_joins'), ' ', 2), true)`
)

// truncate applies a truncate event: the exclusive merge lock in a statement of its own
// (it waits for the merges of other partitions to commit), then truncSQL, whose snapshot
// sees their rows.
func (t *target) truncate(ctx context.Context, tx pgx.Tx, ev *event) error {
	b := &pgx.Batch{}
	b.Queue(t.truncLockSQL, t.name)
	b.Queue(t.moveSQL, t.name)
	b.Queue(t.truncSQL, t.name, ev.commit, ev.lsn)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("cdc: truncate %s: merge lock: %w", t.name, err)
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("cdc: truncate %s: move positions: %w", t.name, err)
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("cdc: truncate %s: %w", t.name, err)
	}
	return br.Close()
}

// snapshotCheckSQL returns the staged snapshot reads (op r, commit 0) that contradict the
// replica: the key's stored position is a streamed change (commit > 0) at an LSN below the
// snapshot's, yet the replica's row is missing, deleted, or differs from the read (compared
// as text). A snapshot of a healthy source is taken after every change streamed before it,
// so its row equals what those changes left; a source that went back in time (a promoted
// standby that lagged, a restore from a backup) and was snapshotted again reads what its
// new timeline wrote. Only reads that are the key's last staged change count (a streamed
// change later in the batch supersedes the read). It runs only for batches that stage
// snapshot reads (stagedTable.reads), in the merge's round trip.
func (t *target) snapshotCheckSQL() string {
	var sameKey, tKey, cmpT, cmpS []string
	for _, k := range t.keys {
		q := pgx.Identifier{k}.Sanitize()
		sameKey = append(sameKey, fmt.Sprintf("o.%s = s.%s", q, q))
		tKey = append(tKey, fmt.Sprintf("t.%s = s.%s", q, q))
	}
	for _, c := range t.cols {
		if !contains(t.keys, c) {
			q := pgx.Identifier{c}.Sanitize()
			cmpT, cmpS = append(cmpT, "t."+q), append(cmpS, "s."+q)
		}
	}
	differs := "false"
	if len(cmpT) > 0 {
		differs = fmt.Sprintf("ROW(%s)::text IS DISTINCT FROM ROW(%s)::text", strings.Join(cmpT, ", "), strings.Join(cmpS, ", "))
	}
	return fmt.Sprintf(`SELECT s.%[1]s, p.commit_lsn, p.lsn, p.deleted, t.%[2]s IS NOT NULL, %[3]s::text
FROM %[4]s s JOIN %[5]s p ON p.target = $1 AND p.pk = %[3]s
LEFT JOIN %[6]s t ON %[7]s
WHERE s.%[8]s = 0 AND NOT s.%[9]s AND p.commit_lsn > 0 AND p.lsn < s.%[10]s
  AND NOT EXISTS (SELECT 1 FROM %[4]s o WHERE %[11]s AND o.%[8]s > 0)
  AND (p.deleted OR t.%[2]s IS NULL OR %[12]s)
ORDER BY s.%[1]s LIMIT 1`,
		colOrd, pgx.Identifier{t.keys[0]}.Sanitize(), t.posKey("s."), t.stage, t.keyPositions, t.name, strings.Join(tKey, " AND "),
		colCommit, colDel, colLSN, strings.Join(sameKey, " AND "), differs)
}

// intPositions is cdc_positions_int (migration 5) in the schema of positions, the quoted
// cdc_positions.
func intPositions(positions string) string { return besidePositions(positions, "cdc_positions_int") }

// besidePositions is the quoted table name in the schema of positions, the quoted
// cdc_positions.
func besidePositions(positions, name string) string {
	return strings.TrimSuffix(positions, `"cdc_positions"`) + pgx.Identifier{name}.Sanitize()
}

// loadFloors is cdc_load_floors (migration 6) in the schema of positions.
func loadFloors(positions string) string { return besidePositions(positions, "cdc_load_floors") }

// moveKeysSQL moves the target's key positions ($1) from the table from into
// t.keyPositions, the newer position winning where a key is in both. Migration 5 made
// cdc_positions_int for the keys of one integer column, which were in cdc_positions
// before; a key whose columns changed (DDL) may need its positions moved back. Every
// merge and truncate runs it first, in its own transaction: with nothing to move it is
// one index probe, and a move rolled back with its batch is made again by the next.
// Rows of a key shape the target no longer has (a jsonb key that is not one integer) are
// left where they are.
func (t *target) moveKeysSQL(from string) string {
	if t.intKey {
		return fmt.Sprintf(`WITH moved AS (DELETE FROM %[1]s p WHERE p.target = $1 AND p.pk <> 'null'::jsonb
    AND CASE WHEN jsonb_typeof(p.pk) <> 'array' OR jsonb_typeof(p.pk -> 0) IS DISTINCT FROM 'number' OR p.pk -> 1 IS NOT NULL THEN false
      ELSE (p.pk ->> 0) ~ '^-?[0-9]{1,19}$' AND (p.pk ->> 0)::numeric BETWEEN -9223372036854775808 AND 9223372036854775807 END
  RETURNING p.pk, p.commit_lsn, p.lsn, p.deleted)
INSERT INTO %[2]s AS p (target, pk, commit_lsn, lsn, deleted)
SELECT $1, (m.pk ->> 0)::bigint, m.commit_lsn, m.lsn, m.deleted FROM moved m
ON CONFLICT (target, pk) DO UPDATE SET commit_lsn = EXCLUDED.commit_lsn, lsn = EXCLUDED.lsn, deleted = EXCLUDED.deleted
WHERE (p.commit_lsn, p.lsn) < (EXCLUDED.commit_lsn, EXCLUDED.lsn)`, from, t.keyPositions)
	}
	return fmt.Sprintf(`WITH moved AS (DELETE FROM %[1]s p WHERE p.target = $1 RETURNING p.pk, p.commit_lsn, p.lsn, p.deleted)
INSERT INTO %[2]s AS p (target, pk, commit_lsn, lsn, deleted)
SELECT $1, jsonb_build_array(m.pk), m.commit_lsn, m.lsn, m.deleted FROM moved m
ON CONFLICT (target, pk) DO UPDATE SET commit_lsn = EXCLUDED.commit_lsn, lsn = EXCLUDED.lsn, deleted = EXCLUDED.deleted
WHERE (p.commit_lsn, p.lsn) < (EXCLUDED.commit_lsn, EXCLUDED.lsn)`, from, t.keyPositions)
}
