package mapping

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/schemaformat"
	"github.com/eosink/eosink/sink/plugin"
)

// fakeDecoder gives a fixed tree per input, to test how Row renders decoded trees; the
// decoding itself is tested against the real registry in package schemaformat and in
// test/schema_test.go.
type fakeDecoder map[string]any

func (d fakeDecoder) Decode(f schemaformat.Format, data []byte) (schemaformat.Message, error) {
	v, ok := d[string(data)]
	if !ok {
		return schemaformat.Message{}, fmt.Errorf("%w: no tree for %q", schemaformat.ErrMalformed, data)
	}
	if err, isErr := v.(error); isErr {
		return schemaformat.Message{}, err
	}
	return schemaformat.Message{Value: v, SchemaID: 1}, nil
}

// countingDecoder counts the decodes, to check each side decodes at most once.
type countingDecoder struct {
	fakeDecoder
	n *int
}

func (d countingDecoder) Decode(f schemaformat.Format, data []byte) (schemaformat.Message, error) {
	*d.n++
	return d.fakeDecoder.Decode(f, data)
}

func TestRowSchemad(t *testing.T) {
	ts := time.Date(2024, 2, 29, 13, 45, 6, 123456000, time.UTC)
	tree := map[string]any{
		"after": map[string]any{
			"id": int64(42), "price": schemaformat.Decimal("12345.678900"), "at": ts,
			"day": schemaformat.Date("2024-02-29"), "uid": "0b7c9f2e-1111-4222-8333-444455556666",
			"blob": []byte{0, 1, 0xfe}, "tags": []any{"a", `q"b\`, nil}, "nested": map[string]any{"z": int64(1), "a": []any{true}},
			"ratio": 0.1, "none": nil, "grid": []any{[]any{int64(1), int64(2)}, []any{int64(3), int64(4)}},
		},
	}
	n := 0
	dec := countingDecoder{fakeDecoder{"v1": tree, "k1": map[string]any{"id": "key-1"}}, &n}
	m := &Mapping{Key: Avro, Value: Protobuf, Decoder: dec, Columns: []Column{
		{Name: "id", From: MustParseSource("value.after.id"), Required: true},
		{Name: "price", From: MustParseSource("value.after.price")},
		{Name: "at", From: MustParseSource("value.after.at")},
		{Name: "day", From: MustParseSource("value.after.day")},
		{Name: "uid", From: MustParseSource("value.after.uid")},
		{Name: "blob", From: MustParseSource("value.after.blob")},
		{Name: "tags_json", From: MustParseSource("value.after.tags")},
		{Name: "tags_array", From: MustParseSource("value.after.tags"), Array: true},
		{Name: "tag0", From: MustParseSource("value.after.tags.0")},
		{Name: "nested", From: MustParseSource("value.after.nested")},
		{Name: "ratio", From: MustParseSource("value.after.ratio")},
		{Name: "none", From: MustParseSource("value.after.none")},
		{Name: "absent", From: MustParseSource("value.after.nope")},
		{Name: "through_leaf", From: MustParseSource("value.after.id.x")},
		{Name: "grid", From: MustParseSource("value.after.grid"), Array: true},
		{Name: "k", From: MustParseSource("key.id")},
		{Name: "whole_key", From: MustParseSource("key")},
		{Name: "topic", From: MustParseSource("topic")},
	}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	r := &sink.Record{Topic: "t", Key: []byte("k1"), Value: []byte("v1")}
	row, err := m.Row(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"42", "12345.678900", "2024-02-29T13:45:06.123456Z", "2024-02-29", "0b7c9f2e-1111-4222-8333-444455556666",
		[]byte{0, 1, 0xfe}, `["a","q\"b\\",null]`, `{"a","q\"b\\",NULL}`, "a", `{"a":[true],"z":1}`, "0.1", nil, nil, nil,
		`{{"1","2"},{"3","4"}}`, "key-1", `{"id":"key-1"}`, "t"}
	if !reflect.DeepEqual(row, want) {
		t.Errorf("Row:\n got %#v\nwant %#v", row, want)
	}
	if n != 2 {
		t.Errorf("decoded %d times, want 2 (each side once)", n)
	}

	// Extract reads with the same formats and decoder.
	v, err := m.Extract(r, MustParseSource("value.after.price"))
	if err != nil || v != "12345.678900" {
		t.Errorf("Extract = %v, %v", v, err)
	}

	// A tombstone gives NULL; a required column then fails.
	row, err = m.Row(&sink.Record{Key: []byte("k1")}, row)
	if err == nil || !errors.Is(err, ErrMissing) {
		t.Errorf("tombstone with a required column: %v, %v", row, err)
	}
}

func TestRowSchemadErrors(t *testing.T) {
	unavailable := &schemaformat.RegistryError{SchemaID: 7, Status: 503, Err: errors.New("down")}
	refused := &schemaformat.RegistryError{SchemaID: 7, Status: 401, Err: &url.Error{Op: "Get", URL: "http://r", Err: errors.New("HTTP Unauthorized")}}
	dec := fakeDecoder{"nul": map[string]any{"s": "a\x00b"}, "down": unavailable, "refused": refused,
		"unknown": fmt.Errorf("%w 9", schemaformat.ErrUnknownSchema)}
	m := &Mapping{Value: Avro, Decoder: dec, Columns: []Column{{Name: "s", From: MustParseSource("value.s")}}}
	r := func(v string) *sink.Record { return &sink.Record{Topic: "t", Offset: 5, Value: []byte(v)} }

	_, err := m.Row(r("nul"), nil)
	if !errors.Is(err, ErrInvalidText) || !errors.Is(sink.Poison(r("nul"), err), sink.ErrPoison) {
		t.Errorf("NUL: %v", err)
	}
	for _, tc := range []struct {
		in                string
		poison, transient bool
		wantInner         error
	}{
		{"malformed", true, false, schemaformat.ErrMalformed},
		{"unknown", true, false, schemaformat.ErrUnknownSchema},
		{"down", false, true, schemaformat.ErrRegistryUnavailable},
		{"refused", false, false, nil},
	} {
		_, err := m.Row(r(tc.in), nil)
		if err == nil {
			t.Fatalf("%s: no error", tc.in)
		}
		got := RecordError(r(tc.in), err)
		if errors.Is(got, sink.ErrPoison) != tc.poison || errors.Is(got, sink.ErrTransient) != tc.transient {
			t.Errorf("%s: RecordError = %v (poison %t, transient %t)", tc.in, got, errors.Is(got, sink.ErrPoison), errors.Is(got, sink.ErrTransient))
		}
		if tc.wantInner != nil && !errors.Is(got, tc.wantInner) {
			t.Errorf("%s: %v does not match %v", tc.in, got, tc.wantInner)
		}
		var ne net.Error
		if tc.in == "refused" && (errors.As(got, &ne) || !errors.As(got, new(*schemaformat.RegistryError))) {
			t.Errorf("refused: %v: a net.Error under it (%v) would be retried as a lost connection", got, ne)
		}
	}
}

func TestSetDecoder(t *testing.T) {
	m := Mapping{Value: Avro}
	if err := m.SetDecoder(nil, "key_format", "value_format"); err == nil || err.Error() != "value_format: avro needs the pipeline's schema_registry section (its url at least)" {
		t.Errorf("no registry: %v", err)
	}
	reg := &plugin.SchemaRegistry{URL: "http://127.0.0.1:1/apis/ccompat/v7"}
	if err := m.SetDecoder(reg, "key_format", "value_format"); err != nil || m.Decoder == nil {
		t.Fatalf("SetDecoder: %v", err)
	}
	m2 := Mapping{Key: JSONSchema}
	if err := m2.SetDecoder(&plugin.SchemaRegistry{URL: reg.URL}, "key_format", "value_format"); err != nil || m2.Decoder != m.Decoder {
		t.Errorf("equal registry settings do not share one decoder: %v", err)
	}
	plain := Mapping{}
	if err := plain.SetDecoder(nil, "k", "v"); err != nil || plain.Decoder != nil {
		t.Errorf("json needs no registry: %v", err)
	}
}
