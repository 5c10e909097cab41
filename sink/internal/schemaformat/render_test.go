package schemaformat

import (
	"errors"
	"math"
	"math/big"
	"testing"
	"time"
)

func TestDecimalText(t *testing.T) {
	cases := []struct {
		unscaled string
		scale    int
		want     Decimal
	}{
		{"1234567", 2, "12345.67"},
		{"-5", 2, "-0.05"},
		{"0", 2, "0.00"},
		{"5", 0, "5"},
		{"12", -2, "1200"},
		{"0", -2, "0"},
		{"-123456789012345678901234567890", 10, "-12345678901234567890.1234567890"},
	}
	for _, c := range cases {
		u, _ := new(big.Int).SetString(c.unscaled, 10)
		if got := decimalText(u, c.scale); got != c.want {
			t.Errorf("decimalText(%s, %d) = %s, want %s", c.unscaled, c.scale, got, c.want)
		}
	}
	// two's complement, big-endian, as Avro and Connect store the unscaled value
	for _, c := range []struct {
		b    []byte
		want int64
	}{{[]byte{0x01, 0x00}, 256}, {[]byte{0xff}, -1}, {[]byte{0xff, 0x38}, -200}, {nil, 0}, {[]byte{0x80}, -128}} {
		if got := twosComplement(c.b).Int64(); got != c.want {
			t.Errorf("twosComplement(%x) = %d, want %d", c.b, got, c.want)
		}
	}
}

func TestTimeOfDay(t *testing.T) {
	if s, ok := timeOfDay(49506123456, time.Microsecond, 6); !ok || s != "13:45:06.123456" {
		t.Errorf("micros: %q %v", s, ok)
	}
	if s, ok := timeOfDay(49506123, time.Millisecond, 3); !ok || s != "13:45:06.123" {
		t.Errorf("millis: %q %v", s, ok)
	}
	if s, ok := timeOfDay(86400000, time.Millisecond, 3); !ok || s != "24:00:00.000" {
		t.Errorf("24:00: %q %v", s, ok)
	}
	if _, ok := timeOfDay(-1, time.Microsecond, 6); ok {
		t.Error("negative time accepted")
	}
	if _, ok := timeOfDay(86400e6+1, time.Microsecond, 6); ok {
		t.Error("time past 24:00 accepted")
	}
}

func TestText(t *testing.T) {
	ts := time.Date(2023, 11, 14, 22, 13, 20, 123456000, time.FixedZone("x", 3600))
	cases := []struct {
		in   any
		want any
	}{
		{nil, nil},
		{"abc", "abc"},
		{true, "true"},
		{int64(-42), "-42"},
		{0.1, "0.1"},
		{float32Value(0.1), "0.1"},
		{math.NaN(), "NaN"},
		{math.Inf(-1), "-Infinity"},
		{Decimal("12345.67"), "12345.67"},
		{ts, "2023-11-14T21:13:20.123456Z"},
		{time.UnixMilli(1700000000123).UTC(), "2023-11-14T22:13:20.123000Z"},
		{Date("2024-02-29"), "2024-02-29"},
		{TimeOfDay("13:45:06.123456"), "13:45:06.123456"},
		{LocalTimestamp("2024-02-29T13:45:06.123456"), "2024-02-29T13:45:06.123456"},
		{map[string]any{"b": Decimal("1.50"), "a": []any{int64(1), nil}}, `{"a":[1,null],"b":1.50}`},
	}
	for _, c := range cases {
		got, err := Text(c.in)
		if err != nil || got != c.want {
			t.Errorf("Text(%#v) = %#v, %v; want %#v", c.in, got, err, c.want)
		}
	}
	if got, err := Text([]byte{0, 1}); err != nil || string(got.([]byte)) != "\x00\x01" {
		t.Errorf("Text(bytes) = %#v, %v", got, err)
	}
	for _, bad := range []any{"a\x00b", "\xff"} {
		if _, err := Text(bad); !errors.Is(err, ErrNotText) {
			t.Errorf("Text(%q) err = %v, want ErrNotText", bad, err)
		}
	}
}

func TestJSON(t *testing.T) {
	tree := map[string]any{
		"amount":  Decimal("-0.05"),
		"at":      time.UnixMicro(1700000000123456).UTC(),
		"bin":     []byte{0, 1, 255},
		"day":     Date("2024-02-29"),
		"f":       math.Inf(1),
		"n":       int64(9007199254740993), // above 2^53: exact
		"nested":  map[string]any{"q": "a\"b\\c\n\u0001é"},
		"nothing": nil,
		"ok":      false,
	}
	got, err := JSON(tree)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"amount":-0.05,"at":"2023-11-14T22:13:20.123456Z","bin":"AAH/","day":"2024-02-29","f":"Infinity","n":9007199254740993,"nested":{"q":"a\"b\\c\n\u0001é"},"nothing":null,"ok":false}`
	if string(got) != want {
		t.Errorf("JSON =\n%s\nwant\n%s", got, want)
	}
	if _, err := JSON(map[string]any{"k": "\x00"}); !errors.Is(err, ErrNotText) {
		t.Errorf("NUL in JSON: err = %v", err)
	}
}

func TestLookup(t *testing.T) {
	tree := map[string]any{"after": map[string]any{"id": int64(7), "tags": []any{"x", "y"}}}
	if v, ok := Lookup(tree, "after", "id"); !ok || v != int64(7) {
		t.Errorf("after.id = %v %v", v, ok)
	}
	if v, ok := Lookup(tree, "after", "tags", "1"); !ok || v != "y" {
		t.Errorf("after.tags.1 = %v %v", v, ok)
	}
	for _, p := range [][]string{{"before"}, {"after", "id", "x"}, {"after", "tags", "2"}} {
		if _, ok := Lookup(tree, p...); ok {
			t.Errorf("%v found", p)
		}
	}
}
