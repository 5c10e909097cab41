package cdc

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eosink/eosink/sink/internal/schemaformat"
)

// Debezium and Kafka Connect semantic type names.
const (
	dbzTimestamp      = "io.debezium.time.Timestamp"
	dbzMicroTimestamp = "io.debezium.time.MicroTimestamp"
	dbzNanoTimestamp  = "io.debezium.time.NanoTimestamp"
	dbzDate           = "io.debezium.time.Date"
	dbzTime           = "io.debezium.time.Time"
	dbzMicroTime      = "io.debezium.time.MicroTime"
	dbzNanoTime       = "io.debezium.time.NanoTime"
	dbzVarDecimal     = "io.debezium.data.VariableScaleDecimal"
	connectDecimal    = "org.apache.kafka.connect.data.Decimal"
	connectTimestamp  = "org.apache.kafka.connect.data.Timestamp"
	connectDate       = "org.apache.kafka.connect.data.Date"
	connectTime       = "org.apache.kafka.connect.data.Time"
)

const (
	tsLayout   = "2006-01-02T15:04:05.999999Z" // PostgreSQL's timestamp ignores the Z, timestamptz reads it as UTC
	dateLayout = "2006-01-02"
)

// convert turns a field's value into the text (or bytes, for bytea) PostgreSQL reads for a
// column of type colType (format_type's spelling). The result is nil, a string or []byte.
// An array into an array column is an array literal (arrayLiteral); a numeric column's
// value of JSON without schemas is read as f.t.decimals says (plainDecimal).
func convert(f value, colType string) (any, error) {
	v := f.v
	if v == nil {
		return nil, nil
	}
	if items, ok := v.([]any); ok && isArrayType(colType) {
		return arrayLiteral(items, f.t, colType)
	}
	if !f.t.typed && (isNumericType(colType) || colType == "money") {
		return plainDecimal(v, colType, f.t.decimals)
	}
	if n, ok := bitsLength(colType); ok {
		if _, isBool := v.(bool); isBool || f.t.name == dbzBits || !f.t.typed {
			return bitString(v, n)
		}
	}
	if colType == "point" && (f.t.name == dbzPoint || !f.t.typed) {
		return pointText(v)
	}
	name := f.t.name
	if !f.t.typed {
		name = guess(v, colType)
	}
	switch name {
	case dbzMicroTimestamp:
		return epoch(v, time.Microsecond)
	case dbzTimestamp, connectTimestamp:
		return epoch(v, time.Millisecond)
	case dbzNanoTimestamp:
		return epoch(v, time.Nanosecond)
	case dbzDate, connectDate:
		if d, ok := v.(schemaformat.Date); ok {
			return string(d), nil
		}
		n, ok := asInt64(v)
		if !ok {
			return nil, fmt.Errorf("%s: want days since 1970-01-01, got %T %v", name, v, v)
		}
		return epochDays(n), nil
	case dbzMicroTime:
		return clock(v, time.Microsecond)
	case dbzTime, connectTime:
		return clock(v, time.Millisecond)
	case dbzNanoTime:
		return clock(v, time.Nanosecond)
	case dbzVarDecimal:
		return varDecimal(v)
	case connectDecimal:
		if s, ok := v.(string); ok && f.t.bytes {
			scale, err := strconv.Atoi(f.t.params["scale"])
			if err != nil {
				return nil, fmt.Errorf("%s without a scale parameter", name)
			}
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", name, err)
			}
			return decimalText(b, scale)
		}
	}
	switch v := v.(type) {
	case string:
		if f.t.bytes || (!f.t.typed && colType == "bytea") {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return nil, fmt.Errorf("bytes: %v", err)
			}
			return b, nil
		}
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return strconv.FormatBool(v), nil
	case []byte:
		return v, nil
	case map[string]any, []any:
		b, err := schemaformat.JSON(numbers(v))
		if err != nil {
			return nil, err
		}
		return string(b), nil
	}
	return schemaformat.Text(v)
}

