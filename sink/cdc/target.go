package cdc

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
)

// Columns of the staging table besides the replicated ones.
const (
	colCommit = "eosink_commit"
	colLSN    = "eosink_lsn"
	colOrd    = "eosink_ord"
	colDel    = "eosink_del"
)

// target is a replica table as read from the catalog, with its statements.
type target struct {
	name                                  string   // quoted, "replica"."items": the key of its positions
	cols                                  []string // replicated columns, in the table's order
	types                                 []string // format_type of each of cols
	keys                                  []string // primary key columns, in the key's order
	keyIdx                                []int    // index of each key column in cols
	keyKind                               []string // how each key column goes into the positions key (pkExpr)
	keyFn                                 string   // the positions schema's cdc_key_json (pkExpr)
	bytea                                 []bool   // per staged column (cols, then the four above)
	colIdx                                map[string]int
	r                                     route
	stage                                 string
	stageSQL, copySQL, mergeSQL, truncSQL string
}

// errNoTable: the target table does not exist.
var errNoTable = errors.New("does not exist")

// loadTarget reads table's columns and primary key. A missing table (errNoTable) or one
// without a primary key is an error naming it. mine reports that the transaction of db
// holds the table's ACCESS EXCLUSIVE lock, which CREATE TABLE and ALTER TABLE take and
// keep to the end of the transaction: the table may then hold this transaction's
// uncommitted DDL, and the target must not be cached for others (a rollback would leave
// the cache describing a table, or columns, that do not exist).
func loadTarget(ctx context.Context, db sink.DB, table pgx.Identifier, r route, positions string) (t *target, mine bool, err error) {
	name := table.Sanitize()
	var exists bool
	if err := db.QueryRow(ctx, `SELECT c IS NOT NULL, c IS NOT NULL AND EXISTS (SELECT 1 FROM pg_locks
  WHERE pid = pg_backend_pid() AND locktype = 'relation' AND relation = c AND mode = 'AccessExclusiveLock' AND granted)
FROM to_regclass($1) c`, name).Scan(&exists, &mine); err != nil {
		return nil, false, fmt.Errorf("cdc: target table %s: %w", name, err)
	}
	if !exists {
		return nil, false, fmt.Errorf("cdc: target table %s %w (create it with the source table's columns and primary key, or set create: true)", name, errNoTable)
	}
	rows, err := db.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod),
       coalesce((SELECT k.n FROM unnest(i.indkey) WITH ORDINALITY k(att, n) WHERE k.att = a.attnum), 0)::int
FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
ORDER BY a.attnum`, name)
	if err != nil {
		return nil, false, fmt.Errorf("cdc: target table %s: read columns: %w", name, err)
	}
	t = &target{name: name, colIdx: map[string]int{}, r: r}
	keyPos := map[int]string{}
	var col, typ string
	var pos int
	if _, err := pgx.ForEachRow(rows, []any{&col, &typ, &pos}, func() error {
		if pos > 0 {
			keyPos[pos] = col
		} else if !r.replicated(col) {
			return nil
		}
		t.colIdx[col] = len(t.cols)
		t.cols = append(t.cols, col)
		t.types = append(t.types, typ)
		return nil
	}); err != nil {
		return nil, false, fmt.Errorf("cdc: target table %s: read columns: %w", name, err)
	}
	if len(keyPos) == 0 {
		return nil, false, fmt.Errorf("cdc: target table %s has no primary key; cdc applies changes by primary key", name)
	}
	for i := 1; i <= len(keyPos); i++ {
		t.keys = append(t.keys, keyPos[i])
		t.keyIdx = append(t.keyIdx, t.colIdx[keyPos[i]])
	}
	t.keyFn = keyFuncOf(positions)
	if err := t.keyKinds(ctx, db); err != nil {
		return nil, false, err
	}
	for _, typ := range t.types {
		t.bytea = append(t.bytea, typ == "bytea")
	}
	t.bytea = append(t.bytea, false, false, false, false)
	t.build(positions)
	return t, mine, nil
}

func quote(cols []string, prefix string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = prefix + pgx.Identifier{c}.Sanitize()
	}
	return strings.Join(q, ", ")
}

// build writes the statements. A batch's changes of the table are copied into a temporary
// staging table, then one statement keeps the last change per key (by source position,
// then offset), records each key's new position in the positions table (keyed by pkExpr,
// the same under every session setting) unless the stored
// one is as new or newer (the ON CONFLICT ... WHERE re-checks it under the row lock, so
// concurrent partitions cannot race past it), and applies only the changes that won:
// deletes, then upserts.
func (t *target) build(positions string) {
	// The staging table lives as long as the session: its name changes with the columns,
	// so that a session never copies into one made for the table before a column was added.
	h := fnv.New64a()
	h.Write([]byte(t.name))
	for i, c := range t.cols {
		h.Write([]byte{0})
		h.Write([]byte(c))
		h.Write([]byte{0})
		h.Write([]byte(t.types[i]))
	}
	t.stage = pgx.Identifier{fmt.Sprintf("eosink_cdc_%x", h.Sum64())}.Sanitize()
	cols := quote(t.cols, "")
	t.stageSQL = fmt.Sprintf(`CREATE TEMP TABLE IF NOT EXISTS %s ON COMMIT DELETE ROWS AS
