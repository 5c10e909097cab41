package schemaformat

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
)

// JSON Schema records are read by the jsonschema serde (wire-format header, schema
// lookup, rules) into a json.RawMessage, then parsed here with numbers kept as their
// text: the serde's generic path unmarshals into float64, which loses digits. The schema
// does not change the tree (no validation: the serde's validation failed on typed targets
// with "invalid jsonType"; JSON Schema has no logical types the tree could use).
func (d *Decoder) decodeJSON(data []byte) (any, error) {
	var raw json.RawMessage
	if err := d.json.DeserializeInto("", data, &raw); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, malformed("JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("JSON: data after the value")
	}
	return jsonNumbers(v), nil
}

// jsonNumbers replaces each json.Number in v: an integer that fits becomes an int64, any
// other number a Decimal with its literal text (1.50 stays "1.50", 1e3 stays "1e3", which
// PostgreSQL's numeric reads as 1000).
func jsonNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i
			}
		}
		return Decimal(s)
	case map[string]any:
		for k, x := range v {
			v[k] = jsonNumbers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = jsonNumbers(x)
		}
	}
	return v
}
