package cdc

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// tableVerify compares one source table with its replica (Verify).
type tableVerify struct {
	p        *CDC
	src, dst Begin
	o        VerifyOptions

	srcName, dstName pgx.Identifier
	srcKey, dstKey   []vcolumn // the key columns with each database's types
	srcCmp, dstCmp   []vcolumn // the compared columns, likewise
	rep              TableReport
	diffs            []Difference
}

// keyRow is one row as compared: its key's text and the md5 of its compared columns.
type keyRow struct {
	key  []string
	hash string
}

// keyID is a map key for a key's text values.
func keyID(k []string) string {
	var b strings.Builder
	for _, s := range k {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String()
}

func (v *tableVerify) run(ctx context.Context, db string) error {
	if err := v.resolve(ctx, db); err != nil {
		return err
	}
	pending := map[string]keyRow{} // keys that differed in a chunk, with the source's hash ("" absent)
	var lsn int64                  // the source's LSN after its last chunk with a difference was read
	var after []string             // the last key of the previous chunk; nil before the first
	var chunks int64
	for {
		srcRows, chunkLSN, err := v.sourceChunk(ctx, after)
		if err != nil {
			return err
		}
		final := len(srcRows) < v.o.ChunkSize
		var upTo []string
		if !final {
			upTo = srcRows[len(srcRows)-1].key
		}
		dstRows, err := v.replicaRange(ctx, after, upTo)
		if err != nil {
			return err
		}
		v.rep.SourceRows += int64(len(srcRows))
		v.rep.ReplicaRows += int64(len(dstRows))
		if d := diffRows(srcRows, dstRows); len(d) > 0 {
			for id, r := range d {
				pending[id] = r
			}
			lsn = chunkLSN
		}
		chunks++
		if v.o.Progress != nil && (final || chunks%int64(v.o.ProgressEvery) == 0) {
			v.o.Progress(v.rep.Table, chunks, v.rep.SourceRows)
		}
		if final {
			break
		}
		after = upTo
	}
	return v.recheck(ctx, pending, lsn)
}

// diffRows returns the keys whose rows differ between src and dst, each with the source's
// hash ("" when the source lacks the key).
func diffRows(src, dst []keyRow) map[string]keyRow {
	out := map[string]keyRow{}
	in := make(map[string]string, len(dst))
	for _, r := range dst {
		in[keyID(r.key)] = r.hash
	}
	for _, r := range src {
		id := keyID(r.key)
		if h, ok := in[id]; !ok || h != r.hash {
			out[id] = r
		}
		delete(in, id)
	}
	for _, r := range dst {
		if _, ok := in[keyID(r.key)]; ok {
			out[keyID(r.key)] = keyRow{key: r.key}
		}
	}
	return out
}

// pendingKey is a key that differed, as last read: the source's hash ("" absent), the
// replica's, and whether that replica read came after the replica had passed the LSN of the
// source read before it with the source's row unchanged (one confirmation).
type pendingKey struct {
	key         []string
	src, dst    string
	inDst, once bool
}

// recheck settles the keys that differed. In rounds: it waits until the replica passed the
// source's LSN of the last read (or Wait ran out), reads the replica's rows, then the
// source's with its LSN again. A key equal on both sides was in flight. A key is reported
// when two rounds in a row found the replica past the source's LSN, the source's row
// unchanged and the replica's row unchanged (a row that changed and changed back on the
// source between two reads is not mistaken for a stable one), or when Wait ran out
// (Unsettled when the replica never passed the LSN).
func (v *tableVerify) recheck(ctx context.Context, diff map[string]keyRow, lsn int64) error {
	pending := make(map[string]*pendingKey, len(diff))
	for id, r := range diff {
		pending[id] = &pendingKey{key: r.key, src: r.hash}
	}
	deadline := time.Now().Add(v.o.Wait)
	for len(pending) > 0 {
		passed, err := v.waitPassed(ctx, lsn, deadline)
		if err != nil {
			return err
		}
		keys := make([][]string, 0, len(pending))
		for _, p := range pending {
			keys = append(keys, p.key)
		}
		dst, err := v.rows(ctx, v.dst, v.dstName, v.dstKey, v.dstCmp, keys)
		if err != nil {
			return err
		}
		var src map[string]string
		if err := inTx(ctx, v.src, func(tx pgx.Tx) error {
			var err error
			if src, err = v.rowsTx(ctx, tx, v.srcName, v.srcKey, v.srcCmp, keys); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint").Scan(&lsn)
		}); err != nil {
			return err
		}
		timedOut := !passed && !time.Now().Before(deadline)
		for id, p := range pending {
			sh, inSrc := src[id]
			dh, inDst := dst[id]
			confirmed := passed && sh == p.src
			switch {
			case inSrc == inDst && sh == dh:
				v.rep.Rechecked++
				delete(pending, id)
			case timedOut || confirmed && p.once && dh == p.dst && inDst == p.inDst:
				v.report(p.key, inSrc, inDst, !passed)
				delete(pending, id)
			default:
				p.once = confirmed
				p.src, p.dst, p.inDst = sh, dh, inDst
			}
		}
	}
	return nil
}

func (v *tableVerify) report(key []string, inSrc, inDst, unsettled bool) {
	d := Difference{Table: v.rep.Table, Target: v.rep.Target, Key: key, Unsettled: unsettled}
	switch {
	case !inDst:
		d.Kind = Missing
		v.rep.Missing++
	case !inSrc:
		d.Kind = Extra
		v.rep.Extra++
	default:
		d.Kind = Different
		v.rep.Different++
	}
	v.diffs = append(v.diffs, d)
}

// waitPassed waits, polling, until the replica has applied a change of the target at or
// beyond lsn (the largest lsn of its cdc_positions rows and of its load floor), or until deadline; it reports
// whether it passed.
func (v *tableVerify) waitPassed(ctx context.Context, lsn int64, deadline time.Time) (bool, error) {
	for poll := 50 * time.Millisecond; ; poll = min(2*poll, time.Second) {
		var applied int64
		if err := inTx(ctx, v.dst, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, "SELECT greatest((SELECT coalesce(max(lsn), 0) FROM "+v.p.positions+" WHERE target = $1), "+
				"(SELECT coalesce(max(lsn), 0) FROM "+intPositions(v.p.positions)+" WHERE target = $1), "+
				"(SELECT coalesce(max(lsn), 0) FROM "+loadFloors(v.p.positions)+" WHERE target = $1))", v.rep.Target).Scan(&applied)
		}); err != nil {
			return false, err
		}
		if applied >= lsn {
			return true, nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(min(poll, wait)):
		}
	}
}

