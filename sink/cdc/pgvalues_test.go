package cdc

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// typedValue is a field with the JsonConverter's schema: its semantic name and whether
// its schema type is bytes.
func typedValue(v any, name string, bytes bool) value {
	return value{v: v, t: semantic{name: name, bytes: bytes, typed: true}}
}

// Dates and timestamps before year 1 are written with their era (Go's -0043-03-15 was
// refused by PostgreSQL), Debezium's infinity sentinels as infinity and -infinity (they
// were refused or, +infinity timestamps, written as the year 294247).
func TestEpochDatesAndTimestamps(t *testing.T) {
	for _, c := range []struct {
		v     value
		col   string
		want  string
		where string
	}{
		{typedValue(int64(-735160), dbzDate, false), "date", "0044-03-15 BC", "44 BC"},
		{typedValue(int64(-719163), dbzDate, false), "date", "0001-12-31 BC", "1 BC (Go's year 0)"},
		{typedValue(int64(-719162), dbzDate, false), "date", "0001-01-01", "1 AD"},
		{typedValue(int64(19782), dbzDate, false), "date", "2024-02-29", "a leap day"},
		// The values Debezium 3.6 sent in the fidelity suite, streamed and in the snapshot.
		{typedValue(int64(-2147472692), dbzDate, false), "date", "infinity", "infinity streamed"},
		{typedValue(int64(-2147472691), dbzDate, false), "date", "-infinity", "-infinity streamed"},
		{typedValue(int64(-622191234), dbzDate, false), "date", "infinity", "infinity in the snapshot"},
		{typedValue(int64(-625821272), dbzDate, false), "date", "-infinity", "-infinity in the snapshot"},
		{typedValue(int64(dbzInfinityDaysNew), dbzDate, false), "date", "infinity", "infinity after DBZ-2524"},
		{typedValue(int64(-2147472690), dbzDate, false), "date", "5877612-06-23 BC", "not a sentinel (PostgreSQL refuses it)"},
		{typedValue(int64(pgInfinityMicros), dbzMicroTimestamp, false), "timestamp", "infinity", "infinity µs"},
		{typedValue(int64(pgNegInfinityMicros), dbzMicroTimestamp, false), "timestamp", "-infinity", "-infinity µs"},
		{typedValue(int64(pgInfinityMicros/1000), dbzTimestamp, false), "timestamp(3)", "infinity", "infinity ms"},
		{typedValue(int64(pgNegInfinityMicros/1000), dbzTimestamp, false), "timestamp(3)", "-infinity", "-infinity ms"},
		{typedValue(int64(-63517780800000000+500000), dbzMicroTimestamp, false), "timestamp", "0044-03-15T12:00:00.5Z BC", "a BC timestamp"},
		{typedValue(int64(-1), dbzMicroTimestamp, false), "timestamp", "1969-12-31T23:59:59.999999Z", "before 1970"},
	} {
		got, err := convert(c.v, c.col)
		if err != nil || got != c.want {
			t.Errorf("%s: convert(%v) = %v, %v; want %q", c.where, c.v.v, got, err, c.want)
		}
	}
	// Without schemas, the column's type says the value is a date.
	if got, err := convertPlain(t, "-735160", "date", ""); err != nil || got != "0044-03-15 BC" {
		t.Errorf("a BC date without schemas = %v, %v", got, err)
	}
	if got, err := convertPlain(t, "9223372036825200000", "timestamp without time zone", ""); err != nil || got != "infinity" {
		t.Errorf("an infinity timestamp without schemas = %v, %v", got, err)
	}
}

