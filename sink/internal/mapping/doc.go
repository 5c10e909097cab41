// Package mapping turns a Kafka record into one row of column values for PostgreSQL. The
// built-in sinks (table, upsert, sql, inbox) use it: a Mapping says how the record's key and value
// decode and where each column's value comes from; Row produces the values; AppendCopyRow
// writes them in the text format of COPY ... FROM STDIN.
//
// # Formats
//
// The key and the value each decode with one Format: json (the default), string (UTF-8
// text), bytes (opaque; only for bytea columns or to pass the raw bytes on), or avro,
// protobuf or json_schema: the Confluent wire format, decoded once per record by the
// Mapping's Decoder into a tree (package schemaformat) that paths walk as they walk JSON.
// Leaves render with schemaformat.Text (decimals exact, timestamps for timestamptz, bytes
// as []byte), records, maps and arrays and the whole side as JSON text; an array into a
// Column marked Array as a PostgreSQL array literal. RecordError classifies their errors:
// registry unavailable is transient, another registry failure stops, the rest is poison.
//
// # Source expressions
//
// A column's value comes from a Source, written as one of:
//
//	key               the whole key
//	key.<path>        a field of the key (json and schema'd formats)
//	value             the whole value
//	value.<path>      a field of the value (json and schema'd formats)
//	header.<name>     the last header called <name> (the rest of the expression, verbatim)
//	topic             the record's topic
//	partition         the record's partition, in decimal
//	offset            the record's offset, in decimal
//	timestamp         the record's timestamp
//
// A <path> is a list of object keys separated by dots, such as value.user.address.city. A
// segment made only of digits indexes an array (value.items.0.sku) and, on an object,
// names the key with those digits. A backslash makes the next character literal: write
// value.a\.b for the key "a.b" and value.a\\b for the key `a\b`. Any other character,
// including * ? | # @ ! and spaces, stands for itself; segments cannot be empty nor hold
// NUL. A key is matched after JSON unescaping ("\u0061" is "a"). If an object repeats a
// key, the first occurrence wins (PostgreSQL's jsonb keeps the last).
//
// # Values
//
// Every value is nil (SQL NULL), a string in PostgreSQL's text input form, or a []byte:
//
//   - From a JSON field: a string gives its unescaped text; a number its literal text
//     (12, -3.5, 1e3); true and false give "true" and "false"; null gives nil; an object or
//     array gives its JSON text, ready for a json, jsonb or text column. An absent field, or
//     a path through a scalar, gives nil.
//   - The whole key or value: with the json format its JSON text, surrounding whitespace
//     removed. A JSON string stays a JSON document: the value "abc" (with quotes) gives the
//     five characters "abc" including the quotes, which is right for json and jsonb columns;
//     use the string format to get the bare text. With the string format the bytes as text;
//     with the bytes format the bytes themselves, as a []byte that aliases the record.
//   - A null key or value (a tombstone) gives nil for every source on that side, including
//     its fields. It is not invalid JSON.
//   - header.<name>: the value of the last header with that key, as text; nil when there
//     is none or its value is null.
//   - topic: text. partition and offset: decimal text. timestamp: RFC 3339 text in UTC with
//     up to nine fractional digits, which PostgreSQL reads into timestamptz (rounding to
//     microseconds); a zero timestamp gives nil.
//
// Text must be valid UTF-8 without NUL bytes, because PostgreSQL text cannot hold anything
// else. A value that breaks this is an error, and so is a side that a column reads with
// the json format when it is not valid JSON (invalid UTF-8 counts as invalid JSON, as RFC
// 8259 requires UTF-8); that one names no column, since the record as a whole is bad
// ("mapping: value is not JSON: ..."). A required column whose value is nil is an error too.
// Such errors make the record poison: the caller wraps them with sink.Poison. They name the
// column and the source expression, never the record's content, except that a cast error
// quotes the start of the value it could not cast (at most 40 bytes), as PostgreSQL's own
// errors quote values.
//
// # Casts and defaults
//
// A Column's Cast converts its value's text after it is read: epoch_s, epoch_ms and
// epoch_us (a number of seconds, milliseconds or microseconds since 1970, from its digits,
// never through a float) and rfc3339 (UTC when it has no zone) give RFC 3339 text for
// timestamptz; base64 (standard or URL-safe, padded or not) gives bytes for bytea; json
// checks that the text is one JSON document. A value that cannot be cast is a *FieldError
// wrapping a *CastError (ErrCast), which quotes the start of the value. NULL stays NULL. A
// Column's Default replaces a value the source does not find (absent, not null), and goes
// through the Cast. Both write into the row's shared text: no allocation of their own.
//
// A Spec is a column as a sink's config writes it ({from, expr, required, cast, default}):
// DecodeSpec decodes it and Spec.Column checks it, for the table and upsert plugins'
// columns and the sql plugin's parameters alike.
//
// # Expressions
//
// A Column may take its value from an Expr instead of a Source: a CEL expression
// (cel.dev/cel-go) over the record, compiled by CompileExpr; a Mapping's Where and Checks
// (CompileCondition) filter records (ErrSkip) and refuse them (*CheckError). The result
// becomes a value as exprValue says: a string is text, numbers decimal text, bytes bytes,
// null a value not found (the Default applies), timestamps RFC 3339, lists and maps JSON.
// A side an expression reads is scanned once, with the paths of the other columns, and a
// JSON object is decoded as the expression reads it. JSON numbers are int when their
// literal is an integer that fits in 64 bits, else double: a decimal that must keep all
// its digits is read as a string or through a path. An evaluation's error wraps ErrExpr
// and makes the record poison; every evaluation is bounded by ExprCostLimit.
//
// # Performance
//
// Row scans each side at most once per record, whatever the number of columns: a single
// pass over the bytes validates the JSON (the syntax encoding/json accepts, UTF-8, at most
// 10000 levels of nesting) and notes where each path's value is, with no intermediate tree
// and no number parsing. Its text values share one allocation per record; dst is reused.
package mapping
