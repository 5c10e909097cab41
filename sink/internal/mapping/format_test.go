package mapping

import (
	"strings"
	"testing"
)

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Format
	}{
		{"json", JSON},
		{"bytes", Bytes},
		{"string", String},
		{"avro", Avro},
		{"protobuf", Protobuf},
		{"json_schema", JSONSchema},
	} {
		got, err := ParseFormat(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
		var f Format = 99
		if err := f.UnmarshalText([]byte(tc.in)); err != nil || f != tc.want {
			t.Errorf("UnmarshalText(%q) = %v, %v", tc.in, f, err)
		}
		if b, err := tc.want.MarshalText(); err != nil || string(b) != tc.in {
			t.Errorf("MarshalText(%v) = %q, %v", tc.want, b, err)
		}
	}
	for _, bad := range []string{"", "JSON", "text", "AVRO", "jsonschema", " json"} {
		_, err := ParseFormat(bad)
		if err == nil {
			t.Errorf("ParseFormat(%q) succeeded", bad)
			continue
		}
		for _, want := range []string{"json", "bytes", "string", "(want"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("ParseFormat(%q) error %q does not mention %q", bad, err, want)
			}
		}
		var f Format
		if f.UnmarshalText([]byte(bad)) == nil {
			t.Errorf("UnmarshalText(%q) succeeded", bad)
		}
	}
	if s := Format(7).String(); s != "Format(7)" {
		t.Errorf("Format(7).String() = %q", s)
	}
	if _, err := Format(-1).MarshalText(); err == nil {
		t.Error("MarshalText of an invalid format succeeded")
	}
}
