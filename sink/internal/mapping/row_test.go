package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eosink/eosink/sink"
)

const doc = `{
	"id": "ev-1", "n": 12.50, "neg": -1e3, "t": true, "f": false, "nil": null,
	"user": {"name": "alice", "address": {"city": "Zürich"}},
	"items": [{"sku": "A"}, {"sku": "B", "qty": 2}],
	"obj": {"a": [1, 2]}, "arr": [1, "two", null],
	"zero": {"0": "key zero"},
	"a.b": "dot", "a*b": "star", "a?b": "question", "a|b": "pipe", "#": "hash", "@this": "at",
	"a!b": "bang", "a\\b": "backslash", "k y": "space", "ключ": "unicode", "a\u002ec": "escaped dot",
	"esc": "tab\there \"quoted\" \u00e9 \ud83d\ude00 \\ /", "nul": "x\u0000y",
	"lone": "\ud800", "dup": 1, "dup": 2, "empty": ""
}`

var ts = time.Date(2024, 5, 6, 7, 8, 9, 123000000, time.FixedZone("CEST", 2*3600))

func record() *sink.Record {
	return &sink.Record{
		Topic: "orders", Partition: 3, Offset: 42,
		Key:   []byte(`{"id": 7, "region": "eu"}`),
		Value: []byte(doc),
		Headers: []sink.Header{
			{Key: "trace", Value: []byte("first")},
			{Key: "trace", Value: []byte("last")},
			{Key: "empty", Value: []byte{}},
			{Key: "null", Value: nil},
			{Key: "bad", Value: []byte("\xff")},
			{Key: "nul", Value: []byte("a\x00")},
			{Key: "a.b", Value: []byte("dotted")},
		},
		Timestamp: ts,
	}
}