// bit(n) is rebuilt from Debezium's little-endian Bits and the column's length; bit
// varying is refused (its length is not sent); a bit past the column's length is an error.
func TestBits(t *testing.T) {
	b64 := func(b ...byte) string { return base64.StdEncoding.EncodeToString(b) }
	for _, c := range []struct {
		v    value
		col  string
		want string
	}{
		{typedValue(b64(0xa5), dbzBits, true), "bit(8)", "10100101"},
		{typedValue(b64(0x01), dbzBits, true), "bit(8)", "00000001"},
		{typedValue(b64(0x80, 0x00), dbzBits, true), "bit(8)", "10000000"}, // a short's second byte
		{typedValue(b64(0x01, 0x02), dbzBits, true), "bit(12)", "001000000001"},
		{typedValue([]byte{0x05}, dbzBits, false), "bit(3)", "101"}, // Avro: bytes
		{typedValue(true, "", false), "bit(1)", "1"},
		{typedValue(false, "", false), "bit", "0"},
		{value{v: b64(0xff)}, "bit(8)", "11111111"}, // without schemas
	} {
		got, err := convert(c.v, c.col)
		if err != nil || got != c.want {
			t.Errorf("convert(%v) into %s = %v, %v; want %q", c.v.v, c.col, got, err, c.want)
		}
	}
	if _, err := convert(typedValue(b64(0x05), dbzBits, true), "bit varying(64)"); !errors.Is(err, errVarbit) {
		t.Errorf("bit varying: %v, want errVarbit", err)
	}
	if _, err := convert(typedValue(b64(0x00, 0x01), dbzBits, true), "bit(8)"); err == nil || !strings.Contains(err.Error(), "past") {
		t.Errorf("bit 8 of a bit(8): %v, want an error", err)
	}
	// Bits into a bytea column stay bytes.
	if got, err := convert(typedValue(b64(0x05), dbzBits, true), "bytea"); err != nil || string(got.([]byte)) != "\x05" {
		t.Errorf("Bits into bytea = %v, %v", got, err)
	}
}

func TestPoint(t *testing.T) {
	ev, err := decodeJSONValue([]byte(`{"before":null,"after":{"p":{"x":-499.5,"y":1e-7,"wkb":"AQ==","srid":null}},"source":{"schema":"public","table":"t","lsn":5},"op":"c"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := convert(ev.after["p"].value(), "point"); err != nil || got != "(-499.5,1e-7)" {
		t.Errorf("point without schemas = %v, %v", got, err)
	}
	if got, err := convert(typedValue(map[string]any{"x": 1.5, "y": 2.25}, dbzPoint, false), "point"); err != nil || got != "(1.5,2.25)" {
		t.Errorf("point from Avro = %v, %v", got, err)
	}
	// Into jsonb (create: true makes one for a struct): the struct's JSON, as before.
	if got, err := convert(ev.after["p"].value(), "jsonb"); err != nil || !strings.Contains(got.(string), `"x"`) {
		t.Errorf("point into jsonb = %v, %v", got, err)
	}
}

// A money column's value of JSON without schemas is a decimal like numeric(p,2)'s: under
// precise, base64 bytes (it was written as the base64 text, which money refused).
func TestMoneyWithoutSchemas(t *testing.T) {
	for _, c := range []struct{ raw, mode, want string }{
		{`"/0V+smWK"`, DecimalPrecise, "-8010332637.34"}, // 0xff457eb2658a: -801033263734 cents
		{`"AQ=="`, DecimalPrecise, "0.01"},
		{`"-29293.56"`, DecimalString, "-29293.56"},
		{`"+0V+smWK"`, "", mustDecimal(t, "+0V+smWK")}, // unset: + says base64
	} {
		got, err := convertPlain(t, c.raw, "money", c.mode)
		if err != nil || got != c.want {
			t.Errorf("money %s (%s) = %v, %v; want %s", c.raw, c.mode, got, err, c.want)
		}
	}
	var amb *AmbiguousDecimalError
	if _, err := convertPlain(t, `"0000"`, "money", ""); !errors.As(err, &amb) {
		t.Errorf("money 0000 with decimal_handling unset: %v, want *AmbiguousDecimalError", err)
	}
}

func mustDecimal(t *testing.T, s string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	d, err := decimalText(b, 2)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
