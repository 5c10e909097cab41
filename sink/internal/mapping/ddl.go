package mapping

import (
	"errors"
	"fmt"
	"strings"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/schemaformat"
)

// ErrUntyped: a column's type cannot be read from the record's schema (a path into a json
// side, which has none, or a field the schema lacks). Types are never guessed from values.
var ErrUntyped = errors.New("no type for the column in the record's schema")

// ColumnTypes returns a PostgreSQL type for each of m.Columns, for creating the table: the
// type of its Cast (Cast.ColumnType) for a column with one; otherwise from
// the registry schema of r's key or value for a path into an avro side; by the format for
// a whole side (string text, bytes bytea, json, protobuf and json_schema jsonb, avro by its
// root type); text for topic and headers, integer for partition, bigint for offset,
// timestamptz for timestamp. A path into a json, protobuf or json_schema side is an error
// matching ErrUntyped, and so is a field the schema lacks, or a null side. Registry errors
// sort as RecordError says.
func (m *Mapping) ColumnTypes(r *sink.Record) ([]string, error) {
	var key, value *schemaformat.Message
	side := func(which string, f Format, data []byte, msg **schemaformat.Message) error {
		if *msg != nil {
			return nil
		}
		if data == nil {
			return fmt.Errorf("%w: the %s of the record at offset %d is null", ErrUntyped, which, r.Offset)
		}
		if m.Decoder == nil {
			return fmt.Errorf("the %v format needs a schema registry decoder", f)
		}
		d, err := m.Decoder.Decode(f.schemaFormat(), data)
		if err != nil {
			return fmt.Errorf("%s: %w", which, err)
		}
		*msg = &d
		return nil
	}
	types := make([]string, len(m.Columns))
	for i, c := range m.Columns {
		f, data, msg, which := m.Value, r.Value, &value, "value"
		if c.From.Side() == "key" {
			f, data, msg, which = m.Key, r.Key, &key, "key"
		}
		if t := c.Cast.ColumnType(); t != "" {
			types[i] = t // a cast decides the type, whatever the source
			continue
		}
		var err error
		switch c.From.kind {
		case srcTopic, srcHeader:
			types[i] = "text"
		case srcPartition:
			types[i] = "integer"
		case srcOffset:
			types[i] = "bigint"
		case srcTimestamp:
			types[i] = "timestamptz"
		case srcKey, srcValue:
			switch f {
			case String:
				types[i] = "text"
			case Bytes:
				types[i] = "bytea"
			case Avro:
				if err = side(which, f, data, msg); err == nil {
					n, _ := (*msg).Node()
					types[i], err = avroColumnType(n)
				}
			default:
				types[i] = "jsonb"
			}
		case srcKeyPath, srcValuePath:
			if f != Avro {
				err = fmt.Errorf("%w: %s is a path into a %v %s, whose schema is not read (only avro's is)", ErrUntyped, c.From, f, which)
				break
			}
			if err = side(which, f, data, msg); err != nil {
				break
			}
			n, ok := (*msg).Node(strings.Split(c.From.arg, "\x00")...)
			if !ok {
				err = fmt.Errorf("%w: %s is not in the schema (id %d) of the record at offset %d", ErrUntyped, c.From, (*msg).SchemaID, r.Offset)
				break
			}
			types[i], err = avroColumnType(n)
		default:
			err = errors.New("the source is empty (zero Source)")
		}
		if err != nil {
			return nil, &FieldError{Column: c.Name, Source: c.From.String(), Err: err}
		}
	}
	return types, nil
}

// avroColumnType is the column type for values of Avro type f as the mapping writes them:
// logical types first (decimal numeric, timestamp-* timestamptz, local-timestamp-*
// timestamp, date, time-* time, uuid), then the type (records, maps and arrays jsonb).
func avroColumnType(f schemaformat.Field) (string, error) {
	switch f.Logical {
	case "decimal":
		return "numeric", nil
	case "timestamp-millis":
		return "timestamptz(3)", nil
	case "timestamp-micros":
		return "timestamptz", nil
	case "local-timestamp-millis":
		return "timestamp(3)", nil
	case "local-timestamp-micros":
		return "timestamp", nil
	case "date":
		return "date", nil
	case "time-millis":
		return "time(3)", nil
	case "time-micros":
		return "time", nil
	case "uuid":
		return "uuid", nil
	}
	switch f.Type {
	case "boolean":
		return "boolean", nil
	case "int":
		return "integer", nil
	case "long":
		return "bigint", nil
	case "float":
		return "real", nil
	case "double":
		return "double precision", nil
	case "string", "enum":
		return "text", nil
	case "bytes", "fixed":
		return "bytea", nil
	case "record", "map", "array":
		return "jsonb", nil
	}
	return "", fmt.Errorf("%w: Avro type %s", ErrUntyped, f.Type)
}