// sourceChunk reads the source's next ChunkSize rows after the key after (nil: from the
// start) in key order, then the source's WAL insert LSN, which every change visible to the
// read is below.
func (v *tableVerify) sourceChunk(ctx context.Context, after []string) (rows []keyRow, lsn int64, err error) {
	err = inTx(ctx, v.src, func(tx pgx.Tx) error {
		q := "SELECT " + keyTexts(v.srcKey) + ", " + rowHash(v.srcCmp) + " FROM " + v.srcName.Sanitize()
		var args []any
		if after != nil {
			q += " WHERE (" + keyList(v.srcKey) + ") > (" + params(v.srcKey, 1) + ")"
			args = textArgs(after)
		}
		q += " ORDER BY " + keyList(v.srcKey) + " LIMIT " + strconv.Itoa(v.o.ChunkSize)
		var err error
		if rows, err = collect(ctx, tx, len(v.srcKey), q, args...); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint").Scan(&lsn)
	})
	return rows, lsn, err
}

// replicaRange reads the replica's rows with keys above after (nil: no bound) and up to
// upTo (nil: no bound), in the replica's key order.
func (v *tableVerify) replicaRange(ctx context.Context, after, upTo []string) (rows []keyRow, err error) {
	err = inTx(ctx, v.dst, func(tx pgx.Tx) error {
		q := "SELECT " + keyTexts(v.dstKey) + ", " + rowHash(v.dstCmp) + " FROM " + v.dstName.Sanitize()
		var where []string
		var args []any
		if after != nil {
			where = append(where, "("+keyList(v.dstKey)+") > ("+params(v.dstKey, 1)+")")
			args = append(args, textArgs(after)...)
		}
		if upTo != nil {
			where = append(where, "("+keyList(v.dstKey)+") <= ("+params(v.dstKey, len(args)+1)+")")
			args = append(args, textArgs(upTo)...)
		}
		if len(where) > 0 {
			q += " WHERE " + strings.Join(where, " AND ")
		}
		var err error
		rows, err = collect(ctx, tx, len(v.dstKey), q+" ORDER BY "+keyList(v.dstKey), args...)
		return err
	})
	return rows, err
}

