package mapping

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// exprValue turns an expression's result into a column's value: null (absent: a default
// applies), text appended to buf (or, when rd may alias, the string itself), or bytes of
// their own. A string is text; int, uint and double give decimal text (double: the
// shortest text that reads back as the same number, without exponent from 1e-6 to 1e21,
// NaN, Infinity and -Infinity otherwise); bool gives true or false; timestamp RFC 3339
// text in UTC; duration seconds ("90s", "1.5s"); a list or a map JSON text (map keys
// sorted). Text must be valid UTF-8 without NUL. Another type (a type value, an optional)
// is an error.
func (rd *reader) exprValue(v ref.Val, buf []byte) (result, []byte, error) {
	switch v := v.(type) {
	case types.Null:
		return absent("the expression gives null"), buf, nil
	case types.String:
		s := string(v)
		if err := checkText(s); err != nil {
			return result{}, buf, err
		}
		res, buf := rd.text(s, buf)
		return res, buf, nil
	case types.Bytes:
		return direct(slices.Clone([]byte(v))), buf, nil
	case types.Bool, types.Int, types.Uint, types.Double, types.Timestamp, types.Duration:
		start := len(buf)
		buf, err := appendExprScalar(buf, v, false)
		if err != nil {
			return result{}, buf[:start], err
		}
		return result{kind: resBuf, start: start, end: len(buf)}, buf, nil
	case traits.Lister, traits.Mapper:
		start := len(buf)
		buf, err := appendExprJSON(buf, v, 0)
		if err == nil {
			err = checkTextBytes(buf[start:])
		}
		if err != nil {
			return result{}, buf[:start], err
		}
		return result{kind: resBuf, start: start, end: len(buf)}, buf, nil
	}
	return result{}, buf, fmt.Errorf("%w: the expression gives %s, which is no column value", ErrExpr, typeName(v))
}

func typeName(v ref.Val) string {
	if t, ok := v.Type().(ref.Type); ok {
		return t.TypeName()
	}
	return fmt.Sprintf("%T", v)
}

// appendExprScalar appends the text of a bool, int, uint, double, timestamp or duration;
// inJSON for a value inside JSON text (a double must then be finite, a timestamp and a
// duration are quoted).
func appendExprScalar(buf []byte, v ref.Val, inJSON bool) ([]byte, error) {
	switch v := v.(type) {
	case types.Bool:
		return strconv.AppendBool(buf, bool(v)), nil
	case types.Int:
		return strconv.AppendInt(buf, int64(v), 10), nil
	case types.Uint:
		return strconv.AppendUint(buf, uint64(v), 10), nil
	case types.Double:
		f := float64(v)
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			if inJSON {
				return buf, fmt.Errorf("%w: %v cannot be written in JSON", ErrExpr, f)
			}
			switch {
			case math.IsNaN(f):
				return append(buf, "NaN"...), nil
			case f > 0:
				return append(buf, "Infinity"...), nil
			}
			return append(buf, "-Infinity"...), nil
		}
		return appendFloat(buf, f), nil
	case types.Timestamp:
		if inJSON {
			buf = append(buf, '"')
		}
		buf = v.UTC().AppendFormat(buf, time.RFC3339Nano)
		if inJSON {
			buf = append(buf, '"')
		}
		return buf, nil
	case types.Duration:
		if inJSON {
			buf = append(buf, '"')
		}
		buf = strconv.AppendFloat(buf, v.Seconds(), 'f', -1, 64)
		buf = append(buf, 's')
		if inJSON {
			buf = append(buf, '"')
		}
		return buf, nil
	}
	return buf, fmt.Errorf("%w: %s is no scalar", ErrExpr, typeName(v))
}

// appendFloat appends f as encoding/json writes a float64.
func appendFloat(buf []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	n := len(buf)
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' { // 1e-07 -> 1e-7
		if m := len(buf) - n; m >= 4 && buf[len(buf)-4] == 'e' && buf[len(buf)-3] == '-' && buf[len(buf)-2] == '0' {
			buf[len(buf)-2] = buf[len(buf)-1]
			buf = buf[:len(buf)-1]
		}
	}
	return buf
}

// appendJSONString appends s as a JSON string (encoding/json's escapes).
func appendJSONString(buf []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(buf, b...)
}

var errExprDepth = errors.New("expression result nested too deeply for JSON")

// appendExprJSON appends v as JSON text.
func appendExprJSON(buf []byte, v ref.Val, depth int) ([]byte, error) {
	if depth > maxDepth {
		return buf, errExprDepth
	}
	switch v := v.(type) {
	case types.Null:
		return append(buf, "null"...), nil
	case types.String:
		return appendJSONString(buf, string(v)), nil
	case types.Bytes:
		return buf, fmt.Errorf("%w: bytes cannot be written in JSON (base64.encode them)", ErrExpr)
	case traits.Lister:
		buf = append(buf, '[')
		n := int(v.Size().(types.Int))
		for i := 0; i < n; i++ {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendExprJSON(buf, v.Get(types.Int(i)), depth+1); err != nil {
				return buf, err
			}
		}
		return append(buf, ']'), nil
	case traits.Mapper:
		var keys []string
		for it := v.Iterator(); it.HasNext() == types.True; {
			k, ok := it.Next().(types.String)
			if !ok {
				return buf, fmt.Errorf("%w: a map with keys other than strings cannot be written in JSON", ErrExpr)
			}
			keys = append(keys, string(k))
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, k)
			buf = append(buf, ':')
			var err error
			if buf, err = appendExprJSON(buf, v.Get(types.String(k)), depth+1); err != nil {
				return buf, err
			}
		}
		return append(buf, '}'), nil
	}
	return appendExprScalar(buf, v, true)
}
