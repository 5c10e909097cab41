package cdc

import (
	"bytes"
	"encoding/json"
	"testing"
)

// BenchmarkDecodeJSONValue decodes one JsonConverter change event with schemas, the shape
// Debezium writes: the schema is most of the bytes and repeats on every record. compact is
// how the JsonConverter writes it; spaced has white space between the fields, which the
// fast path (lastSchema) does not take.
func BenchmarkDecodeJSONValue(b *testing.B) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(jsonEvent)); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"compact", compact.Bytes()}, {"spaced", []byte(jsonEvent)}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeJSONValue(c.data); err != nil {
					b.Fatal(err)
				}
			}
		})
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
