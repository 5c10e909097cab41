package cdc

import (
	"bytes"
	"encoding/json"
	"testing"
)

// schemalessRead is a snapshot read as the JsonConverter writes it with schemas.enable=false.
const schemalessRead = `{"before":null,"after":{"id":1234567,"account":"acct-0042","qty":17},"source":{"version":"3.6.0.Final",` +
	`"connector":"postgresql","name":"bench","ts_ms":1764486000000,"snapshot":"true","db":"shop","sequence":"[null,\"16777216\"]",` +
	`"ts_us":1764486000000000,"ts_ns":1764486000000000000,"schema":"public","table":"items","txId":777,"lsn":16777216,"xmin":null},` +
	`"transaction":null,"op":"r","ts_ms":1764486000001,"ts_us":1764486000001000,"ts_ns":1764486000001000000}`

// BenchmarkDecodeJSONValue decodes one JsonConverter change event with schemas, the shape
// Debezium writes: the schema is most of the bytes and repeats on every record. compact is
// how the JsonConverter writes it; spaced has white space between the fields, which the
// fast path (lastSchema) does not take; schemaless is a read without schemas. onepass is
// decodeJSONValue (fastEvent where it can), maps the general path alone.
func BenchmarkDecodeJSONValue(b *testing.B) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(jsonEvent)); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"compact", compact.Bytes()}, {"spaced", []byte(jsonEvent)}, {"schemaless", []byte(schemalessRead)}} {
		for _, f := range []struct {
			name   string
			decode func([]byte) (*event, error)
		}{{"onepass", decodeJSONValue}, {"maps", decodeJSONValueAll}} {
			b.Run(c.name+"/"+f.name, func(b *testing.B) {
				b.SetBytes(int64(len(c.data)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := f.decode(c.data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestSchemaCache: one parse per schema text, and a changed schema (a v2 with one more
// field) is parsed anew, with the new field's semantic.
func TestSchemaCache(t *testing.T) {
	v1 := []byte(`{"type":"struct","fields":[{"type":"int64","field":"id"}]}`)
	v2 := []byte(`{"type":"struct","fields":[{"type":"int64","field":"id"},{"type":"int64","name":"io.debezium.time.MicroTimestamp","field":"at"}]}`)
	a, err := schemas.get(v1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := schemas.get(append([]byte(nil), v1...))
	if a != b {
		t.Fatal("the same schema text was parsed twice")
	}
	c, err := schemas.get(v2)
	if err != nil {
		t.Fatal(err)
	}
	if c == a || c.field("at") == nil || c.field("at").sem.name != "io.debezium.time.MicroTimestamp" || !c.field("at").sem.typed {
		t.Fatalf("v2 schema: %+v", c)
	}
	if a.field("at") != nil {
		t.Fatal("v1 schema changed by v2")
	}
}

// JSON without schemas is parsed once (mayBeEnvelope), and the JsonConverter's envelope is
// still one when its payload's name is escaped; a record without schemas whose two fields
// are not schema and payload stays a record without schemas.
func TestParseJSONEnvelopeOrNot(t *testing.T) {
	var last lastSchema
	plain := []byte(`{"before":null,"after":{"id":1},"source":{"lsn":5},"op":"r"}`)
	if mayBeEnvelope(plain) {
		t.Fatal("a record without payload is taken for an envelope")
	}
	p, s, err := parseJSON(plain, &last)
	if err != nil || s != nil || p.(map[string]any)["op"] != "r" {
		t.Fatalf("without schemas: %v %v %v", p, s, err)
	}
	for _, data := range []string{
		`{"schema":{"type":"struct","fields":[{"type":"int64","field":"id"}]},"payload":{"id":7}}`,
		`{"schema":{"type":"struct","fields":[{"type":"int64","field":"id"}]},"\u0070ayload":{"id":7}}`,
	} {
		var fresh lastSchema
		p, s, err := parseJSON([]byte(data), &fresh)
		if err != nil || s == nil || s.field("id") == nil || p.(map[string]any)["id"] == nil {
			t.Errorf("%s: %v %v %v", data, p, s, err)
		}
	}
	two := []byte(`{"schema":"s","other":{"payload":1}}`) // mentions payload, is not an envelope
	if p, s, err := parseJSON(two, &last); err != nil || s != nil || p.(map[string]any)["schema"] != "s" {
		t.Errorf("two fields: %v %v %v", p, s, err)
	}
}
