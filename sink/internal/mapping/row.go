package mapping

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/eosink/eosink/sink"
)

// Row decodes r and appends one value per column to dst[:0], in column order, and returns
// the extended slice; pass it back as dst for the next record to reuse it. Each value is
// nil (SQL NULL), a string in PostgreSQL's text input form, or a []byte (the whole key or
// value with the bytes format, aliasing r's memory like r itself). The strings do not
// alias r.
//
// Each side is scanned at most once, and only if some column reads it with the json
// format: one pass validates it and finds the values of all the paths the columns read. An error means r is poison: a side is not valid JSON, a required value is
// missing, or text is not valid UTF-8 or holds NUL. It is a *FieldError naming the column
// and the source expression. Row expects m to have passed Validate.
func (m *Mapping) Row(r *sink.Record, dst []any) ([]any, error) {
	dst = dst[:0]
	var colArray [16]pathCol
	var cols []pathCol
	if len(m.Columns) <= len(colArray) {
		cols = colArray[:len(m.Columns)]
	} else {
		cols = make([]pathCol, len(m.Columns))
	}
	rd := reader{rec: r, dec: m.Decoder,
		key:   side{data: r.Key, format: m.Key, paths: srcKeyPath},
		value: side{data: r.Value, format: m.Value, paths: srcValuePath}}

	// Text values are gathered in buf and become one string at the end, so that a row
	// costs one allocation for its text rather than one per column.
	var bufArray [512]byte
	buf := bufArray[:0]
	var pendArray [16]pending
	pend := pendArray[:0]
	if m.filtered() {
		if err := rd.filter(m, cols); err != nil {
			return dst[:0], err
		}
	}

	for i := range m.Columns {
		c := &m.Columns[i]
		res, next, err := rd.eval(m.Columns, cols, i, buf)
		buf = next
		if err == nil {
			res, buf, err = finish(c, res, buf)
		}
		if err != nil {
			if se := sideError(c.From.Side(), err); se != nil {
				return dst[:0], se
			}
			return dst[:0], &FieldError{Column: c.Name, Source: c.sourceText(), Err: err}
		}
		switch res.kind {
		case resNull:
			if c.Required {
				return dst[:0], &FieldError{Column: c.Name, Source: c.sourceText(), Err: &detailError{ErrMissing, res.why}}
			}
			dst = append(dst, nil)
		case resDirect:
			dst = append(dst, res.v)
		case resBuf:
			pend = append(pend, pending{col: i, start: res.start, end: res.end})
			dst = append(dst, nil)
		case resText: // not made with alias off; kept safe all the same
			dst = append(dst, strings.Clone(res.text))
		}
	}
	if len(pend) > 0 {
		text := string(buf)
		for _, p := range pend {
			dst[p.col] = text[p.start:p.end]
		}
	}
	return dst, nil
}

// Extract returns the value of src in r as Row would give it, nil when missing: for
// example an event id for deduplication. keyFormat and valueFormat say how r's key and
// value decode. An error is a *FieldError without a column name, and means r is poison.
func Extract(r *sink.Record, src Source, keyFormat, valueFormat Format) (any, error) {
	m := Mapping{Key: keyFormat, Value: valueFormat}
	return m.Extract(r, src)
}

// Extract is the package's Extract with m's formats and Decoder; m's columns play no part.
func (m *Mapping) Extract(r *sink.Record, src Source) (any, error) {
	return m.ExtractColumn(r, Column{From: src})
}

// ExtractColumn is Extract for the source of c, with c's Default and Cast applied (c's
// Required and Array play no part): a column's value alone, as Row gives it.
func (m *Mapping) ExtractColumn(r *sink.Record, c Column) (any, error) {
	columns := [1]Column{c}
	var cols [1]pathCol
	keyFormat, valueFormat := m.Key, m.Value
	rd := reader{rec: r, dec: m.Decoder,
		key:   side{data: r.Key, format: keyFormat, paths: srcKeyPath},
		value: side{data: r.Value, format: valueFormat, paths: srcValuePath}}
	var bufArray [64]byte
	buf := bufArray[:0]
	res, buf, err := rd.eval(columns[:], cols[:], 0, buf)
	if err == nil {
		res, buf, err = finish(&columns[0], res, buf)
	}
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return nil, err
		}
		return nil, &FieldError{Source: columns[0].sourceText(), Err: err}
	}
	switch res.kind {
	case resDirect:
		return res.v, nil
	case resBuf:
		return string(buf[res.start:res.end]), nil
	case resText:
		return strings.Clone(res.text), nil
	}
	return nil, nil
}

// bigText is the length above which a text value gets an allocation of its own rather
// than a place in the row's shared text, to avoid copying large values twice.
const bigText = 1024

// pending is a column whose value is buf[start:end] once buf is final.
type pending struct {
	col, start, end int
}

