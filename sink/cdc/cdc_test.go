package cdc

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/plugin"
)

// A JsonConverter event with schemas, shaped as Debezium 3.6 writes it: every semantic
// type the plugin converts.
const jsonEvent = `{"schema":{"type":"struct","fields":[
 {"type":"struct","field":"after","fields":[
  {"type":"int64","field":"id"},
  {"type":"int64","name":"io.debezium.time.MicroTimestamp","field":"mts"},
  {"type":"int64","name":"io.debezium.time.Timestamp","field":"ts"},
  {"type":"int32","name":"io.debezium.time.Date","field":"day"},
  {"type":"string","name":"io.debezium.time.ZonedTimestamp","field":"zts"},
  {"type":"int64","name":"io.debezium.time.MicroTime","field":"t"},
  {"type":"struct","name":"io.debezium.data.VariableScaleDecimal","field":"vs","fields":[{"type":"int32","field":"scale"},{"type":"bytes","field":"value"}]},
  {"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"3","connect.decimal.precision":"12"},"field":"dec"},
  {"type":"string","field":"decs"},
  {"type":"string","name":"io.debezium.data.Json","field":"j"},
  {"type":"string","name":"io.debezium.data.Uuid","field":"u"},
  {"type":"bytes","field":"b"}]},
 {"type":"struct","field":"source","fields":[]},{"type":"string","field":"op"}]},
"payload":{"before":null,"after":{"id":7,"mts":1796081150152718,"ts":1796081150152,"day":19000,
 "zts":"2026-11-30T12:34:56.123456Z","t":45296123456,"vs":{"scale":2,"value":"/4U="},"dec":"ME0=","decs":"-12.340",
 "j":"{\"a\": [1, 2]}","u":"6f1c8a8e-2d4b-4c1e-9a51-0b7a7f3e2c11","b":"AAH+/w=="},
 "source":{"db":"src","schema":"public","table":"items","lsn":30787032,"sequence":"[\"30786000\",\"30787032\"]","txId":731},
 "op":"c"}}`

func TestJSONEventWithSchemas(t *testing.T) {
	ev, err := decodeJSONValue([]byte(jsonEvent))
	if err != nil {
		t.Fatal(err)
	}
	if ev.op != "c" || ev.schema != "public" || ev.table != "items" || ev.commit != 30786000 || ev.lsn != 30787032 {
		t.Fatalf("envelope: %+v", ev)
	}
	want := map[string]any{
		"id":   "7",
		"mts":  "2026-11-30T23:25:50.152718Z",
		"ts":   "2026-11-30T23:25:50.152Z",
		"day":  "2022-01-08",
		"zts":  "2026-11-30T12:34:56.123456Z",
		"t":    "12:34:56.123456",
		"vs":   "-1.23",
		"dec":  "12.365",
		"decs": "-12.340",
		"j":    `{"a": [1, 2]}`,
		"u":    "6f1c8a8e-2d4b-4c1e-9a51-0b7a7f3e2c11",
		"b":    []byte{0, 1, 0xfe, 0xff},
	}
	for f, w := range want {
		got, err := convert(ev.after[f].value(), "text")
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if wb, ok := w.([]byte); ok {
			if gb, _ := got.([]byte); !bytes.Equal(gb, wb) {
				t.Errorf("%s = %v, want %v", f, got, w)
			}
		} else if got != w {
			t.Errorf("%s = %v, want %v", f, got, w)
		}
	}
}

