package mapping

import (
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendCopyRow appends row to buf as one line of COPY ... FROM STDIN in the text format
// (FORMAT text, the default delimiter and NULL string) and returns the extended buffer.
// Fields are separated by tabs and the line ends with a newline; nil is written \N; in
// text, backslash, newline, carriage return and tab are written \\, \n, \r and \t.
//
// bytea[i] marks column i as bytea: its []byte or string value is written in bytea's hex
// form, \x followed by two lowercase hex digits per byte, with the backslash doubled as
// the text format requires (\\x...). bytea may be shorter than row (nil: no bytea columns).
//
// Other columns take a string or a []byte that must be valid UTF-8 without NUL bytes;
// otherwise the row cannot be stored and the error (wrapping ErrInvalidText) makes the
// record poison. As a convenience they also take bool ("true", "false"), int, int32,
// int64 (decimal) and time.Time (RFC 3339 in UTC, like the timestamp source); any other
// type is an error. The session must use client_encoding UTF8 (pgx does).
//
// On error, buf is returned with its original length: a partial row is never left in it.
func AppendCopyRow(buf []byte, row []any, bytea []bool) ([]byte, error) {
	orig := len(buf)
	for i, v := range row {
		if i > 0 {
			buf = append(buf, '\t')
		}
		var err error
		if buf, err = appendCopyValue(buf, v, i < len(bytea) && bytea[i]); err != nil {
			return buf[:orig], fmt.Errorf("mapping: COPY column %d: %w", i+1, err)
		}
	}
	return append(buf, '\n'), nil
}

// appendCopyValue appends one field of AppendCopyRow.
func appendCopyValue(buf []byte, v any, isBytea bool) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(buf, '\\', 'N'), nil
	case string:
		return appendCopyText(buf, v, isBytea)
	case []byte:
		if v == nil {
			return append(buf, '\\', 'N'), nil
		}
		return appendCopyText(buf, unsafeString(v), isBytea)
	case bool:
		return strconv.AppendBool(buf, v), nil
	case int:
		return strconv.AppendInt(buf, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(buf, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(buf, v, 10), nil
	case time.Time:
		return v.UTC().AppendFormat(buf, time.RFC3339Nano), nil
	}
	return buf, fmt.Errorf("unsupported type %T", v)
}

// appendCopyText appends text, or bytea's hex form of it.
func appendCopyText(buf []byte, s string, isBytea bool) ([]byte, error) {
	if isBytea {
		return appendByteaHex(buf, s), nil
	}
	return appendText(buf, s)
}

// appendText appends s with the escapes of COPY's text format. s must be valid UTF-8
// without NUL. Other control characters than newline, carriage return and tab stand for
// themselves in the text format and are written as they are.
func appendText(buf []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return buf, errBadUTF8()
	}
	last := 0 // s[last:i] is still to be appended
	for i := 0; i < len(s); i++ {
		// Skip eight plain bytes at a time.
		for i+8 <= len(s) && !control8(load8(s, i)) {
			i += 8
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c >= ' ' && c != '\\' {
			continue
		}
		var esc byte
		switch c {
		case '\\':
			esc = '\\'
		case '\n':
			esc = 'n'
		case '\r':
			esc = 'r'
		case '\t':
			esc = 't'
		case 0:
			return buf, errNUL()
		default:
			continue
		}
		buf = append(buf, s[last:i]...)
		buf = append(buf, '\\', esc)
		last = i + 1
	}
	return append(buf, s[last:]...), nil
}

// appendByteaHex appends b in bytea's hex input form, \x and hex digits, with the
// backslash escaped for the text format.
func appendByteaHex(buf []byte, b string) []byte {
	const digits = "0123456789abcdef"
	buf = append(buf, '\\', '\\', 'x')
	n := len(buf)
	buf = slices.Grow(buf, 2*len(b))[:n+2*len(b)]
	for i := 0; i < len(b); i++ {
		buf[n+2*i] = digits[b[i]>>4]
		buf[n+2*i+1] = digits[b[i]&0x0f]
	}
	return buf
}

// load8 returns the eight bytes of s at i as a little-endian number.
func load8(s string, i int) uint64 {
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// control8 reports whether one of the eight bytes in x is a backslash or a control
// character (below 0x20), which may need an escape in COPY text.
func control8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	backslash := x ^ (ones * '\\')
	// See special8 in scan.go.
	return ((backslash-ones)&^backslash|(x-ones*0x20)&^x)&highs != 0
}
