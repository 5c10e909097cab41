package cdc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeAny decodes one JSON value the way encoding/json's Decoder with UseNumber does into
// an any: objects as map[string]any (a repeated name keeps its last value), arrays as []any,
// numbers as json.Number, strings unescaped with invalid UTF-8 replaced by U+FFFD, and
// true, false, null. It returns the offset after the value; the caller checks what follows.
//
// It exists for speed: a change event's payload is decoded for every record, and
// encoding/json builds maps through reflection. FuzzDecodeAny checks it against
// encoding/json.
func decodeAny(data []byte) (v any, end int, err error) {
	d := anyDecoder{data: data}
	i := d.space(0)
	v, i, err = d.value(i, 0)
	if err != nil {
		return nil, 0, err
	}
	return v, i, nil
}

type anyDecoder struct {
	data []byte
	buf  []byte // scratch for unescaping
}

// maxDepth bounds nesting, as encoding/json does (10000).
const maxDepth = 10000

var errDepth = errors.New("exceeded max depth")

func (d *anyDecoder) syntax(i int, what string) error {
	if i >= len(d.data) {
		return errors.New("unexpected end of JSON input")
	}
	return fmt.Errorf("invalid character %s %s at offset %d", strconv.QuoteRune(rune(d.data[i])), what, i)
}

