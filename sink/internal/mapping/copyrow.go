package mapping

import (
	"fmt"

	"github.com/eosink/eosink/sink"
)

// AppendCopy maps r like Row and appends the row to dst as one line of COPY text, exactly
// what AppendCopyRow(dst, row, bytea) appends for the row Row gives, and returns the
// extended buffer. It is Row's fast path for a writer that only encodes the row: no []any,
// no string per row; text is escaped from the record straight into dst, so a row costs no
// allocation once dst and *scratch have grown. *scratch is working memory kept between
// calls (nil to start).
//
// Its errors are Row's (a *FieldError, or the side's) for the mapping, and AppendCopyRow's
// (wrapping ErrInvalidText) for the encoding; on error dst is returned with its original
// length. AppendCopy expects m to have passed Validate.
func (m *Mapping) AppendCopy(dst []byte, r *sink.Record, bytea []bool, scratch *[]byte) ([]byte, error) {
	orig := len(dst)
	var colArray [16]pathCol
	var cols []pathCol
	if len(m.Columns) <= len(colArray) {
		cols = colArray[:len(m.Columns)]
	} else {
		cols = make([]pathCol, len(m.Columns))
	}
	rd := reader{rec: r, dec: m.Decoder, alias: true,
		key:   side{data: r.Key, format: m.Key, paths: srcKeyPath},
		value: side{data: r.Value, format: m.Value, paths: srcValuePath}}
	buf := (*scratch)[:0]
	var encErr error // the first value AppendCopyRow would refuse
	defer func() { *scratch = buf[:0] }()
	if m.filtered() {
		if err := rd.filter(m, cols); err != nil {
			return dst[:orig], err
		}
	}
	for i := range m.Columns {
		c := &m.Columns[i]
		if i > 0 {
			dst = append(dst, '\t')
		}
		// Each value is encoded before the next is read: buf holds one column's text at a time.
		res, next, err := rd.eval(m.Columns, cols, i, buf[:0])
		buf = next
		if err == nil {
			res, buf, err = finish(c, res, buf)
		}
		if err != nil {
			if se := sideError(c.From.Side(), err); se != nil {
				return dst[:orig], se
			}
			return dst[:orig], &FieldError{Column: c.Name, Source: c.sourceText(), Err: err}
		}
		isBytea := i < len(bytea) && bytea[i]
		switch res.kind {
		case resNull:
			if c.Required {
				return dst[:orig], &FieldError{Column: c.Name, Source: c.sourceText(), Err: &detailError{ErrMissing, res.why}}
			}
			dst = append(dst, '\\', 'N')
		case resDirect:
			dst, err = appendCopyValue(dst, res.v, isBytea)
		case resBuf:
			dst, err = appendCopyText(dst, unsafeString(buf[res.start:res.end]), isBytea)
		case resText:
			dst, err = appendCopyText(dst, res.text, isBytea)
		}
		if err != nil && encErr == nil {
			// Row's errors come first, as with Row and then AppendCopyRow: read on.
			encErr = fmt.Errorf("mapping: COPY column %d: %w", i+1, err)
		}
	}
	if encErr != nil {
		return dst[:orig], encErr
	}
	return append(dst, '\n'), nil
}
