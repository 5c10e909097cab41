package mapping

import (
	"fmt"
	"strconv"
)

// Format says how a record's key or value decodes.
type Format int

const (
	// JSON: the bytes are a JSON document (RFC 8259, so UTF-8). Paths into it (key.<path>,
	// value.<path>) need this format. It is the zero value.
	JSON Format = iota
	// Bytes: the bytes are opaque; the whole side is read as a []byte, for bytea columns.
	Bytes
	// String: the bytes are UTF-8 text without NUL.
	String
	// Avro, Protobuf and JSONSchema: the bytes are in the Confluent wire format (magic byte,
	// schema id, body) and decode with the schema the registry holds for the id, through the
	// Mapping's Decoder. Paths walk the decoded tree; see schema.go.
	Avro
	Protobuf
	JSONSchema
)

// ParseFormat parses the name of a format: "json", "bytes", "string", "avro", "protobuf"
// or "json_schema".
func ParseFormat(s string) (Format, error) {
	switch s {
	case "avro":
		return Avro, nil
	case "protobuf":
		return Protobuf, nil
	case "json_schema":
		return JSONSchema, nil
	case "json":
		return JSON, nil
	case "bytes":
		return Bytes, nil
	case "string":
		return String, nil
	}
	return 0, fmt.Errorf("mapping: unknown format %q (want json, string, bytes, avro, protobuf or json_schema)", s)
}

// String returns the name of f as ParseFormat reads it.
func (f Format) String() string {
	switch f {
	case JSON:
		return "json"
	case Bytes:
		return "bytes"
	case String:
		return "string"
	case Avro:
		return "avro"
	case Protobuf:
		return "protobuf"
	case JSONSchema:
		return "json_schema"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

func (f Format) valid() bool { return f >= JSON && f <= JSONSchema }

// Schemad reports whether f is decoded with a schema from a registry: avro, protobuf or
// json_schema.
func (f Format) Schemad() bool { return f >= Avro && f <= JSONSchema }

// MarshalText returns the name of f, so that a Format reads and writes as text in
// configuration files.
func (f Format) MarshalText() ([]byte, error) {
	if !f.valid() {
		return nil, fmt.Errorf("mapping: invalid format %d", int(f))
	}
	return []byte(f.String()), nil
}

// UnmarshalText sets f from its name, as ParseFormat.
func (f *Format) UnmarshalText(text []byte) error {
	v, err := ParseFormat(string(text))
	if err != nil {
		return err
	}
	*f = v
	return nil
}
