// Package schemaformat decodes Kafka keys and values written with a schema from a Schema
// Registry, in the Confluent wire format, into a tree of Go values that the mapping can
// walk with paths (after.id, id) and render as PostgreSQL column values.
//
// # Formats and wire format
//
// avro, protobuf and json_schema. A record is one magic byte 0, the schema id as 4 bytes
// big-endian, for protobuf the message-index array (zig-zag varints: a count, then the
// indexes; a lone 0 means the first message), then the body. The schema is fetched by id
// through confluent-kafka-go's schemaregistry client, once per id: the client and the
// Decoder both keep it, so that decoding makes no request per record.
//
// # The tree
//
// A decoded value is made of:
//
//	map[string]any   Avro record and map, Protobuf message and map, JSON object
//	[]any            Avro array, Protobuf repeated field, JSON array
//	nil              Avro null (a union holding null), unset Protobuf field with
//	                 presence, JSON null
//	string           Avro string, enum symbol, uuid; Protobuf string, enum name
//	bool             boolean
//	int64            Avro int and long; Protobuf integers (a uint64 above 2^63-1 is a
//	                 Decimal); JSON integers that fit
//	float64          Avro float and double, Protobuf float and double (a 32-bit float
//	                 widened to the float64 with the same shortest text)
//	Decimal          Avro decimal (bytes or fixed), confluent.type.Decimal, JSON
//	                 numbers that are not int64: exact text, never a float
//	time.Time        Avro timestamp-millis and timestamp-micros,
//	                 google.protobuf.Timestamp: in UTC
//	Date             Avro date, google.type.Date
//	TimeOfDay        Avro time-millis and time-micros, google.type.TimeOfDay
//	LocalTimestamp   Avro local-timestamp-millis and local-timestamp-micros
//	[]byte           Avro bytes and fixed (duration too), Protobuf bytes
//
// Avro unions are unwrapped to the value of their branch. Protobuf wrappers
// (google.protobuf.Int64Value...) become their value. JSON Schema values are the JSON
// document with exact numbers; the schema itself does not change them.
//
// Text renders a node as PostgreSQL text input; JSON renders a subtree as JSON for jsonb.
//
// # Kafka Connect types
//
// Avro written by Kafka Connect carries Connect's type on schema nodes (connect.name,
// connect.parameters), which is how Debezium marks its semantic types
// (io.debezium.time.MicroTimestamp on a long...). Message.Connect gives it by path, so
// that a CDC layer converts those values; the tree itself keeps the Avro value (an
// int64 of microseconds for MicroTimestamp).
//
// # Errors
//
// ErrMalformed, ErrUnknownSchema and ErrBadSchema mean the record can never decode:
// poison. A *RegistryError is the registry failing; when it matches
// ErrRegistryUnavailable (no answer, 5xx, 408, 429, timeout) the caller retries the same
// record later.
package schemaformat