// guess names the semantic of a value of JSON without schemas from its target column's
// type, following Debezium's default time.precision.mode=adaptive: timestamp(0..3) is
// Timestamp (ms), timestamp(4..6) MicroTimestamp, time likewise, date is Date (days).
// Numeric columns are plainDecimal's, arrays arrayLiteral's.
func guess(v any, colType string) string {
	if _, ok := v.(json.Number); !ok {
		return ""
	}
	p := precision(colType)
	switch {
	case strings.HasPrefix(colType, "timestamp"):
		if p >= 0 && p <= 3 {
			return dbzTimestamp
		}
		return dbzMicroTimestamp
	case colType == "date":
		return dbzDate
	case strings.HasPrefix(colType, "time"):
		if p >= 0 && p <= 3 {
			return dbzTime
		}
		return dbzMicroTime
	}
	return ""
}

// precision returns p of "timestamp(p) ..." or "time(p) ...", -1 without one.
func precision(colType string) int {
	i := strings.IndexByte(colType, '(')
	j := strings.IndexByte(colType, ')')
	if i < 0 || j < i {
		return -1
	}
	p, err := strconv.Atoi(colType[i+1 : j])
	if err != nil {
		return -1
	}
	return p
}

// moneyScale is the scale of a money column's values as Debezium sends them: its
// money.fraction.digits, 2 unless the connector sets it otherwise.
const moneyScale = 2

// columnScale returns s of "numeric(p,s)", moneyScale for money.
func columnScale(colType string) (int, error) {
	if colType == "money" {
		return moneyScale, nil
	}
	_, after, ok := strings.Cut(colType, ",")
	if !ok {
		return 0, fmt.Errorf("column type %s has no scale", colType)
	}
	return strconv.Atoi(strings.TrimSuffix(after, ")"))
}

// epoch returns the timestamp that v (an integer of unit since the epoch, or a time.Time)
// is, as epochTime writes it.
func epoch(v any, unit time.Duration) (any, error) {
	if t, ok := v.(time.Time); ok {
		return schemaformat.FormatTime(t.UTC(), tsLayout), nil
	}
	n, ok := asInt64(v)
	if !ok {
		return nil, fmt.Errorf("timestamp: want an integer, got %T %v", v, v)
	}
	return epochTime(n, unit), nil
}

func clock(v any, unit time.Duration) (any, error) {
	if t, ok := v.(schemaformat.TimeOfDay); ok {
		return string(t), nil
	}
	n, ok := asInt64(v)
	if !ok {
		return nil, fmt.Errorf("time: want an integer, got %T %v", v, v)
	}
	d := time.Duration(n) * unit
	if n < 0 || d > 24*time.Hour {
		return nil, fmt.Errorf("time of day %d out of range", n)
	}
	us := int64(d / time.Microsecond)
	return fmt.Sprintf("%02d:%02d:%02d.%06d", us/3600e6, us/60e6%60, us/1e6%60, us%1e6), nil
}

// varDecimal reads a VariableScaleDecimal: {scale: int, value: bytes}.
func varDecimal(v any) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want {scale, value}, got %T", dbzVarDecimal, v)
	}
	scale, ok := asInt64(m["scale"])
	if !ok {
		return nil, fmt.Errorf("%s: scale %v", dbzVarDecimal, m["scale"])
	}
	var b []byte
	switch raw := m["value"].(type) {
	case []byte:
		b = raw
	case string:
		var err error
		if b, err = base64.StdEncoding.DecodeString(raw); err != nil {
			return nil, fmt.Errorf("%s: value: %v", dbzVarDecimal, err)
		}
	default:
		return nil, fmt.Errorf("%s: value %T", dbzVarDecimal, m["value"])
	}
	return decimalText(b, int(scale))
}

// decimalText returns the big-endian two's-complement unscaled value b × 10^-scale, or an
// error for a scale or a length past schemaformat.DecimalBytes's bounds (PostgreSQL
// numeric's), before building any text.
func decimalText(b []byte, scale int) (string, error) {
	d, err := schemaformat.DecimalBytes(b, scale)
	return string(d), err
}

// numbers turns the json.Number leaves of a JSON tree into Decimals, which
// schemaformat.JSON writes back with their exact digits.
func numbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		return schemaformat.Decimal(v.String())
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = numbers(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = numbers(x)
		}
		return out
	}
	return v
}
