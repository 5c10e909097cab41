package schemaformat

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrNotText: a value that PostgreSQL text cannot hold (invalid UTF-8 or a NUL byte) or
// that JSON cannot (a NUL byte, refused by jsonb). It makes the record poison.
var ErrNotText = errors.New("schemaformat: value is not valid PostgreSQL text")

// Text renders v, a node of a decoded tree, as a column value the way package mapping
// gives them: nil (SQL NULL), a string in PostgreSQL's text input form, or a []byte for
// bytea.
//
//	nil                  nil
//	string               itself (uuid, enum, Debezium Json/ZonedTimestamp text...)
//	bool                 "true" or "false"  (boolean)
//	int64                decimal digits     (smallint, integer, bigint, numeric)
//	float64              shortest text that reads back exactly; "NaN", "Infinity",
//	                     "-Infinity"        (real, double precision, numeric)
//	Decimal              its exact text     (numeric)
//	time.Time            RFC 3339 in UTC, six fractional digits (timestamptz)
//	Date                 "2024-02-29"       (date)
//	TimeOfDay            "13:45:06.123456"  (time)
//	LocalTimestamp       "2024-02-29T13:45:06.123456" (timestamp)
//	[]byte               itself             (bytea)
//	map[string]any, []any   JSON text as JSON renders it (json, jsonb)
//
// The error matches ErrNotText for text PostgreSQL cannot store.
func Text(v any) (any, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		return v, nil
	case string:
		if err := checkText(v); err != nil {
			return nil, err
		}
		return v, nil
	case map[string]any, []any:
		b, err := JSON(v)
		if err != nil {
			return nil, err
		}
		return string(b), nil
	}
	b, err := appendLeaf(nil, v, false)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// JSON renders v, a decoded tree or any node of it, as JSON text for a json or jsonb
// column. Maps become objects with their keys sorted; Decimal and int64 become JSON
// numbers with their exact digits (never through a float); float64 a number, or the
// string "NaN", "Infinity" or "-Infinity" (JSON has no such numbers); []byte a base64
// string (standard alphabet, padded); time.Time, Date, TimeOfDay and LocalTimestamp
// strings in the forms Text gives. A string holding a NUL byte or invalid UTF-8 is an
// error matching ErrNotText (jsonb refuses \u0000).
func JSON(v any) ([]byte, error) { return AppendJSON(nil, v) }

// AppendJSON is JSON appending to dst.
func AppendJSON(dst []byte, v any) ([]byte, error) {
	return appendJSON(dst, v, 0)
}

func appendJSON(dst []byte, v any, depth int) ([]byte, error) {
	if depth > maxAvroDepth+2 {
		return nil, fmt.Errorf("schemaformat: value nests deeper than %d", maxAvroDepth)
	}
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendJSONString(dst, v)
	case []byte:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v)
		return append(dst, '"'), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSONString(dst, k); err != nil {
				return nil, err
			}
			dst = append(dst, ':')
			if dst, err = appendJSON(dst, v[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		dst = append(dst, '[')
		for i, x := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSON(dst, x, depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	}
	return appendLeaf(dst, v, true)
}

// appendLeaf appends a scalar's text; with asJSON, as a JSON value.
func appendLeaf(dst []byte, v any, asJSON bool) ([]byte, error) {
	quoted := func(s string) []byte {
		if asJSON {
			return strconv.AppendQuote(dst, s) // ASCII-only text: quoting is JSON-safe
		}
		return append(dst, s...)
	}
	switch v := v.(type) {
	case bool:
		return strconv.AppendBool(dst, v), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case float64:
		switch {
		case math.IsNaN(v):
			return quoted("NaN"), nil
		case math.IsInf(v, 1):
			return quoted("Infinity"), nil
		case math.IsInf(v, -1):
			return quoted("-Infinity"), nil
		}
		return strconv.AppendFloat(dst, v, 'g', -1, 64), nil
	case Decimal:
		return append(dst, v...), nil
	case time.Time:
		return quoted(FormatTime(v.UTC(), timestampLayout)), nil
	case Date:
		return quoted(string(v)), nil
	case TimeOfDay:
		return quoted(string(v)), nil
	case LocalTimestamp:
		return quoted(string(v)), nil
	}
	return nil, fmt.Errorf("schemaformat: cannot render a %T", v)
}

func appendJSONString(dst []byte, s string) ([]byte, error) {
	if err := checkText(s); err != nil {
		return nil, err
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, `\u00`...)
			dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"'), nil
}

func checkText(s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: contains a NUL byte", ErrNotText)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: not valid UTF-8", ErrNotText)
	}
	return nil
}

// Lookup returns the node at path in tree: each segment is a map key or, on a []any, a
// decimal index. ok is false when a segment is missing or the path goes through a leaf.
func Lookup(tree any, path ...string) (v any, ok bool) {
	v = tree
	for _, seg := range path {
		switch n := v.(type) {
		case map[string]any:
			if v, ok = n[seg]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(n) {
				return nil, false
			}
			v = n[i]
		default:
			return nil, false
		}
	}
	return v, true
}
