package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// canonical is one row as the hash reads it, the same text in Go and in SQL (cdcHashSQL).
func (r *cdcRow) canonical(id int64) string {
	abs, sign := r.cents, ""
	if abs < 0 {
		abs, sign = -abs, "-"
	}
	note := `\N`
	if r.note != nil {
		note = *r.note
	}
	return fmt.Sprintf("%d|%s|%s%d.%02d|%d|%s|%s|%s", id, r.account, sign, abs/100, abs%100, r.qty, note,
		microText(r.updated), microText(r.booked))
}

// expectedHash is the count and md5 of the final state, rows in id order, one per line.
func (d *cdcData) expectedHash() (int64, string) {
	ids := make([]int64, 0, len(d.final))
	for id := range d.final {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	h := md5.New()
	for i, id := range ids {
		if i > 0 {
			h.Write([]byte{'\n'})
		}
		h.Write([]byte(d.final[id].canonical(id)))
	}
	return int64(len(ids)), hex.EncodeToString(h.Sum(nil))
}

const cdcHashSQL = `SELECT count(*), coalesce(md5(string_agg(concat_ws('|', id, account, amount, qty, coalesce(note, '\N'),
  to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), to_char(booked_at, 'YYYY-MM-DD"T"HH24:MI:SS.US')),
  E'\n' ORDER BY id)), md5('')) FROM %s`

// Verification compares a table with the final state computed from the produced events.
type Verification struct {
	ExpectedRows int64  `json:"expected_rows"`
	Rows         int64  `json:"rows"`
	ExpectedHash string `json:"expected_md5"`
	Hash         string `json:"md5"`
	Missing      int64  `json:"missing"`   // expected keys not in the table
	Extra        int64  `json:"extra"`     // keys in the table that should not be (deleted, or never produced)
	Different    int64  `json:"different"` // keys in both with other contents
	OK           bool   `json:"ok"`
}

func (v *Verification) String() string {
	if v.OK {
		return fmt.Sprintf("verified: %d rows, md5 %s equal to the expected state", v.Rows, v.Hash)
	}
	return fmt.Sprintf("MISMATCH: %d rows (expected %d), md5 %s (expected %s), %d missing, %d extra, %d different",
		v.Rows, v.ExpectedRows, v.Hash, v.ExpectedHash, v.Missing, v.Extra, v.Different)
}

// loadExpected writes the expected final state into bench.cdc_expected (for the row-level
// diff of a mismatch) and checks that SQL hashes it as Go does.
func (b *bench) loadExpected(ctx context.Context, d *cdcData) error {
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	e := pgx.Identifier{cdcSchema, "cdc_expected"}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+e+"; CREATE TABLE "+e+" ("+cdcColumns+")"); err != nil {
		return err
	}
	rows := make([][]any, 0, len(d.final))
	for id, r := range d.final {
		var note any
		if r.note != nil {
			note = *r.note
		}
		rows = append(rows, []any{id, r.account, pgtype.Numeric{Int: big.NewInt(r.cents), Exp: -2, Valid: true}, r.qty, note,
			time.UnixMicro(r.updated).UTC(), time.UnixMicro(r.booked).UTC()})
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{cdcSchema, "cdc_expected"},
		[]string{"id", "account", "amount", "qty", "note", "updated_at", "booked_at"}, pgx.CopyFromRows(rows)); err != nil {
		return err
	}
	var n int64
	var h string
	if err := conn.QueryRow(ctx, fmt.Sprintf(cdcHashSQL, e)).Scan(&n, &h); err != nil {
		return err
	}
	en, eh := d.expectedHash()
	if n != en || h != eh {
		return fmt.Errorf("the bench's own hashes disagree: SQL %d rows md5 %s, Go %d rows md5 %s", n, h, en, eh)
	}
	return nil
}

// verifyCDC compares table with the expected final state: count and md5, and the rows
// that differ.
func (b *bench) verifyCDC(ctx context.Context, d *cdcData, table string) (*Verification, error) {
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	v := &Verification{}
	v.ExpectedRows, v.ExpectedHash = d.expectedHash()
	t := pgx.Identifier{cdcSchema, table}.Sanitize()
	if err := conn.QueryRow(ctx, fmt.Sprintf(cdcHashSQL, t)).Scan(&v.Rows, &v.Hash); err != nil {
		return nil, err
	}
	cols := func(a string) string {
		var s []string
		for _, c := range []string{"account", "amount", "qty", "note", "updated_at", "booked_at"} {
			s = append(s, a+"."+c)
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE t.id IS NULL), count(*) FILTER (WHERE e.id IS NULL),
  count(*) FILTER (WHERE t.id IS NOT NULL AND e.id IS NOT NULL AND `+cols("t")+` IS DISTINCT FROM `+cols("e")+`)
FROM `+t+` t FULL JOIN `+pgx.Identifier{cdcSchema, "cdc_expected"}.Sanitize()+` e ON e.id = t.id`).Scan(&v.Missing, &v.Extra, &v.Different); err != nil {
		return nil, err
	}
	v.OK = v.Rows == v.ExpectedRows && v.Hash == v.ExpectedHash && v.Missing == 0 && v.Extra == 0 && v.Different == 0
	return v, nil
}