// Without schemas, the target column's type is the hint.
func TestJSONEventWithoutSchemas(t *testing.T) {
	ev, err := decodeJSONValue([]byte(`{"before":null,"after":{"id":1,"mts":1796081150152718,"ms":1796081150152,"day":19000,
"vs":{"scale":1,"value":"Dw=="},"dec":"ME0=","decs":"1.50","b":"AAE=","n":3,"t":45296123456},
"source":{"schema":"public","table":"t","lsn":5,"sequence":"[null,\"5\"]"},"op":"r"}`))
	if err != nil {
		t.Fatal(err)
	}
	if ev.commit != 0 || ev.lsn != 5 {
		t.Errorf("snapshot read position (%d, %d), want (0, 5)", ev.commit, ev.lsn)
	}
	cases := []struct{ f, col, want string }{
		{"mts", "timestamp without time zone", "2026-11-30T23:25:50.152718Z"},
		{"ms", "timestamp(3) without time zone", "2026-11-30T23:25:50.152Z"},
		{"day", "date", "2022-01-08"},
		{"vs", "numeric", "1.5"},
		{"dec", "numeric(12,3)", "12.365"},
		{"decs", "numeric(12,2)", "1.50"},
		{"b", "bytea", "\x00\x01"},
		{"n", "integer", "3"},
		{"t", "time without time zone", "12:34:56.123456"},
	}
	for _, c := range cases {
		got, err := convert(ev.after[c.f].value(), c.col)
		if err != nil {
			t.Errorf("%s: %v", c.f, err)
			continue
		}
		if b, ok := got.([]byte); ok {
			got = string(b)
		}
		if got != c.want {
			t.Errorf("%s as %s = %q, want %q", c.f, c.col, got, c.want)
		}
	}
}

func TestPosition(t *testing.T) {
	for _, c := range []struct {
		src         map[string]any
		op          string
		commit, lsn int64
		wantErr     bool
	}{
		{map[string]any{"lsn": int64(10), "sequence": `["8","10"]`}, "u", 8, 10, false},
		{map[string]any{"lsn": int64(10), "sequence": `[null,"10"]`}, "c", 10, 10, false},
		{map[string]any{"lsn": int64(10)}, "d", 10, 10, false},
		{map[string]any{"lsn": int64(10), "sequence": `["8","10"]`}, "r", 0, 10, false},
		{map[string]any{}, "c", 0, 0, true},
		{map[string]any{"lsn": int64(1), "sequence": "x"}, "c", 0, 0, true},
	} {
		commit, lsn, err := position(c.src["lsn"], c.src["sequence"], c.op)
		if (err != nil) != c.wantErr || commit != c.commit || lsn != c.lsn {
			t.Errorf("position(%v, %s) = (%d, %d, %v)", c.src, c.op, commit, lsn, err)
		}
	}
}

func TestDecimalText(t *testing.T) {
	for _, c := range []struct {
		b     []byte
		scale int
		want  string
	}{
		{[]byte{0x30, 0x4d}, 3, "12.365"},
		{[]byte{0xff, 0x85}, 2, "-1.23"},
		{[]byte{0x05}, 4, "0.0005"},
		{[]byte{0x05}, -2, "500"},
		{[]byte{}, 0, "0"},
	} {
		if got, err := decimalText(c.b, c.scale); err != nil || got != c.want {
			t.Errorf("decimalText(%x, %d) = %s, want %s", c.b, c.scale, got, c.want)
		}
	}
	if _, err := base64.StdEncoding.DecodeString("ME0="); err != nil {
		t.Fatal(err)
	}
}

