package cdc

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// isArrayType reports whether colType (format_type's spelling: "text[]", "numeric(12,2)[]",
// one [] whatever the column's dimensions) is an array type.
func isArrayType(colType string) bool { return strings.HasSuffix(colType, "[]") }

// errMultiDim: an array element is itself an array. Debezium's PostgreSQL connector writes
// a one-dimensional array of a column's elements; a nested array is not one of its events.
var errMultiDim = errors.New("an element is an array: multi-dimensional arrays are not replicated")

// arrayLiteral writes the items of a JSON or Avro array (Debezium's ARRAY schema, items of
// the element's own semantic) as a PostgreSQL array literal for a column of type colType:
// each element converted as a column of the element type would be, then double-quoted
// with its backslashes and double quotes escaped, so that commas, braces, quotes, white
// space, empty strings and the text "NULL" stay what they are; a null element is NULL;
// a bytea element is its \x hex text. An element that is an array is refused
// (errMultiDim): the record is poison.
func arrayLiteral(items []any, t semantic, colType string) (string, error) {
	elemType := strings.TrimSuffix(colType, "[]")
	it := semantic{typed: t.typed}
	if t.items != nil {
		it = *t.items
	}
	it.decimals = t.decimals
	var b strings.Builder
	b.WriteByte('{')
	for i, x := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		if _, nested := x.([]any); nested {
			return "", errMultiDim
		}
		cv, err := convert(value{v: x, t: it}, elemType)
		if err != nil {
			return "", fmt.Errorf("array element %d: %w", i+1, err)
		}
		switch cv := cv.(type) {
		case nil:
			b.WriteString("NULL")
		case string:
			quoteElement(&b, cv)
		case []byte:
			quoteElement(&b, `\x`+hex.EncodeToString(cv))
		default:
			return "", fmt.Errorf("array element %d: %T", i+1, cv)
		}
	}
	b.WriteByte('}')
	return b.String(), nil
}

// quoteElement writes s as a double-quoted array element.
func quoteElement(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
}
