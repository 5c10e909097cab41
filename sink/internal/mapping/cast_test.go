package mapping

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosink/eosink/sink"
)

// castRow maps value with one column c (the value's field "v" unless c has a source) and
// returns its value or error.
func castRow(t *testing.T, c Column, value string) (any, error) {
	t.Helper()
	if c.From.IsZero() {
		c.From = MustParseSource("value.v")
	}
	if c.Name == "" {
		c.Name = "col"
	}
	m := Mapping{Key: String, Value: JSON, Columns: []Column{c}}
	if err := m.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	r := &sink.Record{Topic: "t", Value: []byte(value)}
	row, err := m.Row(r, nil)
	if err != nil {
		return nil, err
	}
	// Extract with the column agrees with Row.
	v, xerr := m.ExtractColumn(r, c)
	if xerr != nil || !equalValue(v, row[0]) {
		t.Fatalf("ExtractColumn = %#v, %v; Row gives %#v", v, xerr, row[0])
	}
	return row[0], nil
}

func TestCastEpoch(t *testing.T) {
	for _, tc := range []struct {
		cast Cast
		in   string // the JSON value of field v
		want string // RFC 3339 in UTC
	}{
		{CastEpochMs, `1700000000123`, "2023-11-14T22:13:20.123Z"},
		{CastEpochMs, `"1700000000123"`, "2023-11-14T22:13:20.123Z"}, // a string of digits
		{CastEpochMs, `0`, "1970-01-01T00:00:00Z"},
		{CastEpochMs, `-1`, "1969-12-31T23:59:59.999Z"},
		{CastEpochMs, `-1500`, "1969-12-31T23:59:58.5Z"},
		{CastEpochMs, `1700000000123.456`, "2023-11-14T22:13:20.123456Z"},
		{CastEpochMs, `253402300799999`, "9999-12-31T23:59:59.999Z"}, // the last millisecond
		{CastEpochMs, `-62135596800000`, "0001-01-01T00:00:00Z"},     // the first
		{CastEpochS, `1700000000`, "2023-11-14T22:13:20Z"},
		{CastEpochS, `1700000000.5`, "2023-11-14T22:13:20.5Z"},
		{CastEpochS, `-1.5`, "1969-12-31T23:59:58.5Z"},
		{CastEpochS, `-0`, "1970-01-01T00:00:00Z"},
		{CastEpochS, `1.0000000019`, "1970-01-01T00:00:01.000000001Z"}, // past nanoseconds: dropped
		{CastEpochUs, `1700000000123456`, "2023-11-14T22:13:20.123456Z"},
		{CastEpochUs, `-1`, "1969-12-31T23:59:59.999999Z"},
		{CastEpochUs, `253402300799999999`, "9999-12-31T23:59:59.999999Z"},
		// Beyond float64's 53 bits: a float would round these.
		{CastEpochUs, `9007199254740993`, "2255-06-05T23:47:34.740993Z"},
	} {
		t.Run(tc.cast.String()+"/"+tc.in, func(t *testing.T) {
			got, err := castRow(t, Column{Cast: tc.cast}, `{"v":`+tc.in+`}`)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %v, want %s", got, tc.want)
			}
			// PostgreSQL reads the text; Go agrees on the instant.
			if _, err := time.Parse(time.RFC3339Nano, got.(string)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCastErrors(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, tc := range []struct {
		cast Cast
		in   string
		want string // the error after `mapping: column "col" (value.v): `
	}{
		{CastEpochMs, `"abc"`, `cast epoch_ms: "abc" is not a number`},
		{CastEpochMs, `""`, `cast epoch_ms: "" is not a number`},
		{CastEpochMs, `"12a"`, `cast epoch_ms: "12a" is not a number`},
		{CastEpochMs, `"1."`, `cast epoch_ms: "1." is not a number`},
		{CastEpochMs, `"+1"`, `cast epoch_ms: "+1" is not a number`},
		{CastEpochMs, `1.7e12`, `cast epoch_ms: "1.7e12" is not a number in plain decimal notation (no exponent)`},
		{CastEpochMs, `true`, `cast epoch_ms: "true" is not a number`},
		{CastEpochMs, `{"a":1}`, `cast epoch_ms: "{\"a\":1}" is not a number`},
		{CastEpochMs, `253402300800000`, `cast epoch_ms: "253402300800000" is out of range (years 1 to 9999)`},
		{CastEpochMs, `-62135596800001`, `cast epoch_ms: "-62135596800001" is out of range (years 1 to 9999)`},
		{CastEpochS, `9223372036854775808`, `cast epoch_s: "9223372036854775808" is out of range (years 1 to 9999)`},
		{CastEpochUs, `9223372036854775807`, `cast epoch_us: "9223372036854775807" is out of range (years 1 to 9999)`},
		{CastRFC3339, `"2023-11-14"`, `cast rfc3339: "2023-11-14" is not an RFC 3339 timestamp`},
		{CastRFC3339, `"yesterday"`, `cast rfc3339: "yesterday" is not an RFC 3339 timestamp`},
		{CastRFC3339, `"2023-13-14T22:13:20Z"`, `cast rfc3339: "2023-13-14T22:13:20Z" is not an RFC 3339 timestamp`},
		{CastRFC3339, `"2023-11-14T22:13:60Z"`, `cast rfc3339: "2023-11-14T22:13:60Z" is not an RFC 3339 timestamp`},
		{CastRFC3339, `"2023-11-14T22:13:20+0100"`, `cast rfc3339: "2023-11-14T22:13:20+0100" is not an RFC 3339 timestamp`},
		{CastRFC3339, `"0000-01-01T00:00:00Z"`, `cast rfc3339: "0000-01-01T00:00:00Z" is out of range (years 1 to 9999)`},
		{CastRFC3339, `1700000000`, `cast rfc3339: "1700000000" is not an RFC 3339 timestamp`},
		{CastBase64, `"not base64!"`, `cast base64: "not base64!" is not base64 (at byte 3)`},
		{CastBase64, `"QQ="`, `cast base64: "QQ=" is not base64 (at byte 3)`},
		{CastBase64, `"Q"`, `cast base64: "Q" is not base64 (at byte 0)`},
		{CastBase64, `"a+b-"`, `cast base64: "a+b-" is not base64 (at byte 1)`},
		{CastJSON, `"abc"`, `cast json: "abc" is not JSON (syntax error at byte 0)`},
		{CastJSON, `"{\"a\":"`, `cast json: "{\"a\":" is not JSON (unexpected end)`},
		{CastJSON, `""`, `cast json: "" is not JSON (unexpected end)`},
		{CastJSON, `"` + long + `"`, `cast json: "` + long[:castQuote] + `..." is not JSON (syntax error at byte 0)`},
	} {
		t.Run(tc.cast.String()+"/"+tc.in, func(t *testing.T) {
			got, err := castRow(t, Column{Cast: tc.cast}, `{"v":`+tc.in+`}`)
			if err == nil {
				t.Fatalf("got %#v, want an error", got)
			}
			var fe *FieldError
			var ce *CastError
			if !errors.Is(err, ErrCast) || !errors.As(err, &fe) || fe.Column != "col" || !errors.As(err, &ce) || ce.Cast != tc.cast {
				t.Fatalf("error %#v", err)
			}
			if want := `mapping: column "col" (value.v): ` + tc.want; err.Error() != want {
				t.Fatalf("error\n %s\nwant\n %s", err, want)
			}
		})
	}
}

func TestCastRFC3339(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"2023-11-14T22:13:20Z", "2023-11-14T22:13:20Z"},
		{"2023-11-14T22:13:20.123456789Z", "2023-11-14T22:13:20.123456789Z"},
		{"2023-11-14T23:13:20.5+01:00", "2023-11-14T22:13:20.5Z"},
		{"2023-11-14T17:43:20-04:30", "2023-11-14T22:13:20Z"},
		{"2023-11-15T00:13:20+02:00", "2023-11-14T22:13:20Z"}, // across midnight
		{"2023-11-14T22:13:20", "2023-11-14T22:13:20Z"},       // no zone: UTC
		{"2023-11-14T22:13:20.000001", "2023-11-14T22:13:20.000001Z"},
		{"2023-11-14 22:13:20z", "2023-11-14T22:13:20Z"},
		{"2023-11-14t22:13:20+00:00", "2023-11-14T22:13:20Z"},
		{"0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"},
		{"9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999999Z"},
		{"2024-02-29T12:00:00Z", "2024-02-29T12:00:00Z"},
	} {
		got, err := castRow(t, Column{Cast: CastRFC3339}, `{"v":"`+tc.in+`"}`)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"2023-02-29T12:00:00Z", "2023-11-14T25:00:00Z", "2023-11-14T22:13Z", "2023-11-14T22:13:20+01", "2023-11-14T22:13:20ZZ", " 2023-11-14T22:13:20Z"} {
		if got, err := castRow(t, Column{Cast: CastRFC3339}, `{"v":"`+bad+`"}`); !errors.Is(err, ErrCast) {
			t.Errorf("%s: got %v, %v; want a cast error", bad, got, err)
		}
	}
}

func TestCastBase64(t *testing.T) {
	raw := []byte{0xfb, 0xff, 0x00, 'a', 0xfe}
	for _, in := range []string{
		"+/8AYf4=", // standard, padded
		"+/8AYf4",  // standard, unpadded
		"-_8AYf4=", // URL-safe, padded
		"-_8AYf4",  // URL-safe, unpadded
		`+/8A\nYf4=`,
	} {
		got, err := castRow(t, Column{Cast: CastBase64}, `{"v":"`+in+`"}`)
		if err != nil || got != string(raw) {
			t.Errorf("%s: got %q, %v; want %q", in, got, err, raw)
		}
	}
	for in, want := range map[string]string{"": "", "QQ==": "A", "QUI=": "AB", "QUJD": "ABC", "QQ": "A"} {
		got, err := castRow(t, Column{Cast: CastBase64}, `{"v":"`+in+`"}`)
		if err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", in, got, err, want)
		}
	}
	// Into a bytea column, COPY writes the bytes in hex.
	m := Mapping{Value: JSON, Columns: []Column{{Name: "b", From: MustParseSource("value.v"), Cast: CastBase64}}}
	row, err := m.Row(&sink.Record{Value: []byte(`{"v":"+/8AYf4="}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	line, err := AppendCopyRow(nil, row, []bool{true})
	if err != nil || string(line) != `\\xfbff0061fe`+"\n" {
		t.Fatalf("COPY %q, %v", line, err)
	}
}

func TestCastJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"{\"a\":{\"b\":[1,2,{\"c\":null}]}}"`, `{"a":{"b":[1,2,{"c":null}]}}`}, // nested, in a string
		{`" [1, 2] "`, `[1, 2]`},
		{`"12"`, `12`},
		{`"\"s\""`, `"s"`},
		{`{"a": [true]}`, `{"a": [true]}`}, // JSON already
		{`12.5`, `12.5`},
	} {
		got, err := castRow(t, Column{Cast: CastJSON}, `{"v":`+tc.in+`}`)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %v, %v; want %s", tc.in, got, err, tc.want)
		}
		if err == nil && !json.Valid([]byte(got.(string))) {
			t.Errorf("%s: %s is not JSON", tc.in, got)
		}
	}
	// A large document.
	big := `[` + strings.Repeat(`{"k":"v"},`, 200) + `1]`
	esc, _ := json.Marshal(big)
	got, err := castRow(t, Column{Cast: CastJSON}, `{"v":`+string(esc)+`}`)
	if err != nil || got != big {
		t.Fatalf("big: %v", err)
	}
}

func TestCastNullAndDefault(t *testing.T) {
	def := func(s string) *string { return &s }
	for _, tc := range []struct {
		name  string
		c     Column
		value string
		want  any
	}{
		{"null stays null through a cast", Column{Cast: CastEpochMs}, `{"v":null}`, nil},
		{"absent without default", Column{Cast: CastEpochMs}, `{}`, nil},
		{"absent takes the default", Column{Default: def("eu")}, `{}`, "eu"},
		{"a path through a scalar takes the default", Column{From: MustParseSource("value.v.w"), Default: def("eu")}, `{"v":1}`, "eu"},
		{"null does not take the default", Column{Default: def("eu")}, `{"v":null}`, nil},
		{"a value wins", Column{Default: def("eu")}, `{"v":"us"}`, "us"},
		{"an empty string is a value", Column{Default: def("eu")}, `{"v":""}`, ""},
		{"the default is cast", Column{Cast: CastEpochMs, Default: def("0")}, `{}`, "1970-01-01T00:00:00Z"},
		{"an absent header takes the default", Column{From: MustParseSource("header.h"), Default: def("none")}, `{}`, "none"},
		{"an empty default", Column{Default: def("")}, `{}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := castRow(t, tc.c, tc.value)
			if err != nil || !equalValue(got, tc.want) {
				t.Fatalf("got %#v, %v; want %#v", got, err, tc.want)
			}
		})
	}
	// A tombstone: the fields are absent.
	m := Mapping{Value: JSON, Columns: []Column{{Name: "r", From: MustParseSource("value.region"), Default: def("eu")}}}
	row, err := m.Row(&sink.Record{}, nil)
	if err != nil || row[0] != "eu" {
		t.Fatalf("tombstone: %#v, %v", row, err)
	}
}

func TestCastValidate(t *testing.T) {
	def := func(s string) *string { return &s }
	src := MustParseSource("value.v")
	for _, tc := range []struct {
		c    Column
		want string
	}{
		{Column{Name: "a", From: src, Default: def("x"), Required: true}, `mapping: column "a": a default and required exclude each other`},
		{Column{Name: "a", From: src, Cast: Cast(99)}, `mapping: column "a": invalid cast Cast(99)`},
		{Column{Name: "a", From: src, Cast: CastEpochMs, Default: def("soon")}, `mapping: column "a": default: cast epoch_ms: "soon" is not a number`},
		{Column{Name: "a", From: src, Default: def("a\x00b")}, `mapping: column "a": default: text PostgreSQL cannot store: contains a NUL byte`},
	} {
		m := Mapping{Value: JSON, Columns: []Column{tc.c}}
		err := m.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want %s", err, tc.want)
		}
	}
}

func TestParseCast(t *testing.T) {
	for _, name := range []string{"", "epoch_s", "epoch_ms", "epoch_us", "rfc3339", "base64", "json"} {
		c, err := ParseCast(name)
		if err != nil || c.String() != name {
			t.Errorf("%q: %v, %v", name, c, err)
		}
	}
	for _, bad := range []string{"epoch", "EPOCH_MS", "int", "json "} {
		if _, err := ParseCast(bad); err == nil || !strings.Contains(err.Error(), "want epoch_s, epoch_ms, epoch_us, rfc3339, base64 or json") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestCastColumnTypes(t *testing.T) {
	m := Mapping{Value: JSON, Columns: []Column{
		{Name: "a", From: MustParseSource("value.ts"), Cast: CastEpochMs},
		{Name: "b", From: MustParseSource("value.b"), Cast: CastBase64},
		{Name: "c", From: MustParseSource("value.c"), Cast: CastJSON},
		{Name: "d", From: MustParseSource("value.d"), Cast: CastRFC3339},
	}}
	types, err := m.ColumnTypes(&sink.Record{Value: []byte(`{}`)})
	if err != nil || strings.Join(types, ",") != "timestamptz,bytea,jsonb,timestamptz" {
		t.Fatalf("%v, %v", types, err)
	}
}

func TestNotJSONNamesTheSide(t *testing.T) {
	m := Mapping{Key: JSON, Value: JSON, Columns: []Column{
		{Name: "a", From: MustParseSource("value.a")},
		{Name: "b", From: MustParseSource("value")},
	}}
	_, err := m.Row(&sink.Record{Key: []byte(`{}`), Value: []byte(`not json`)}, nil)
	if err == nil || err.Error() != "mapping: value is not JSON: syntax error at byte 0" || !errors.Is(err, ErrInvalidJSON) {
		t.Fatalf("error %v", err)
	}
	_, err = m.Row(&sink.Record{Key: []byte("\xff"), Value: []byte(`{}`)}, []any{})
	if err != nil {
		t.Fatalf("the key is not read: %v", err)
	}
	m.Columns[0].From = MustParseSource("key.k")
	_, err = m.Row(&sink.Record{Key: []byte("\xff"), Value: []byte(`{}`)}, nil)
	if err == nil || err.Error() != "mapping: key is not JSON: not valid UTF-8" {
		t.Fatalf("error %v", err)
	}
}

func TestCastAllocs(t *testing.T) {
	m := Mapping{Value: JSON, Columns: []Column{
		{Name: "a", From: MustParseSource("value.ts"), Cast: CastEpochMs},
		{Name: "b", From: MustParseSource("value.b"), Cast: CastBase64},
		{Name: "c", From: MustParseSource("value.c"), Cast: CastJSON},
		{Name: "d", From: MustParseSource("value.d"), Cast: CastRFC3339},
	}}
	r := &sink.Record{Value: []byte(`{"ts":1700000000123,"b":"+/8AYf4=","c":"{\"x\":[1]}","d":"2023-11-14T22:13:20Z"}`)}
	row := make([]any, 0, 4)
	count := func() float64 {
		return testing.AllocsPerRun(100, func() {
			var err error
			if row, err = m.Row(r, row); err != nil {
				t.Fatal(err)
			}
		})
	}
	withCasts := count()
	for i := range m.Columns {
		m.Columns[i].Cast = CastNone
	}
	without := count()
	// The casts write into the row's shared text: no allocation of their own.
	if withCasts > without {
		t.Fatalf("%v allocations per row with casts, %v without", withCasts, without)
	}
}

// FuzzCast: no cast panics; rfc3339 agrees with time.Parse on what both read; epoch_ms
// agrees with time.UnixMilli on integers; base64 with encoding/base64.
func FuzzCast(f *testing.F) {
	for _, s := range []string{"1700000000123", "-1", "2023-11-14T22:13:20.5+01:00", "2023-11-14 22:13:20", "+/8AYf4=", "-_8", `{"a":1}`, "", "1.5", "9999-12-31T23:59:59.999999999-23:59"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for c := CastEpochS; c <= CastJSON; c++ {
			res, buf, err := c.apply(s, nil)
			if err != nil {
				if !errors.Is(err, ErrCast) {
					t.Fatalf("%v %q: error %v is not a cast error", c, s, err)
				}
				continue
			}
			if c.ColumnType() == "timestamptz" {
				text := string(buf[res.start:res.end])
				if _, perr := time.Parse(time.RFC3339Nano, text); perr != nil {
					t.Fatalf("%v %q gives %q: %v", c, s, text, perr)
				}
			}
		}
		if want, err := time.Parse(time.RFC3339Nano, s); err == nil && want.Year() >= 1 && want.Year() <= 9999 {
			got, ok := parseRFC3339(s)
			if !ok || !got.Equal(want) {
				t.Fatalf("%q: parseRFC3339 %v, %v; time.Parse %v", s, got, ok, want)
			}
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && s[0] != '+' && n > -62135596800000 && n < 253402300799999 {
			res, buf, err := CastEpochMs.apply(s, nil)
			if err != nil || string(buf[res.start:res.end]) != time.UnixMilli(n).UTC().Format(time.RFC3339Nano) {
				t.Fatalf("epoch_ms %q: %q, %v", s, buf, err)
			}
		}
		if want, err := base64.StdEncoding.DecodeString(s); err == nil && !strings.ContainsAny(s, "\r\n") {
			res, buf, err := CastBase64.apply(s, nil)
			if err != nil || string(buf[res.start:res.end]) != string(want) {
				t.Fatalf("base64 %q: %q, %v; want %q", s, buf, err, want)
			}
		}
	})
}
