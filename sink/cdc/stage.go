package cdc

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink/internal/mapping"
)

// stagedTable accumulates one batch's changes of one target as COPY text.
type stagedTable struct {
	t   *target
	buf []byte
	row []any
}

// add stages the rows of one change: an upsert of after for c, r and u (and, for a u that
// changes the primary key, a delete of the old key), a delete for d.
func (s *stagedTable) add(ev *event, ord int) error {
	t := s.t
	ord *= 2 // room for the delete of an old key before the upsert of its new one
	switch ev.op {
	case "c", "r", "u":
		if ev.after == nil {
			return fmt.Errorf("cdc: op %s without an after image", ev.op)
		}
		row, err := t.row(ev.after, false)
		if err != nil {
			return err
		}
		if ev.op == "u" && ev.before != nil {
			old, err := t.keyRow(ev.before, nil)
			if err != nil {
				return err
			}
			if !sameKey(t, old, row) {
				if err := s.append(old, ev, ord, true); err != nil {
					return err
				}
			}
		}
		return s.append(row, ev, ord+1, false)
	case "d":
		row, err := t.keyRow(ev.before, ev.key)
		if err != nil {
			return err
		}
		return s.append(row, ev, ord+1, true)
	}
	return fmt.Errorf("cdc: op %q", ev.op)
}

func (s *stagedTable) append(row []any, ev *event, ord int, del bool) error {
	row = append(row, strconv.FormatInt(ev.commit, 10), strconv.FormatInt(ev.lsn, 10), strconv.Itoa(ord), strconv.FormatBool(del))
	buf, err := mapping.AppendCopyRow(s.buf, row, s.t.bytea)
	if err != nil {
		return err
	}
	s.buf = buf
	return nil
}

// apply copies the staged rows and merges them.
func (s *stagedTable) apply(ctx context.Context, tx pgx.Tx) error {
	if len(s.buf) == 0 {
		return nil
	}
	t := s.t
	if _, err := tx.Exec(ctx, t.stageSQL); err != nil {
		return fmt.Errorf("cdc: staging table for %s: %w", t.name, err)
	}
	if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(s.buf), t.copySQL); err != nil {
		return fmt.Errorf("cdc: copy into the staging table of %s: %w", t.name, err)
	}
	if _, err := tx.Exec(ctx, t.mergeSQL, t.name); err != nil {
		return fmt.Errorf("cdc: merge into %s: %w", t.name, err)
	}
	return nil
}

// row converts an image into the table's replicated columns. A field of the image that is
// replicated but has no column is an error: data would be lost silently.
func (t *target) row(img image, keyOnly bool) ([]any, error) {
	row := make([]any, len(t.cols))
	for f, v := range img {
		i, ok := t.colIdx[f]
		if !ok {
			if t.r.replicated(f) && !keyOnly {
				return nil, fmt.Errorf("cdc: field %q has no column in %s (exclude it to drop it)", f, t.name)
			}
			continue
		}
		if keyOnly && !contains(t.keys, f) {
			continue
		}
		v.t.decimals = t.r.decimals
		cv, err := convert(v, t.types[i])
		if err != nil {
			return nil, fmt.Errorf("cdc: field %q: %w", f, err)
		}
		row[i] = cv
	}
	for _, k := range t.keyIdx {
		if row[k] == nil {
			return nil, fmt.Errorf("cdc: primary key column %q of %s missing from the event", t.cols[k], t.name)
		}
	}
	return row, nil
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
			return t.row(key, true)
		}
	}
	if img == nil {
		return nil, fmt.Errorf("cdc: delete of %s without its key (no key fields and no before image)", t.name)
	}
	return t.row(img, true)
}

func sameKey(t *target, a, b []any) bool {
	for _, k := range t.keyIdx {
		if fmt.Sprint(a[k]) != fmt.Sprint(b[k]) {
			return false
		}
	}
	return true
}