// rows reads the rows of keys from one side, by keyID.
func (v *tableVerify) rows(ctx context.Context, db Begin, name pgx.Identifier, key, cmp []vcolumn, keys [][]string) (out map[string]string, err error) {
	err = inTx(ctx, db, func(tx pgx.Tx) error {
		out, err = v.rowsTx(ctx, tx, name, key, cmp, keys)
		return err
	})
	return out, err
}

func (v *tableVerify) rowsTx(ctx context.Context, tx pgx.Tx, name pgx.Identifier, key, cmp []vcolumn, keys [][]string) (map[string]string, error) {

	arrays := make([]any, len(key))
	us, casts := make([]string, len(key)), make([]string, len(key))
	for i := range key {
		col := make([]string, len(keys))
		for j, k := range keys {
			col[j] = k[i]
		}
		arrays[i] = col
		us[i] = fmt.Sprintf("$%d::text[]", i+1)
		casts[i] = fmt.Sprintf("u.u%d::%s", i+1, key[i].typ)
	}
	alias := make([]string, len(key))
	for i := range alias {
		alias[i] = fmt.Sprintf("u%d", i+1)
	}
	q := "SELECT " + keyTexts(key) + ", " + rowHash(cmp) + " FROM " + name.Sanitize() +
		" WHERE (" + keyList(key) + ") IN (SELECT " + strings.Join(casts, ", ") + " FROM unnest(" + strings.Join(us, ", ") +
		") AS u(" + strings.Join(alias, ", ") + "))"
	rows, err := collect(ctx, tx, len(key), q, arrays...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[keyID(r.key)] = r.hash
	}
	return out, nil
}

func collect(ctx context.Context, tx pgx.Tx, nkey int, q string, args ...any) ([]keyRow, error) {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (keyRow, error) {
		k := keyRow{key: make([]string, nkey)}
		dst := make([]any, nkey+1)
		for i := range k.key {
			dst[i] = &k.key[i]
		}
		dst[nkey] = &k.hash
		err := r.Scan(dst...)
		return k, err
	})
}

func keyList(key []vcolumn) string {
	s := make([]string, len(key))
	for i, c := range key {
		s[i] = pgx.Identifier{c.name}.Sanitize()
	}
	return strings.Join(s, ", ")
}

func keyTexts(key []vcolumn) string {
	s := make([]string, len(key))
	for i, c := range key {
		s[i] = pgx.Identifier{c.name}.Sanitize() + "::text"
	}
	return strings.Join(s, ", ")
}

// rowHash is the md5 of the compared columns' text, as a text array (NULL and 'NULL' stay
// apart). A numeric is compared by value: trim_scale drops the trailing zeros, which
// Debezium does not keep for a numeric without a declared scale.
func rowHash(cols []vcolumn) string {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = pgx.Identifier{c.name}.Sanitize() + "::text"
		if c.typ == "numeric" || strings.HasPrefix(c.typ, "numeric(") {
			s[i] = "trim_scale(" + pgx.Identifier{c.name}.Sanitize() + ")::text"
		}
	}
	return "md5(ARRAY[" + strings.Join(s, ", ") + "]::text)"
}

// params is ($from::text::type, ...) for the key's columns: key values travel as text.
func params(key []vcolumn, from int) string {
	s := make([]string, len(key))
	for i, c := range key {
		s[i] = fmt.Sprintf("$%d::text::%s", from+i, c.typ)
	}
	return strings.Join(s, ", ")
}

func textArgs(k []string) []any {
	out := make([]any, len(k))
	for i, s := range k {
		out[i] = s
	}
	return out
}