type resultKind uint8

const (
	resNull   resultKind = iota // the value is nil; why says why
	resDirect                   // the value is v
	resBuf                      // the value is the text buf[start:end]
	resText                     // the value is text, which may alias the record (AppendCopy only)
)

// result is one source's value in a record.
type result struct {
	kind       resultKind
	v          any
	text       string // resText
	start, end int
	why        string
	absent     bool // resNull because the source found nothing (not an explicit null): a default applies
}

func null(why string) result { return result{kind: resNull, why: why} }

// absent is null for a source that finds nothing, where a column's Default applies.
func absent(why string) result { return result{kind: resNull, why: why, absent: true} }

// finish applies c's Default to an absent value and c's Cast to a value that is not NULL.
func finish(c *Column, res result, buf []byte) (result, []byte, error) {
	if res.kind == resNull && res.absent && c.Default != nil {
		res, buf = copyText(*c.Default, buf)
	}
	if c.Cast == CastNone || res.kind == resNull {
		return res, buf, nil
	}
	var s string
	switch res.kind {
	case resBuf:
		// buf may grow while the cast appends to it; s keeps the old array alive if it moves,
		// and the cast appends after res.end otherwise.
		s = unsafeString(buf[res.start:res.end])
	case resText:
		s = res.text
	case resDirect:
		switch v := res.v.(type) {
		case string:
			s = v
		case []byte:
			s = unsafeString(v)
		default:
			return result{}, buf, fmt.Errorf("cast %v: unexpected %T", c.Cast, res.v)
		}
	}
	return c.Cast.apply(s, buf)
}

func direct(v any) result { return result{kind: resDirect, v: v} }

// side is a record's key or value while one record is read.
type side struct {
	data    []byte
	format  Format
	paths   sourceKind // srcKeyPath or srcValuePath: the sources with paths into this side
	scanned bool       // the JSON has been scanned, or a schema'd side decoded
	err     error      // why data is not valid JSON, or does not decode
	doc     string     // data, once scanned valid; it aliases data and must not escape
	tree    any        // the decoded tree of a schema'd side
}

// reader reads the columns of one record, scanning each side at most once. Its methods
// take the columns, and cols with one pathCol per column for what the scans find; they
// are not fields so that cols can stay on the stack.
type reader struct {
	rec        *sink.Record
	dec        Decoder // for schema'd formats
	key, value side
	// alias lets text results alias the record (resText) instead of being copied into the
	// row's own memory: for AppendCopy, which encodes each value before it returns.
	alias bool
	// ex is the record as expressions see it, made by the first expression.
	ex *exprInput
}

// text is copyText, or, when rd may alias the record, s itself.
func (rd *reader) text(s string, buf []byte) (result, []byte) {
	if rd.alias {
		return result{kind: resText, text: s}, buf
	}
	return copyText(s, buf)
}

// scan validates s as JSON on first use and finds the values of all the columns with a
// path into it, in one pass (one per 64 such columns).
func (rd *reader) scan(s *side, columns []Column, cols []pathCol) error {
	if s.scanned {
		return s.err
	}
	s.scanned = true
	if !utf8.Valid(s.data) {
		s.err = &detailError{ErrInvalidJSON, "not valid UTF-8"}
		return s.err
	}
	doc := unsafeString(s.data)
	for w := 0; w == 0 || w < len(columns); w += 64 {
		var mask uint64
		for j := w; j < len(columns) && j < w+64; j++ {
			if src := columns[j].From; src.kind == s.paths {
				cols[j] = newPathCol(src.arg)
				mask |= 1 << (j - w)
			}
		}
		if w > 0 && mask == 0 {
			continue
		}
		if err := scanJSON(doc, cols[w:], mask); err != nil {
			s.err = err
			return err
		}
	}
	s.doc = doc
	return nil
}

