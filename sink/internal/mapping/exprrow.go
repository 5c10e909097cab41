package mapping

import "github.com/eosink/eosink/sink"

// This file is where Row and AppendCopy meet expressions: a column's Expr, a Mapping's
// Where and Checks.

// input returns the record as rd's expressions see it.
func (rd *reader) input() *exprInput {
	if rd.ex == nil {
		rd.ex = &exprInput{rec: rd.rec, keyFormat: rd.key.format, valueFormat: rd.value.format, size: -1}
	}
	return rd.ex
}

// prepare readies rd's input for e: a json side that e reads is scanned by rd first, once
// for the expressions and the columns' paths alike, then decoded for e. An error is a
// *FieldError for the side.
func (rd *reader) prepare(e *Expr, columns []Column, cols []pathCol) (*exprInput, error) {
	in := rd.input()
	if e.key && !in.keyDone && rd.key.format == JSON && rd.key.data != nil {
		if err := rd.scan(&rd.key, columns, cols); err != nil {
			return nil, &FieldError{Source: "key", Err: err}
		}
	}
	if e.value && !in.valueDone && rd.value.format == JSON && rd.value.data != nil {
		if err := rd.scan(&rd.value, columns, cols); err != nil {
			return nil, &FieldError{Source: "value", Err: err}
		}
	}
	return in, in.prepare(e)
}

// expr returns the value of a column's expression (see exprValue).
func (rd *reader) expr(e *Expr, columns []Column, cols []pathCol, buf []byte) (result, []byte, error) {
	in, err := rd.prepare(e, columns, cols)
	if err != nil {
		return result{}, buf, err
	}
	out, err := e.eval(in)
	if err != nil {
		return result{}, buf, err
	}
	return rd.exprValue(out, buf)
}

// filter applies m's Where and Checks to rd's record: ErrSkip, a *CheckError, or an
// evaluation's error. cols has one pathCol per column of m, as for eval.
func (rd *reader) filter(m *Mapping, cols []pathCol) error {
	if e := m.Where; e != nil {
		in, err := rd.prepare(e, m.Columns, cols)
		if err != nil {
			return err
		}
		ok, err := e.condition(in)
		if err != nil {
			return &FieldError{Source: "where " + e.text, Err: err}
		}
		if !ok {
			return ErrSkip
		}
	}
	for _, c := range m.Checks {
		in, err := rd.prepare(c.Expr, m.Columns, cols)
		if err != nil {
			return err
		}
		ok, err := c.Expr.condition(in)
		if err != nil {
			return &FieldError{Source: "check " + c.Expr.text, Err: err}
		}
		if !ok {
			return &CheckError{Expr: c.Expr.text, Message: c.Message}
		}
	}
	return nil
}

// Filter applies m's Where and Checks to r alone, as Row does first: nil when r is kept,
// ErrSkip when Where filters it out, a *CheckError or another error (poison) otherwise.
// For a record that is not mapped to a row, such as a tombstone that deletes.
func (m *Mapping) Filter(r *sink.Record) error {
	if !m.filtered() {
		return nil
	}
	rd := reader{rec: r, dec: m.Decoder,
		key:   side{data: r.Key, format: m.Key, paths: srcKeyPath},
		value: side{data: r.Value, format: m.Value, paths: srcValuePath}}
	return rd.filter(m, make([]pathCol, len(m.Columns)))
}
