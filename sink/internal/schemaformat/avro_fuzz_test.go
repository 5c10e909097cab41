package schemaformat

import (
	"errors"
	"testing"

	"github.com/hamba/avro/v2"
)

// FuzzAvroBody checks that any body gives a value or ErrMalformed for a schema with every
// kind of node, never a panic, and that decoded values render.
func FuzzAvroBody(f *testing.F) {
	s, err := avro.ParseWithCache(orderSchema, "", &avro.SchemaCache{})
	if err != nil {
		f.Fatal(err)
	}
	connect, _ := connectTypes(s)
	as := &avroSchema{schema: s, connect: connect}
	rec, err := avro.Marshal(s, map[string]any{
		"id": int64(1), "qty": 3, "amount": nil, "price": nil, "created_ms": nil,
	})
	if err == nil {
		f.Add(rec)
	}
	f.Add([]byte{2, 6, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := as.decode(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		if _, err := JSON(v); err != nil && !errors.Is(err, ErrNotText) {
			t.Fatalf("JSON: %v", err)
		}
	})
}

// An array of nulls takes no byte per item: a block count beyond the budget is malformed
// rather than a long loop.
func TestAvroItemBudget(t *testing.T) {
	s, err := avro.ParseWithCache(`{"type":"array","items":"null"}`, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	as := &avroSchema{schema: s}
	if v, err := as.decode([]byte{6, 0}); err != nil || len(v.([]any)) != 3 {
		t.Fatalf("3 nulls: %v %v", v, err)
	}
	body := []byte{}
	for range 100 { // 100 blocks of 2^20 items
		body = append(body, 0x80, 0x80, 0x80, 0x01)
	}
	if _, err := as.decode(append(body, 0)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
}