func (d *anyDecoder) space(i int) int {
	for i < len(d.data) {
		switch d.data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func (d *anyDecoder) value(i, depth int) (any, int, error) {
	if i >= len(d.data) {
		return nil, i, d.syntax(i, "")
	}
	switch c := d.data[i]; {
	case c == '{':
		return d.object(i+1, depth+1)
	case c == '[':
		return d.array(i+1, depth+1)
	case c == '"':
		s, j, err := d.str(i + 1)
		return s, j, err
	case c == '-' || (c >= '0' && c <= '9'):
		j, ok := d.number(i)
		if !ok {
			return nil, j, d.syntax(j, "in numeric literal")
		}
		return json.Number(d.data[i:j]), j, nil
	case c == 't':
		return d.literal(i, "true", true)
	case c == 'f':
		return d.literal(i, "false", false)
	case c == 'n':
		return d.literal(i, "null", nil)
	default:
		return nil, i, d.syntax(i, "looking for beginning of value")
	}
}

func (d *anyDecoder) literal(i int, lit string, v any) (any, int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(d.data) || d.data[i+k] != lit[k] {
			return nil, i + k, d.syntax(i+k, "in literal")
		}
	}
	return v, i + len(lit), nil
}

func (d *anyDecoder) object(i, depth int) (any, int, error) {
	if depth > maxDepth {
		return nil, i, errDepth
	}
	m := map[string]any{}
	i = d.space(i)
	if i < len(d.data) && d.data[i] == '}' {
		return m, i + 1, nil
	}
	for {
		if i >= len(d.data) || d.data[i] != '"' {
			return nil, i, d.syntax(i, "looking for beginning of object key string")
		}
		k, j, err := d.key(i + 1)
		if err != nil {
			return nil, j, err
		}
		i = d.space(j)
		if i >= len(d.data) || d.data[i] != ':' {
			return nil, i, d.syntax(i, "after object key")
		}
		v, j, err := d.value(d.space(i+1), depth)
		if err != nil {
			return nil, j, err
		}
		m[k] = v
		i = d.space(j)
		if i >= len(d.data) {
			return nil, i, d.syntax(i, "")
		}
		switch d.data[i] {
		case ',':
			i = d.space(i + 1)
		case '}':
			return m, i + 1, nil
		default:
			return nil, i, d.syntax(i, "after object key:value pair")
		}
	}
}

func (d *anyDecoder) array(i, depth int) (any, int, error) {
	if depth > maxDepth {
		return nil, i, errDepth
	}
	a := []any{}
	i = d.space(i)
	if i < len(d.data) && d.data[i] == ']' {
		return a, i + 1, nil
	}
	for {
		v, j, err := d.value(i, depth)
		if err != nil {
			return nil, j, err
		}
		a = append(a, v)
		i = d.space(j)
		if i >= len(d.data) {
			return nil, i, d.syntax(i, "")
		}
		switch d.data[i] {
		case ',':
			i = d.space(i + 1)
		case ']':
			return a, i + 1, nil
		default:
			return nil, i, d.syntax(i, "after array element")
		}
	}
}

// number scans a JSON number starting at i; it returns the offset after it and whether it
// is well formed.
func (d *anyDecoder) number(i int) (int, bool) {
	b := d.data
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i, true
}

// envelopeKey returns b as a string without allocating when it is one of the object keys
// of a Debezium change event's envelope and source block. A switch, not a map: the
// compiler's search by length and bytes costs a third of a map lookup's hash.
func envelopeKey(b []byte) (string, bool) {
	switch string(b) {
	case "before":
		return "before", true
	case "after":
		return "after", true
	case "source":
		return "source", true
	case "op":
		return "op", true
	case "ts_ms":
		return "ts_ms", true
	case "ts_us":
		return "ts_us", true
	case "ts_ns":
		return "ts_ns", true
	case "transaction":
		return "transaction", true
	case "version":
		return "version", true
	case "connector":
		return "connector", true
	case "name":
		return "name", true
	case "snapshot":
		return "snapshot", true
	case "db":
		return "db", true
	case "sequence":
		return "sequence", true
	case "schema":
		return "schema", true
	case "table":
		return "table", true
	case "txId":
		return "txId", true
	case "lsn":
		return "lsn", true
	case "xmin":
		return "xmin", true
	case "id":
		return "id", true
	case "total_order":
		return "total_order", true
	case "data_collection_order":
		return "data_collection_order", true
	case "server_id":
		return "server_id", true
	case "gtid":
		return "gtid", true
	case "file":
		return "file", true
	case "pos":
		return "pos", true
	case "row":
		return "row", true
	case "thread":
		return "thread", true
	case "query":
		return "query", true
	case "change_lsn":
		return "change_lsn", true
	case "commit_lsn":
		return "commit_lsn", true
	case "event_serial_no":
		return "event_serial_no", true
	case "scn":
		return "scn", true
	case "payload":
		return "payload", true
	}
	return "", false
}

// key is str for an object key: a key without escapes that is an envelopeKey costs no
// allocation.
func (d *anyDecoder) key(i int) (string, int, error) {
	if end := bytes.IndexByte(d.data[i:], '"'); end >= 0 {
		if k, ok := envelopeKey(d.data[i : i+end]); ok {
			return k, i + end + 1, nil
		}
	}
	return d.str(i)
}

// str decodes a string whose opening quote is before i; it returns the offset after the
// closing quote.
func (d *anyDecoder) str(i int) (string, int, error) {
	b := d.data
	start := i
	// The common case: no escape, all ASCII or valid UTF-8.
	for i < len(b) {
		c := b[i]
		if c == '"' {
			s := b[start:i]
			if utf8.Valid(s) {
				return string(s), i + 1, nil
			}
			break
		}
		if c == '\\' || c < 0x20 {
			break
		}
		i++
	}
	if d.buf == nil {
		d.buf = make([]byte, 0, max(64, i-start+16))
	}
	d.buf = d.buf[:0]
	i = start
	for {
		if i >= len(b) {
			return "", i, d.syntax(i, "")
		}
		c := b[i]
		switch {
		case c == '"':
			return string(d.buf), i + 1, nil
		case c < 0x20:
			return "", i, d.syntax(i, "in string literal")
		case c == '\\':
			if i+1 >= len(b) {
				return "", i + 1, d.syntax(i+1, "")
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				d.buf = append(d.buf, e)
				i += 2
			case 'b':
				d.buf, i = append(d.buf, '\b'), i+2
			case 'f':
				d.buf, i = append(d.buf, '\f'), i+2
			case 'n':
				d.buf, i = append(d.buf, '\n'), i+2
			case 'r':
				d.buf, i = append(d.buf, '\r'), i+2
			case 't':
				d.buf, i = append(d.buf, '\t'), i+2
			case 'u':
				r, ok := hex4(b, i+2)
				if !ok {
					return "", i + 2, d.syntax(i+2, "in \\u hexadecimal character escape")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// A high surrogate followed by an escaped low one is one character; any
					// other surrogate is invalid and becomes U+FFFD, as encoding/json does.
					r2, ok2 := rune(-1), false
					if i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
						r2, ok2 = hex4(b, i+2)
					}
					if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				d.buf = utf8.AppendRune(d.buf, r)
			default:
				return "", i + 1, d.syntax(i+1, "in string escape code")
			}
		case c < utf8.RuneSelf:
			d.buf = append(d.buf, c)
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				d.buf = utf8.AppendRune(d.buf, utf8.RuneError)
			} else {
				d.buf = append(d.buf, b[i:i+n]...)
			}
			i += n
		}
	}
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