// eval returns the value of column j in the record. Text that aliases the record, and
// text made here, is appended to buf, which eval returns.
func (rd *reader) eval(columns []Column, cols []pathCol, j int, buf []byte) (result, []byte, error) {
	r := rd.rec
	src := columns[j].From
	switch src.kind {
	case srcKey:
		return rd.whole(&rd.key, columns, cols, j, "null key", buf)
	case srcValue:
		return rd.whole(&rd.value, columns, cols, j, "null value (tombstone)", buf)
	case srcKeyPath:
		return rd.field(&rd.key, columns, cols, j, "null key", buf)
	case srcValuePath:
		return rd.field(&rd.value, columns, cols, j, "null value (tombstone)", buf)
	case srcHeader:
		for i := len(r.Headers) - 1; i >= 0; i-- {
			h := &r.Headers[i]
			if h.Key != src.arg {
				continue
			}
			if h.Value == nil {
				return null("header value is null"), buf, nil
			}
			if err := checkTextBytes(h.Value); err != nil {
				return result{}, buf, err
			}
			res, buf := rd.text(unsafeString(h.Value), buf)
			return res, buf, nil
		}
		return absent("no such header"), buf, nil
	case srcTopic:
		if err := checkText(r.Topic); err != nil {
			return result{}, buf, err
		}
		return direct(r.Topic), buf, nil
	case srcPartition:
		start := len(buf)
		buf = strconv.AppendInt(buf, int64(r.Partition), 10)
		return result{kind: resBuf, start: start, end: len(buf)}, buf, nil
	case srcOffset:
		start := len(buf)
		buf = strconv.AppendInt(buf, r.Offset, 10)
		return result{kind: resBuf, start: start, end: len(buf)}, buf, nil
	case srcTimestamp:
		if r.Timestamp.IsZero() {
			return absent("zero timestamp"), buf, nil
		}
		t := r.Timestamp.UTC()
		if y := t.Year(); y < 1 || y > 9999 {
			return result{}, buf, &detailError{ErrTimestampRange, "year " + strconv.Itoa(y)}
		}
		start := len(buf)
		buf = t.AppendFormat(buf, time.RFC3339Nano)
		return result{kind: resBuf, start: start, end: len(buf)}, buf, nil
	}
	if e := columns[j].Expr; e != nil {
		return rd.expr(e, columns, cols, buf)
	}
	return result{}, buf, errors.New("the source is empty (zero Source)")
}

// whole returns a whole side: the key or the value.
func (rd *reader) whole(s *side, columns []Column, cols []pathCol, j int, why string, buf []byte) (result, []byte, error) {
	if s.data == nil {
		return absent(why), buf, nil
	}
	switch s.format {
	case Bytes:
		return direct(s.data), buf, nil
	case String:
		if err := checkTextBytes(s.data); err != nil {
			return result{}, buf, err
		}
		res, buf := rd.text(unsafeString(s.data), buf)
		return res, buf, nil
	case JSON:
		if err := rd.scan(s, columns, cols); err != nil {
			return result{}, buf, err
		}
		res, buf := rd.text(trimJSONSpace(s.doc), buf)
		return res, buf, nil
	case Avro, Protobuf, JSONSchema:
		return rd.schemaValue(s, columns[j].From, columns[j].Array, why, buf)
	}
	return result{}, buf, fmt.Errorf("invalid format %v", s.format)
}

// field returns the value that column j's path finds in a side with the json format.
func (rd *reader) field(s *side, columns []Column, cols []pathCol, j int, why string, buf []byte) (result, []byte, error) {
	if s.data == nil {
		return absent(why), buf, nil
	}
	if s.format != JSON {
		if s.format.Schemad() {
			return rd.schemaValue(s, columns[j].From, columns[j].Array, why, buf)
		}
		return result{}, buf, fmt.Errorf("a path needs the json format or a schema'd one, not %v (the mapping did not pass Validate)", s.format)
	}
	if err := rd.scan(s, columns, cols); err != nil {
		return result{}, buf, err
	}
	c := &cols[j]
	if !c.found {
		return absent("field absent"), buf, nil
	}
	text := s.doc[c.start:c.end]
	switch c.kind {
	case 'n':
		return null("JSON null"), buf, nil
	case 't':
		return direct("true"), buf, nil
	case 'f':
		return direct("false"), buf, nil
	case '"':
		if !c.esc {
			res, buf := rd.text(text, buf) // a piece of doc, already checked
			return res, buf, nil
		}
		if len(text) > bigText && !rd.alias {
			b := appendUnescaped(make([]byte, 0, len(text)), text)
			if bytes.IndexByte(b, 0) >= 0 {
				return result{}, buf, errNUL()
			}
			return direct(unsafeString(b)), buf, nil // b is new and never changes
		}
		start := len(buf)
		buf = appendUnescaped(buf, text)
		if bytes.IndexByte(buf[start:], 0) >= 0 { // from \u0000
			return result{}, buf[:start], errNUL()
		}
		return result{kind: resBuf, start: start, end: len(buf)}, buf, nil
	default: // '0' number, '{' object or array: the literal text
		res, buf := rd.text(text, buf)
		return res, buf, nil
	}
}

// copyText returns s, which may alias the record, as text of the row's own: appended to
// buf, or cloned when large.
func copyText(s string, buf []byte) (result, []byte) {
	if len(s) > bigText {
		return direct(strings.Clone(s)), buf
	}
	start := len(buf)
	buf = append(buf, s...)
	return result{kind: resBuf, start: start, end: len(buf)}, buf
}

// unsafeString returns b as a string without copying. The string must not outlive this
// call of Row or Extract, nor be kept in a value: callers copy what they keep.
func unsafeString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
