package cdc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
)

// Columns of the staging table besides the replicated ones.
const (
	colCommit = "eosink_commit"
	colLSN    = "eosink_lsn"
	colOrd    = "eosink_ord"
	colDel    = "eosink_del"
	colUnav   = "eosink_unavail" // int[] of the columns (indexes into cols) to keep from the replica's row
)

// target is a replica table as read from the catalog, with its statements.
type target struct {
	name                            string   // quoted, "replica"."items": the key of its positions
	cols                            []string // replicated columns, in the table's order
	types                           []string // format_type of each of cols
	shape                           []int64  // each of cols' type oid, typmod and collation oid: what its staging table is made of
	keys                            []string // primary key columns, in the key's order
	keyIdx                          []int    // index of each key column in cols
	keyKind                         []string // how each key column goes into the positions key (pkExpr)
	keyFn                           string   // the positions schema's cdc_key_json (pkExpr)
	intKey                          bool     // the key is one integer column: its positions are in cdc_positions_int (posKey)
	positions                       string   // quoted cdc_positions: the truncate watermark (pk 'null'), and the keys unless intKey
	keyPositions                    string   // quoted table of the keys' positions: cdc_positions_int if intKey, else positions
	moveSQL                         string   // merge.go: moves the keys' positions from the other table into keyPositions
	bytea                           []bool   // per staged column (cols, then the five above)
	colIdx                          map[string]int
	r                               route
	stage                           string // quoted temporary table, shared by the targets of one shape (build)
	stageSQL, copySQL               string // stageSQL: CREATE TEMP TABLE IF NOT EXISTS (stage.Sessions.Ready)
	lockSQL, positionsSQL, applySQL string // merge.go
	upsertSQL                       string // merge.go: applySQL for a batch without unavailable values
	snapSQL                         string // merge.go: snapshotCheckSQL
	truncLockSQL, truncSQL          string
	floors                          string      // quoted cdc_load_floors (load.go)
	loadSQL, loadCheckSQL, floorSQL string      // load.go: a fresh table's snapshot copied straight in (intKey only)
	noLoad                          atomic.Bool // load.go: a load found the table holding rows or positions
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
	rows, err := db.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.atttypid::int8, a.atttypmod, a.attcollation::int8,
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
	var typID, collation int64
	var typMod int32
	if _, err := pgx.ForEachRow(rows, []any{&col, &typ, &typID, &typMod, &collation, &pos}, func() error {
		if pos > 0 {
			keyPos[pos] = col
		} else if !r.replicated(col) {
			return nil
		}
		t.colIdx[col] = len(t.cols)
		t.cols = append(t.cols, col)
		t.types = append(t.types, typ)
		t.shape = append(t.shape, typID, int64(typMod), collation)
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
	t.bytea = append(t.bytea, false, false, false, false, false)
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
