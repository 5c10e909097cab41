package cdc

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/eosink/eosink/sink"
)

// Values of Config.DecimalHandling: Debezium's decimal.handling.mode.
const (
	// DecimalPrecise: numeric(p,s) values are base64 text of the big-endian two's-complement
	// unscaled value (the scale is the column's); numeric without a scale is
	// {"scale": s, "value": base64}. Debezium's default.
	DecimalPrecise = "precise"
	// DecimalString: every numeric value is its decimal text ("-29293.56", "NaN").
	DecimalString = "string"
	// DecimalDouble: every numeric value is a JSON number (a double: digits past the 15th or
	// so are lost by the connector), NaN and infinities the strings "NaN", "Infinity",
	// "-Infinity".
	DecimalDouble = "double"
)

// AmbiguousDecimalError: a numeric column's value in JSON without schemas reads both as
// decimal text (decimal.handling.mode=string) and as base64 bytes (precise), and
// Config.DecimalHandling is not set to say which. The write fails with it and the
// partition stops with reason decimal_ambiguous (it matches ErrDecimalAmbiguous), whatever
// on_poison says: it is the configuration, not the record, that
// is missing something, and every later record of the stream could be read wrongly too.
type AmbiguousDecimalError struct {
	Value   string // the value as sent
	Type    string // the column's type (format_type)
	Precise string // the number it is under decimal.handling.mode=precise
}

// ErrDecimalAmbiguous matches every *AmbiguousDecimalError; it is sink.ErrDecimalAmbiguous,
// so the partition stops with reason decimal_ambiguous.
var ErrDecimalAmbiguous = sink.ErrDecimalAmbiguous

// Is reports whether target is ErrDecimalAmbiguous.
func (e *AmbiguousDecimalError) Is(target error) bool { return target == sink.ErrDecimalAmbiguous }

func (e *AmbiguousDecimalError) Error() string {
	return fmt.Sprintf("the %s value %q, in JSON without schemas, is %s under Debezium's decimal.handling.mode=precise "+
		"(base64 bytes) and %s under string: set the cdc plugin's decimal_handling to the connector's "+
		"decimal.handling.mode (precise, string or double), then restart", e.Type, e.Value, e.Precise, e.Value)
}

// plainDecimal converts the value of a numeric column of JSON without schemas, which says
// nothing of how the connector encoded it, as mode (Config.DecimalHandling) says. With
// mode unset, a value whose form only one mode writes is read that way (a JSON number:
// double; {scale, value}: precise; text with a sign or a point: string; base64 with + / or
// =: precise), and one both string and precise could have written is an
// *AmbiguousDecimalError. A value that mode never writes is an error (the record is poison).
func plainDecimal(v any, colType, mode string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["scale"]; ok {
			return varDecimal(v) // Debezium writes it for numeric without a scale in precise mode only, unambiguous
		}
	case json.Number:
		if mode == "" || mode == DecimalDouble {
			return v.String(), nil
		}
		return nil, fmt.Errorf("the %s value %s is a JSON number, which decimal.handling.mode=%s never writes (decimal_handling: %s)", colType, v, mode, mode)
	case string:
		return plainDecimalText(v, colType, mode)
	}
	return nil, fmt.Errorf("the %s value %T is not a decimal Debezium writes", colType, v)
}

func plainDecimalText(s, colType, mode string) (any, error) {
	text := isDecimalText(s)
	switch mode {
	case DecimalString:
		if !text {
			return nil, fmt.Errorf("the %s value %q is not decimal text, which decimal.handling.mode=string writes (decimal_handling: string)", colType, s)
		}
		return s, nil
	case DecimalDouble:
		if s != "NaN" && s != "Infinity" && s != "-Infinity" {
			return nil, fmt.Errorf("the %s value %q is text, which decimal.handling.mode=double writes only for NaN and infinities (decimal_handling: double)", colType, s)
		}
		return s, nil
	case DecimalPrecise:
		return preciseText(s, colType)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	switch {
	case text && err == nil:
		precise, perr := bytesDecimal(b, colType)
		if perr != nil {
			precise = "unreadable (" + perr.Error() + ")"
		}
		return nil, &AmbiguousDecimalError{Value: s, Type: colType, Precise: precise}
	case text:
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("the %s value %q is neither decimal text nor base64 bytes: %v", colType, s, err)
	}
	return bytesDecimal(b, colType)
}

// preciseText reads base64 bytes of the unscaled value, at the column's scale.
func preciseText(s, colType string) (string, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("the %s value %q is not base64, which decimal.handling.mode=precise writes (decimal_handling: precise): %v", colType, s, err)
	}
	return bytesDecimal(b, colType)
}

func bytesDecimal(b []byte, colType string) (string, error) {
	scale, err := columnScale(colType)
	if err != nil {
		return "", fmt.Errorf("%s: Debezium writes base64 bytes for numeric(p,s) only; for numeric without a scale it writes {scale, value}", err)
	}
	if len(b) == 0 {
		return "", fmt.Errorf("the %s value is empty bytes", colType)
	}
	return decimalText(b, scale)
}

// isDecimalText reports whether s is decimal text as Debezium's decimal.handling.mode=string
// writes it (BigDecimal.toPlainString, or PostgreSQL's NaN and infinities): an optional
// minus, digits, and a point with digits. No exponent, no plus, no base prefix.
func isDecimalText(s string) bool {
	if s == "NaN" || s == "Infinity" || s == "-Infinity" {
		return true
	}
	s = strings.TrimPrefix(s, "-")
	intPart, frac, point := strings.Cut(s, ".")
	return allDigits(intPart) && (!point || allDigits(frac))
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// isNumericType reports whether colType (format_type's spelling) is numeric or numeric(p,s).
func isNumericType(colType string) bool {
	return colType == "numeric" || strings.HasPrefix(colType, "numeric(") && strings.HasSuffix(colType, ")")
}
