package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/mapping"
)

// rowFunc maps one record to its row values, appending to row.
type rowFunc func(r *sink.Record, row []any) ([]any, error)

// rows loads the table's columns (once; with create, creating the table) and encodes recs
// as COPY text rows; nil for no records, or none left by a where. It returns the records it encoded, in the order of
// the rows: recs itself, or fewer when a where filtered some out.
func (w *writer) rows(ctx context.Context, tx pgx.Tx, recs []sink.Record, rowFn rowFunc) ([]byte, []sink.Record, error) {
	if len(recs) == 0 {
		return nil, nil, nil
	}
	bytea, err := w.load(ctx, tx)
	if w.create && errors.Is(err, errNoTable) {
		if err := w.createTable(ctx, tx, recs); err != nil {
			return nil, nil, err
		}
		bytea, err = w.load(ctx, tx)
	}
	if err != nil {
		return nil, nil, err
	}
	return w.encode(recs, rowFn, bytea)
}

// copyBuffers are the COPY data buffers of batches, reused from one batch to the next
// (encode takes one, done gives it back).
var copyBuffers sync.Pool // of *[]byte

// encode maps each record to a COPY text row with rowFn; with a nil rowFn, it is the table
// plugin's plain insert: mapping.AppendCopy, which writes each row straight into the buffer.
// A record that the mapping's where filters out (mapping.ErrSkip) has no row: encode
// returns the records it encoded, recs itself when none was filtered out. A record that
// cannot be mapped is returned as a *sink.PoisonError, unless the schema registry failed
// (mapping.RecordError). Give the buffer back with done once it is sent.
func (w *writer) encode(recs []sink.Record, rowFn rowFunc, bytea []bool) ([]byte, []sink.Record, error) {
	var buf []byte
	if bp, ok := copyBuffers.Get().(*[]byte); ok {
		buf = (*bp)[:0]
	} else {
		buf = make([]byte, 0, len(recs)*128)
	}
	var kept []sink.Record // nil until a record is filtered out
	skip := func(i int) {
		if kept == nil {
			kept = append(make([]sink.Record, 0, len(recs)-1), recs[:i]...)
		}
	}
	keep := func(i int) {
		if kept != nil {
			kept = append(kept, recs[i])
		}
	}
	written := func() ([]byte, []sink.Record, error) {
		if kept == nil {
			return buf, recs, nil
		}
		if len(kept) == 0 { // every record filtered out: nothing to send
			w.done(buf)
			return nil, kept, nil
		}
		return buf, kept, nil
	}
	var err error
	if rowFn == nil {
		readsValue := w.readsValue()
		var scratch []byte
		for i := range recs {
			r := &recs[i]
			if r.Value == nil && readsValue {
				if err := w.m.Filter(r); errors.Is(err, mapping.ErrSkip) { // where: value != null
					skip(i)
					continue
				} else if err != nil {
					return nil, nil, mapping.RecordError(r, err)
				}
				return nil, nil, mapping.RecordError(r, errTombstone)
			}
			if buf, err = w.m.AppendCopy(buf, r, bytea, &scratch); err != nil {
				if errors.Is(err, mapping.ErrSkip) {
					skip(i)
					continue
				}
				return nil, nil, mapping.RecordError(r, err)
			}
			keep(i)
		}
		return written()
	}
	row := make([]any, 0, len(w.cols)+len(w.extra))
	for i := range recs {
		r := &recs[i]
		if row, err = rowFn(r, row[:0]); err != nil {
			if errors.Is(err, mapping.ErrSkip) {
				skip(i)
				continue
			}
			return nil, nil, mapping.RecordError(r, err)
		}
		if buf, err = mapping.AppendCopyRow(buf, row, bytea); err != nil {
			return nil, nil, sink.Poison(r, err)
		}
		keep(i)
	}
	return written()
}

// done gives back buf, a batch's COPY data from encode, once it has been sent.
func (w *writer) done(buf []byte) {
	if cap(buf) > 64<<20 { // a batch of huge records: let it go
		return
	}
	buf = buf[:0]
	copyBuffers.Put(&buf)
}

var errTombstone = errors.New("tombstone (null value) and the mapping reads the value")

// insertRow is the table plugin's rowFunc.
func (w *writer) insertRow(readsValue bool) rowFunc {
	return func(r *sink.Record, row []any) ([]any, error) {
		if r.Value == nil && readsValue {
			if err := w.m.Filter(r); err != nil { // a where may drop tombstones (value != null)
				return nil, err
			}
			return nil, errTombstone
		}
		return w.m.Row(r, row)
	}
}

// copyIn runs a COPY FROM STDIN with buf, the text-format rows of recs, as its data. A data
// error that PostgreSQL reports at a line of the data is about the record of that line: it
// is returned as that record's poison, naming the column (copyError).
func (w *writer) copyIn(ctx context.Context, tx pgx.Tx, buf []byte, sql string, recs []sink.Record) error {
	_, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(buf), sql)
	w.done(buf) // sent, or never to be: CopyFrom has returned
	if err != nil {
		return w.copyError(err, recs)
	}
	return nil
}

// copyWhere matches the context PostgreSQL gives an error of COPY FROM: `COPY t, line 3,
// column qty: "x"`, `COPY t, line 3: "..."` or `COPY t, line 3`.
var copyWhere = regexp.MustCompile(`(?m)^COPY .*?, line ([0-9]+)(?:, column (.*))?`)

// copyError turns a data error of COPY (SQLSTATE class 22 or 23, or 54000) whose context
// names a line of the data into a *sink.PoisonError for the record of that line, its
// reason naming the column when PostgreSQL does: "column qty: ERROR: invalid input syntax
// for type integer: "x" (SQLSTATE 22P02)". Other errors are returned as they are.
func (w *writer) copyError(err error, recs []sink.Record) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pgerr.Classify(err) != pgerr.Data {
		return err
	}
	m := copyWhere.FindStringSubmatch(pe.Where)
	if m == nil {
		return err
	}
	line, perr := strconv.Atoi(m[1])
	if perr != nil || line < 1 || line > len(recs) {
		return err
	}
	if col := w.copyColumn(m[2]); col != "" {
		err = fmt.Errorf("column %s: %w", col, err)
	}
	return sink.Poison(&recs[line-1], err)
}

// copyColumn finds the column at the start of rest, the context after "column ": `qty:
// "x"`, `qty: null input` or `qty`; "" when it is none of the COPY's columns.
func (w *writer) copyColumn(rest string) string {
	best := ""
	for _, c := range append(w.cols[:len(w.cols):len(w.cols)], w.extra...) {
		if (rest == c || strings.HasPrefix(rest, c+": ")) && len(c) > len(best) {
			best = c
		}
	}
	return best
}
