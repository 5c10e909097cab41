package mapping

import (
	"slices"
	"strings"
	"testing"
)

func cols(exprs ...string) []Column {
	var cs []Column
	for _, e := range exprs {
		name, expr, _ := strings.Cut(e, "=")
		cs = append(cs, Column{Name: name, From: MustParseSource(expr)})
	}
	return cs
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Mapping
		want []string // substrings of the error; none: valid
	}{
		{"empty", Mapping{}, nil},
		{"all sources json", Mapping{Columns: cols("a=key", "b=key.id", "c=value", "d=value.x.0",
			"e=header.h", "f=topic", "g=partition", "h=offset", "i=timestamp")}, nil},
		{"whole sides with other formats", Mapping{Key: String, Value: Bytes, Columns: cols("k=key", "v=value")}, nil},
		{"value path with bytes", Mapping{Value: Bytes, Columns: cols("x=value.x")},
			[]string{`column "x" reads value.x but the value format is bytes, not json`}},
		{"key path with string", Mapping{Key: String, Columns: cols("id=key.id")},
			[]string{`column "id" reads key.id but the key format is string, not json`}},
		{"key path with json key, bytes value", Mapping{Value: Bytes, Columns: cols("id=key.id", "v=value")}, nil},
		{"duplicate", Mapping{Columns: cols("a=key", "b=value", "a=topic")},
			[]string{`column "a" appears more than once`}},
		{"empty name", Mapping{Columns: cols("=key")}, []string{"column 1 has no name"}},
		{"no source", Mapping{Columns: []Column{{Name: "a"}}}, []string{`column "a" has no source`}},
		{"no name, no source", Mapping{Columns: []Column{{}}}, []string{"column 1 has no name", `column "#1" has no source`}},
		{"NUL in name", Mapping{Columns: []Column{{Name: "a\x00", From: MustParseSource("key")}}}, []string{"NUL"}},
		{"bad formats", Mapping{Key: 7, Value: -1}, []string{"invalid key format Format(7)", "invalid value format Format(-1)"}},
		{"schema'd formats without a decoder", Mapping{Value: Avro, Columns: cols("id=value.id")},
			[]string{"need a schema registry decoder"}},
		{"paths on schema'd formats", Mapping{Key: Protobuf, Value: JSONSchema, Decoder: fakeDecoder{},
			Columns: cols("a=key.id", "b=value.after.id", "c=value")}, nil},
		{"several", Mapping{Value: String, Columns: cols("a=value.a", "a=value.b")},
			[]string{`column "a" reads value.a`, `column "a" appears more than once`, `column "a" reads value.b`}},
	} {
		err := tc.m.Validate()
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != nil && err == nil:
			t.Errorf("%s: no error", tc.name)
		case tc.want != nil:
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q lacks %q", tc.name, err, w)
				}
			}
		}
	}
}

func TestColumnNames(t *testing.T) {
	m := Mapping{Columns: cols("a=key", "b=value")}
	if got := m.ColumnNames(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("ColumnNames = %q", got)
	}
}