func TestTemplates(t *testing.T) {
	for _, c := range []struct{ tmpl, want string }{
		{"${source.schema}.${source.table}", `"public"."items"`},
		{"replica.${source.table}", `"replica"."items"`},
		{"${source.table}_copy", `"public"."items_copy"`},
		{"r_${source.db}.${source.table}", `"r_src"."items"`},
		{"x.${topic}", `"x"."cdc.public.items"`},
	} {
		tp, err := parseTemplate(c.tmpl, "public")
		if err != nil {
			t.Errorf("%s: %v", c.tmpl, err)
			continue
		}
		if got := tp.render("src", "public", "items", "cdc.public.items").Sanitize(); got != c.want {
			t.Errorf("%s → %s, want %s", c.tmpl, got, c.want)
		}
	}
	for _, bad := range []string{"", "a.b.c", "${nope}.t", "a.$x", ".t"} {
		if _, err := parseTemplate(bad, "public"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	c := Config{Table: "replica.${source.table}", Tables: map[string]TableConfig{"public.big": {Table: "archive.big", Exclude: []string{"blob"}}}}
	rs, err := c.routes()
	if err != nil {
		t.Fatal(err)
	}
	if got := rs.lookup("public", "big").tmpl.render("", "public", "big", "").Sanitize(); got != `"archive"."big"` {
		t.Errorf("override: %s", got)
	}
	if rs.lookup("public", "big").replicated("blob") || !rs.lookup("public", "other").replicated("blob") {
		t.Error("exclude applies to its table only")
	}
}

func TestUnknownOpAndMalformed(t *testing.T) {
	if _, err := decodeJSONValue([]byte(`{"x":1}`)); err == nil {
		t.Error("not an envelope: no error")
	}
	if _, err := decodeJSONValue([]byte(`{"op":"c","source":{"schema":"s","table":"t"}}`)); err == nil {
		t.Error("no lsn: no error")
	}
	if _, err := decodeJSONValue([]byte(`{`)); err == nil {
		t.Error("invalid JSON: no error")
	}
}

// format: avro takes the pipeline's schema_registry section; the plugin has no registry of
// its own.
func TestAvroNeedsPipelineRegistry(t *testing.T) {
	build := func(raw map[string]any, reg *plugin.SchemaRegistry) error {
		_, err := plugin.Build(plugin.Config{Path: "sink", Schema: "eosink", Raw: raw, SchemaRegistry: reg})
		return err
	}
	err := build(map[string]any{"type": "cdc", "format": "avro", "schemas": []any{"public"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "format: avro needs the pipeline's schema_registry section") {
		t.Errorf("avro without schema_registry: %v", err)
	}
	reg := &plugin.SchemaRegistry{URL: "http://127.0.0.1:1/apis/ccompat/v7"}
	if err := build(map[string]any{"type": "cdc", "format": "avro", "schemas": []any{"public"}}, reg); err != nil {
		t.Errorf("avro with schema_registry: %v", err)
	}
	if err := build(map[string]any{"type": "cdc", "schemas": []any{"public"}}, reg); err != nil {
		t.Errorf("json with schema_registry: %v", err)
	}
	if err := build(map[string]any{"type": "cdc", "format": "avro", "schemas": []any{"public"}, "registry": map[string]any{"url": reg.URL}}, reg); err == nil {
		t.Error("the plugin's own registry section: no error")
	}
	p1, err1 := New(Config{Format: "avro", Schemas: []string{"public"}, SchemaRegistry: reg})
	p2, err2 := New(Config{Format: "avro", Schemas: []string{"public"}, SchemaRegistry: &plugin.SchemaRegistry{URL: reg.URL}})
	if err1 != nil || err2 != nil || p1.dec != p2.dec {
		t.Errorf("equal registry settings share one decoder: %v %v", err1, err2)
	}
}

// A registry that cannot be reached makes the record's decode transient, not poison; bytes
// that are not in the wire format are poison.
func TestDecodeErrorsSort(t *testing.T) {
	p, err := New(Config{Format: "avro", Schemas: []string{"public"}, SchemaRegistry: &plugin.SchemaRegistry{URL: "http://127.0.0.1:1", Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	r := &sink.Record{Topic: "t", Value: []byte{0, 0, 0, 0, 42, 2}}
	if _, err := p.decode(r); !errors.Is(err, sink.ErrTransient) || errors.Is(err, sink.ErrPoison) {
		t.Errorf("registry unreachable: %v, want transient", err)
	}
	r.Value = []byte("{}")
	if _, err := p.decode(r); !errors.Is(err, sink.ErrPoison) {
		t.Errorf("not the wire format: %v, want poison", err)
	}
}
