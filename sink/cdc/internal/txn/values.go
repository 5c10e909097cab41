package txn

import (
	"bytes"
	"encoding/json"
	"math"
)

// The decoders read a payload already decoded into a tree: maps, slices, strings, numbers
// as json.Number (the cdc plugin's JSON decoder and encoding/json with UseNumber) or int64,
// int32, int, float64 (the Avro decoder of sink/internal/schemaformat, other callers).

// MaxEventCount bounds every count and order of the metadata: more events than this in one
// transaction are not a PostgreSQL transaction but hostile input.
const MaxEventCount = 1 << 40

// count reads a non-negative integer of at most MaxEventCount.
func count(v any, field string) (int64, error) {
	n, err := integer(v, field)
	if err != nil {
		return 0, err
	}
	if n < 0 || n > MaxEventCount {
		return 0, malformed(field, "%d is out of range [0, %d]", n, int64(MaxEventCount))
	}
	return n, nil
}

// integer reads an integer of any of the tree's number types.
func integer(v any, field string) (int64, error) {
	switch v := v.(type) {
	case nil:
		return 0, malformed(field, "missing")
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return 0, malformed(field, "%q is not an integer of 64 bits", string(v))
		}
		return n, nil
	case int64:
		return v, nil
	case int32:
		return int64(v), nil
	case int:
		return int64(v), nil
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, malformed(field, "%v is not an integer", v)
		}
		return int64(v), nil
	}
	return 0, malformed(field, "is %s, want an integer", kind(v))
}

func str(v any, field string) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", malformed(field, "missing")
	case string:
		return v, nil
	}
	return "", malformed(field, "is %s, want a string", kind(v))
}

// kind names a tree value's type for errors.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case json.Number, int64, int32, int, float64, float32:
		return "a number"
	}
	return "an unexpected value"
}

// payloadJSON decodes a JsonConverter record, {"schema":...,"payload":...} with schemas
// or the payload alone, numbers as json.Number. A null record gives nil.
func payloadJSON(data []byte) (any, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	if m, ok := v.(map[string]any); ok && len(m) == 2 {
		if p, ok := m["payload"]; ok {
			if _, ok := m["schema"]; ok {
				return p, nil
			}
		}
	}
	return v, nil
}

func decodeJSON(data []byte) (any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, malformed("record", "invalid JSON: %v", err)
	}
	if d.More() {
		return nil, malformed("record", "invalid JSON: data after the value")
	}
	if _, err := d.Token(); err == nil {
		return nil, malformed("record", "invalid JSON: data after the value")
	}
	return v, nil
}