func TestRowSources(t *testing.T) {
	type tc struct {
		expr     string
		key, val Format
		edit     func(r *sink.Record)
		want     any   // expected value when err is nil
		err      error // expected error (errors.Is); nil: none
	}
	tests := []tc{
		// value fields
		{expr: "value.id", want: "ev-1"},
		{expr: "value.n", want: "12.50"},
		{expr: "value.neg", want: "-1e3"},
		{expr: "value.t", want: "true"},
		{expr: "value.f", want: "false"},
		{expr: "value.nil", want: nil},
		{expr: "value.missing", want: nil},
		{expr: "value.id.deeper", want: nil},
		{expr: "value.user.name", want: "alice"},
		{expr: "value.user.address.city", want: "Zürich"},
		{expr: "value.user", want: `{"name": "alice", "address": {"city": "Zürich"}}`},
		{expr: "value.obj", want: `{"a": [1, 2]}`},
		{expr: "value.arr", want: `[1, "two", null]`},
		{expr: "value.arr.1", want: "two"},
		{expr: "value.arr.2", want: nil},
		{expr: "value.arr.3", want: nil},
		{expr: "value.items.1.sku", want: "B"},
		{expr: "value.items.1.qty", want: "2"},
		{expr: "value.items.0.qty", want: nil},
		{expr: "value.zero.0", want: "key zero"},
		{expr: `value.a\.b`, want: "dot"},
		{expr: "value.a*b", want: "star"},
		{expr: `value.a\*b`, want: "star"},
		{expr: "value.a?b", want: "question"},
		{expr: "value.a|b", want: "pipe"},
		{expr: "value.#", want: "hash"},
		{expr: "value.@this", want: "at"},
		{expr: "value.a!b", want: "bang"},
		{expr: `value.a\\b`, want: "backslash"},
		{expr: "value.k y", want: "space"},
		{expr: "value.ключ", want: "unicode"},
		{expr: `value.a\.c`, want: "escaped dot"},
		{expr: "value.esc", want: "tab\there \"quoted\" é 😀 \\ /"},
		{expr: "value.lone", want: "\uFFFD"},
		{expr: "value.dup", want: "1"},
		{expr: "value.empty", want: ""},
		{expr: "value.nul", err: ErrInvalidText},
		{expr: "value.a", edit: func(r *sink.Record) { r.Value = []byte(`{"a":"\u00C9\u00e9"}`) }, want: "Éé"},
		{expr: "value.a", edit: func(r *sink.Record) { r.Value = []byte(`{"a":"` + strings.Repeat(`x\n`, 600) + `"}`) }, want: strings.Repeat("x\n", 600)},
		{expr: "value.a", edit: func(r *sink.Record) { r.Value = []byte(`{"a":"` + strings.Repeat(`x\n`, 600) + `\u0000"}`) }, err: ErrInvalidText},
		{expr: "value.a.1234567890", edit: func(r *sink.Record) { r.Value = []byte(`{"a":[1,2]}`) }, want: nil},
		{expr: "value.a.1234567890", edit: func(r *sink.Record) { r.Value = []byte(`{"a":{"1234567890":"long"}}`) }, want: "long"},
		// the whole value
		{expr: "value", val: JSON, edit: func(r *sink.Record) { r.Value = []byte(" \n{\"a\": 1}\t\r\n") }, want: `{"a": 1}`},
		{expr: "value", val: JSON, edit: func(r *sink.Record) { r.Value = []byte(`"abc"`) }, want: `"abc"`},
		{expr: "value", val: JSON, edit: func(r *sink.Record) { r.Value = []byte(`12`) }, want: `12`},
		{expr: "value", val: JSON, edit: func(r *sink.Record) { r.Value = []byte(`null`) }, want: `null`},
		{expr: "value", val: String, edit: func(r *sink.Record) { r.Value = []byte("plain text") }, want: "plain text"},
		{expr: "value", val: String, edit: func(r *sink.Record) { r.Value = []byte("{bad json") }, want: "{bad json"},
		{expr: "value", val: String, edit: func(r *sink.Record) { r.Value = []byte{} }, want: ""},
		{expr: "value", val: String, edit: func(r *sink.Record) { r.Value = []byte("a\x00b") }, err: ErrInvalidText},
		{expr: "value", val: String, edit: func(r *sink.Record) { r.Value = []byte("a\xc3") }, err: ErrInvalidText},
		{expr: "value", val: Bytes, edit: func(r *sink.Record) { r.Value = []byte("\x00\xff") }, want: []byte("\x00\xff")},
		{expr: "value", val: Bytes, edit: func(r *sink.Record) { r.Value = []byte{} }, want: []byte{}},
		// the value not valid JSON
		{expr: "value", edit: func(r *sink.Record) { r.Value = []byte(`{"a":`) }, err: ErrInvalidJSON},
		{expr: "value.a", edit: func(r *sink.Record) { r.Value = []byte(`{"a":1}}`) }, err: ErrInvalidJSON},
		{expr: "value.a", edit: func(r *sink.Record) { r.Value = []byte(`{"a":1,}`) }, err: ErrInvalidJSON},
		{expr: "value.a", edit: func(r *sink.Record) { r.Value = []byte(`{'a':1}`) }, err: ErrInvalidJSON},
		{expr: "value.a", edit: func(r *sink.Record) { r.Value = []byte{} }, err: ErrInvalidJSON},
		{expr: "value.a", edit: func(r *sink.Record) { r.Value = []byte("{\"a\":\"\xff\"}") }, err: ErrInvalidJSON},
		{expr: "value.b", edit: func(r *sink.Record) { r.Value = []byte("{\"a\":\"\xff\"}") }, err: ErrInvalidJSON},
		{expr: "value.a", edit: func(r *sink.Record) { r.Value = []byte("{\"a\":\"x\x00\"}") }, err: ErrInvalidJSON},
		{expr: "value.a", edit: func(r *sink.Record) { r.Value = []byte("{\"a\":1}\x00") }, err: ErrInvalidJSON},
		{expr: "value.a", edit: func(r *sink.Record) { r.Value = []byte(deepJSON(maxDepth + 1)) }, err: ErrInvalidJSON},
		{expr: "value.a", edit: func(r *sink.Record) { r.Value = []byte(deepJSON(maxDepth)) }, want: deepJSON(maxDepth)[5 : len(deepJSON(maxDepth))-1]},
		// invalid JSON is not looked at when no column reads it as JSON
		{expr: "topic", edit: func(r *sink.Record) { r.Value = []byte(`{bad`) }, want: "orders"},
		{expr: "key.id", edit: func(r *sink.Record) { r.Value = []byte(`{bad`) }, want: "7"},
		// a top-level array
		{expr: "value.1.a", edit: func(r *sink.Record) { r.Value = []byte(`[{"a":1},{"a":"x"}]`) }, want: "x"},
		// tombstone and null key
		{expr: "value", edit: func(r *sink.Record) { r.Value = nil }, want: nil},
		{expr: "value", val: Bytes, edit: func(r *sink.Record) { r.Value = nil }, want: nil},
		{expr: "value", val: String, edit: func(r *sink.Record) { r.Value = nil }, want: nil},
		{expr: "value.id", edit: func(r *sink.Record) { r.Value = nil }, want: nil},
		{expr: "key", edit: func(r *sink.Record) { r.Key = nil }, want: nil},
		{expr: "key.id", edit: func(r *sink.Record) { r.Key = nil }, want: nil},
		// key
		{expr: "key", want: `{"id": 7, "region": "eu"}`},
		{expr: "key.region", want: "eu"},
		{expr: "key", key: String, edit: func(r *sink.Record) { r.Key = []byte("user-7") }, want: "user-7"},
		{expr: "key", key: Bytes, edit: func(r *sink.Record) { r.Key = []byte{1, 2} }, want: []byte{1, 2}},
		{expr: "key.id", edit: func(r *sink.Record) { r.Key = []byte("user-7") }, err: ErrInvalidJSON},
		{expr: "value.id", edit: func(r *sink.Record) { r.Key = []byte("user-7") }, want: "ev-1"},
		// headers
		{expr: "header.trace", want: "last"},
		{expr: "header.empty", want: ""},
		{expr: "header.null", want: nil},
		{expr: "header.absent", want: nil},
		{expr: "header.TRACE", want: nil},
		{expr: "header.a.b", want: "dotted"},
		{expr: "header.bad", err: ErrInvalidText},
		{expr: "header.nul", err: ErrInvalidText},
		// meta
		{expr: "topic", want: "orders"},
		{expr: "partition", want: "3"},
		{expr: "offset", want: "42"},
		{expr: "offset", edit: func(r *sink.Record) { r.Offset = 1<<63 - 1 }, want: "9223372036854775807"},
		{expr: "timestamp", want: "2024-05-06T05:08:09.123Z"},
		{expr: "timestamp", edit: func(r *sink.Record) { r.Timestamp = time.Unix(0, 1).UTC() }, want: "1970-01-01T00:00:00.000000001Z"},
		{expr: "timestamp", edit: func(r *sink.Record) { r.Timestamp = time.Time{} }, want: nil},
		{expr: "timestamp", edit: func(r *sink.Record) { r.Timestamp = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, err: ErrTimestampRange},
		{expr: "topic", edit: func(r *sink.Record) { r.Topic = "a\x00" }, err: ErrInvalidText},
		{expr: "topic", edit: func(r *sink.Record) { r.Topic = "a\xff" }, err: ErrInvalidText},
	}
	for _, tc := range tests {
		name := tc.expr
		r := record()
		if tc.edit != nil {
			tc.edit(r)
			name += "/" + strings.ReplaceAll(fmt.Sprintf("%.20q", r.Value), " ", "")
		}
		t.Run(name, func(t *testing.T) {
			for _, required := range []bool{false, true} {
				m := Mapping{Key: tc.key, Value: tc.val, Columns: []Column{{Name: "c", From: MustParseSource(tc.expr), Required: required}}}
				if err := m.Validate(); err != nil {
					t.Fatal(err)
				}
				checkAppendCopy(t, &m, r)
				row, err := m.Row(r, nil)
				wantErr := tc.err
				if wantErr == nil && tc.want == nil && required {
					wantErr = ErrMissing
				}
				if wantErr != nil {
					if !errors.Is(err, wantErr) {
						t.Fatalf("required=%v: Row = %q, %v; want error %v", required, row, err, wantErr)
					}
					var fe *FieldError
					if side := MustParseSource(tc.expr).Side(); errors.Is(err, ErrInvalidJSON) && (side == "key" || side == "value") {
						// The side as a whole is bad: no column is blamed.
						if !errors.As(err, &fe) || fe.Column != "" || fe.Source != side || !strings.HasPrefix(err.Error(), "mapping: "+side+" is not JSON: ") {
							t.Fatalf("error %#v (%q) does not say the %s is not JSON", err, err, side)
						}
						continue
					}
					if !errors.As(err, &fe) || fe.Column != "c" || fe.Source != tc.expr {
						t.Fatalf("error %#v does not name the column and source", err)
					}
					if !strings.HasPrefix(err.Error(), `mapping: column "c" (`+tc.expr+`): `) {
						t.Errorf("error message %q", err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("required=%v: %v", required, err)
				}
				if len(row) != 1 || !equalValue(row[0], tc.want) {
					t.Fatalf("required=%v: Row = %#v, want %#v", required, row, tc.want)
				}
			}
			// Extract gives what Row gives.
			v, err := Extract(r, MustParseSource(tc.expr), tc.key, tc.val)
			if tc.err != nil {
				prefix := "mapping: " + tc.expr + ": "
				if (tc.expr == "key" || tc.expr == "value") && errors.Is(tc.err, ErrInvalidJSON) {
					prefix = "mapping: " + tc.expr + " is not JSON: "
				}
				if !errors.Is(err, tc.err) || !strings.HasPrefix(err.Error(), prefix) {
					t.Fatalf("Extract = %v, want error %v", err, tc.err)
				}
			} else if err != nil || !equalValue(v, tc.want) {
				t.Fatalf("Extract = %#v, %v; want %#v", v, err, tc.want)
			}
		})
	}
}

func deepJSON(depth int) string {
	return `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
}

func equalValue(got, want any) bool {
	switch w := want.(type) {
	case nil:
		return got == nil
	case string:
		g, ok := got.(string)
		return ok && g == w
	case []byte:
		g, ok := got.([]byte)
		return ok && g != nil && bytes.Equal(g, w)
	}
	return false
}

// Every byte can be part of a key, given the path escapes . and \ with a backslash.
func TestRowKeyCharacters(t *testing.T) {
	for c := 1; c < 128; c++ {
		key := "a" + string(rune(c)) + "b"
		kj, _ := json.Marshal(key)
		r := &sink.Record{Value: []byte(`{"ab": 0, "a": {"b": 1}, ` + string(kj) + `: "hit"}`)}
		path := key
		if c == '.' || c == '\\' {
			path = `a\` + string(rune(c)) + "b"
		}
		src, err := ParseSource("value." + path)
		if err != nil {
			t.Errorf("byte %#x: %v", c, err)
			continue
		}
		v, err := Extract(r, src, JSON, JSON)
		if err != nil || v != "hit" {
			t.Errorf("byte %#x: key %q via %q: %#v, %v", c, key, src, v, err)
		}
	}
}

func TestRowMultipleColumns(t *testing.T) {
	m := Mapping{Columns: []Column{
		{Name: "id", From: MustParseSource("value.id"), Required: true},
		{Name: "key", From: MustParseSource("key.id")},
		{Name: "city", From: MustParseSource("value.user.address.city")},
		{Name: "missing", From: MustParseSource("value.nope")},
		{Name: "t", From: MustParseSource("value.t")},
		{Name: "body", From: MustParseSource("value.obj")},
		{Name: "esc", From: MustParseSource("value.esc")},
		{Name: "trace", From: MustParseSource("header.trace")},
		{Name: "topic", From: MustParseSource("topic")},
		{Name: "partition", From: MustParseSource("partition")},
		{Name: "offset", From: MustParseSource("offset")},
		{Name: "ts", From: MustParseSource("timestamp")},
	}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []any{"ev-1", "7", "Zürich", nil, "true", `{"a": [1, 2]}`, "tab\there \"quoted\" é 😀 \\ /",
		"last", "orders", "3", "42", "2024-05-06T05:08:09.123Z"}
	r := record()
	dst := make([]any, 0, 2)
	for range 3 {
		var err error
		dst, err = m.Row(r, dst)
		if err != nil {
			t.Fatal(err)
		}
		if len(dst) != len(want) {
			t.Fatalf("Row = %#v", dst)
		}
		for i := range want {
			if !equalValue(dst[i], want[i]) {
				t.Errorf("column %s = %#v, want %#v", m.Columns[i].Name, dst[i], want[i])
			}
		}
	}
	// The text does not alias the record.
	for i := range r.Value {
		r.Value[i] = 'X'
	}
	for i := range r.Headers {
		clear(r.Headers[i].Value)
	}
	for i := range want {
		if !equalValue(dst[i], want[i]) {
			t.Errorf("after the record changed, column %s = %#v, want %#v", m.Columns[i].Name, dst[i], want[i])
		}
	}
	// A poison record leaves an empty row.
	r = record()
	r.Value = []byte(`{"id": null}`)
	dst, err := m.Row(r, dst)
	if !errors.Is(err, ErrMissing) || len(dst) != 0 {
		t.Fatalf("Row = %#v, %v; want ErrMissing", dst, err)
	}
	if want := `mapping: column "id" (value.id): required value is missing: JSON null`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// A large text value gets its own allocation, and both sizes mix in a row.
func TestRowLargeText(t *testing.T) {
	big := strings.Repeat("x", 3*bigText)
	r := &sink.Record{Value: []byte(`{"big": "` + big + `", "small": "s"}`), Headers: []sink.Header{{Key: "h", Value: []byte(big)}}}
	m := Mapping{Value: JSON, Columns: cols("c=value", "a=value.small", "b=value.big", "d=header.h", "e=value.small")}
	row, err := m.Row(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{string(r.Value), "s", big, big, "s"}
	for i := range want {
		if !equalValue(row[i], want[i]) {
			t.Errorf("column %d = %.20q..., want %.20q...", i, row[i], want[i])
		}
	}
}

func TestRowErrorsDoNotLeakContent(t *testing.T) {
	const secret = "hunter2-secret"
	for _, tc := range []struct {
		m Mapping
		v string
	}{
		{Mapping{Columns: cols("a=value.a")}, `{"a": "` + secret + `",`},
		{Mapping{Columns: cols("a=value.a")}, `{"a": "` + secret + `\u0000"}`},
		{Mapping{Value: String, Columns: cols("a=value")}, secret + "\xff"},
		{Mapping{Columns: cols("a=value.a")}, "{\"a\": \"" + secret + "\xff\"}"},
	} {
		_, err := tc.m.Row(&sink.Record{Value: []byte(tc.v)}, nil)
		if err == nil {
			t.Errorf("%q: no error", tc.v)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error %q shows the record's content", err)
		}
	}
}

// Row on a mapping that failed Validate returns errors, never panics.
func TestRowInvalidMapping(t *testing.T) {
	for _, m := range []Mapping{
		{Value: Bytes, Columns: cols("a=value.a")},
		{Key: String, Columns: cols("a=key.a")},
		{Value: 9, Columns: cols("a=value")},
		{Columns: []Column{{Name: "a"}}},
	} {
		if _, err := m.Row(record(), nil); err == nil {
			t.Errorf("%+v: no error", m)
		}
	}
}