SELECT %s, 0::bigint AS %s, 0::bigint AS %s, 0::bigint AS %s, false AS %s FROM %s WITH NO DATA`,
		t.stage, cols, colCommit, colLSN, colOrd, colDel, t.name)
	t.copySQL = fmt.Sprintf("COPY %s (%s, %s, %s, %s, %s) FROM STDIN", t.stage, cols, colCommit, colLSN, colOrd, colDel)
	keys := quote(t.keys, "")
	var join, set []string
	for _, k := range t.keys {
		q := pgx.Identifier{k}.Sanitize()
		join = append(join, fmt.Sprintf("t.%s = a.%s", q, q))
	}
	for _, c := range t.cols {
		if !contains(t.keys, c) {
			q := pgx.Identifier{c}.Sanitize()
			set = append(set, fmt.Sprintf("%s = EXCLUDED.%s", q, q))
		}
	}
	conflict := "DO NOTHING"
	if len(set) > 0 {
		conflict = "DO UPDATE SET " + strings.Join(set, ", ")
	}
	t.mergeSQL = fmt.Sprintf(`WITH staged AS (DELETE FROM %[1]s RETURNING *),
last AS (SELECT DISTINCT ON (%[2]s) *, %[12]s AS eosink_pk FROM staged
         ORDER BY %[2]s, %[3]s DESC, %[4]s DESC, %[5]s DESC),
won AS (INSERT INTO %[6]s AS p (target, pk, commit_lsn, lsn, deleted)
        SELECT $1, eosink_pk, %[3]s, %[4]s, %[7]s FROM last l
        WHERE NOT EXISTS (SELECT 1 FROM %[6]s w WHERE w.target = $1 AND w.pk = 'null'::jsonb
                          AND (l.%[3]s, l.%[4]s) <= (w.commit_lsn, w.lsn))
        ON CONFLICT (target, pk) DO UPDATE SET commit_lsn = EXCLUDED.commit_lsn, lsn = EXCLUDED.lsn, deleted = EXCLUDED.deleted
        WHERE (p.commit_lsn, p.lsn) < (EXCLUDED.commit_lsn, EXCLUDED.lsn)
        RETURNING p.pk),
applied AS (SELECT l.* FROM last l JOIN won ON won.pk = l.eosink_pk),
deleted AS (DELETE FROM %[8]s t USING applied a WHERE a.%[7]s AND %[9]s)
INSERT INTO %[8]s AS t (%[10]s) SELECT %[10]s FROM applied WHERE NOT %[7]s
ON CONFLICT (%[2]s) %[11]s`,
		t.stage, keys, colCommit, colLSN, colOrd, positions, colDel, t.name, strings.Join(join, " AND "), cols, conflict, t.pkExpr(""))
	// A truncate deletes the rows whose position is older than its own, marks their
	// positions deleted, and records itself as the table's watermark (pk 'null'): a change
	// at or before it is never applied afterwards.
	t.truncSQL = fmt.Sprintf(`WITH mark AS (
  INSERT INTO %[1]s AS p (target, pk, commit_lsn, lsn, deleted) VALUES ($1, 'null'::jsonb, $2, $3, true)
  ON CONFLICT (target, pk) DO UPDATE SET commit_lsn = EXCLUDED.commit_lsn, lsn = EXCLUDED.lsn
  WHERE (p.commit_lsn, p.lsn) < (EXCLUDED.commit_lsn, EXCLUDED.lsn) RETURNING 1),
gone AS (DELETE FROM %[2]s t WHERE EXISTS (SELECT 1 FROM mark) AND NOT EXISTS (
  SELECT 1 FROM %[1]s p WHERE p.target = $1 AND p.pk = %[3]s AND (p.commit_lsn, p.lsn) > ($2, $3)))
UPDATE %[1]s p SET deleted = true, commit_lsn = $2, lsn = $3
WHERE EXISTS (SELECT 1 FROM mark) AND p.target = $1 AND p.pk <> 'null'::jsonb AND (p.commit_lsn, p.lsn) < ($2, $3)`,
		positions, t.name, t.pkExpr("t."))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
