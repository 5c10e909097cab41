package schemaformat

import (
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/avrov2"
)

// avroSerialize writes msg with schema id through the avrov2 serde's serializer.
func avroSerialize(t *testing.T, c schemaregistry.Client, topic string, id int, msg map[string]any) []byte {
	t.Helper()
	conf := avrov2.NewSerializerConfig()
	conf.AutoRegisterSchemas = false
	conf.UseSchemaID = id
	s, err := avrov2.NewSerializer(c, serde.ValueSerde, conf)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Serialize(topic, &msg)
	if err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return b
}

const orderSchema = `{"type":"record","name":"Order","namespace":"eosink.test","fields":[
 {"name":"id","type":"long"},
 {"name":"qty","type":"int"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"price","type":{"type":"fixed","name":"Price","size":8,"logicalType":"decimal","precision":18,"scale":4}},
 {"name":"created_ms","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"created_us","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"local_us","type":{"type":"long","logicalType":"local-timestamp-micros"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"at_us","type":{"type":"long","logicalType":"time-micros"}},
 {"name":"at_ms","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"uid","type":{"type":"string","logicalType":"uuid"}},
 {"name":"blob","type":"bytes"},
 {"name":"hash","type":{"type":"fixed","name":"Hash","size":4}},
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[
   {"name":"name","type":"string"},{"name":"vip","type":"boolean"}]}},
 {"name":"tags","type":{"type":"map","values":"string"}},
 {"name":"items","type":{"type":"array","items":"int"}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"discount","type":["null",{"type":"bytes","logicalType":"decimal","precision":6,"scale":3}],"default":null},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID","SHIPPED"]}},
 {"name":"ratio","type":"double"},
 {"name":"score","type":"float"}
]}`

func TestAvroLogicalTypes(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("avro-types")
	id := register(t, c, topic+"-value", "AVRO", orderSchema)
	created := time.Date(2023, 11, 14, 22, 13, 20, 123456789, time.UTC)
	msg := func(note any, discount any) map[string]any {
		return map[string]any{
			"id": int64(1), "qty": 3,
			"amount":     big.NewRat(1234567, 100),
			"price":      big.NewRat(-5, 100),
			"created_ms": created, "created_us": created, "local_us": created,
			"day":   time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC),
			"at_us": 13*time.Hour + 45*time.Minute + 6123456*time.Microsecond,
			"at_ms": 13*time.Hour + 45*time.Minute + 6123*time.Millisecond,
			"uid":   "6f1b2c3d-0000-4000-8000-000000000001",
			"blob":  []byte{0, 1, 2, 255}, "hash": [4]byte{0xde, 0xad, 0xbe, 0xef},
			"customer": map[string]any{"name": "Ada", "vip": true},
			"tags":     map[string]any{"a": "x", "b": "y"},
			"items":    []any{1, 2, 3},
			"note":     note, "discount": discount,
			"status": "PAID", "ratio": 0.1, "score": float32(0.25),
		}
	}
	want := func(note any, discount any) map[string]any {
		return map[string]any{
			"id": int64(1), "qty": int64(3),
			"amount":     Decimal("12345.67"),
			"price":      Decimal("-0.0500"),
			"created_ms": time.UnixMilli(1700000000123).UTC(),
			"created_us": time.UnixMicro(1700000000123456).UTC(),
			"local_us":   LocalTimestamp("2023-11-14T22:13:20.123456"),
			"day":        Date("2024-02-29"),
			"at_us":      TimeOfDay("13:45:06.123456"),
			"at_ms":      TimeOfDay("13:45:06.123"),
			"uid":        "6f1b2c3d-0000-4000-8000-000000000001",
			"blob":       []byte{0, 1, 2, 255}, "hash": []byte{0xde, 0xad, 0xbe, 0xef},
			"customer": map[string]any{"name": "Ada", "vip": true},
			"tags":     map[string]any{"a": "x", "b": "y"},
			"items":    []any{int64(1), int64(2), int64(3)},
			"note":     note, "discount": discount,
			"status": "PAID", "ratio": 0.1, "score": 0.25,
		}
	}
	d := newDecoder(t, registryURL(t))

	m := decode(t, d, Avro, avroSerialize(t, c, topic, id, msg(nil, nil)))
	if m.SchemaID != id {
		t.Errorf("schema id %d, want %d", m.SchemaID, id)
	}
	wantTree(t, m.Value, want(nil, nil))

	// Unions holding a value: a string, and a decimal (hamba names that branch
	// "bytes.decimal").
	m = decode(t, d, Avro, avroSerialize(t, c, topic, id, msg("hi", map[string]any{"bytes.decimal": big.NewRat(-1, 8)})))
	wantTree(t, m.Value, want("hi", Decimal("-0.125")))

	// What the mapping would put in columns.
	for path, text := range map[string]string{
		"amount": "12345.67", "created_us": "2023-11-14T22:13:20.123456Z", "created_ms": "2023-11-14T22:13:20.123000Z",
		"day": "2024-02-29", "at_us": "13:45:06.123456", "uid": "6f1b2c3d-0000-4000-8000-000000000001",
		"status": "PAID", "qty": "3", "customer": `{"name":"Ada","vip":true}`, "items": "[1,2,3]",
		"customer.vip": "true", "discount": "-0.125",
	} {
		v, ok := Lookup(m.Value, splitPath(path)...)
		if !ok {
			t.Errorf("%s: missing", path)
			continue
		}
		got, err := Text(v)
		if err != nil || got != text {
			t.Errorf("Text(%s) = %#v, %v; want %q", path, got, err, text)
		}
	}
	if got, _ := Text(m.Value.(map[string]any)["blob"]); string(got.([]byte)) != "\x00\x01\x02\xff" {
		t.Errorf("blob = %#v", got)
	}
	js, err := JSON(m.Value.(map[string]any)["customer"])
	if err != nil || string(js) != `{"name":"Ada","vip":true}` {
		t.Errorf("JSON(customer) = %s, %v", js, err)
	}
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return out
}

// A v2 schema adds an optional field mid-stream: records of both versions decode, each
// with its own writer schema.
func TestAvroSchemaEvolution(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("avro-evolve")
	v1 := register(t, c, topic+"-value", "AVRO",
		`{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`)
	old1 := avroSerialize(t, c, topic, v1, map[string]any{"id": int64(1), "name": "a"})
	v2 := register(t, c, topic+"-value", "AVRO",
		`{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},
		  {"name":"email","type":["null","string"],"default":null}]}`)
	if v2 == v1 {
		t.Fatalf("v2 has the id of v1 (%d)", v1)
	}
	new2 := avroSerialize(t, c, topic, v2, map[string]any{"id": int64(2), "name": "b", "email": "b@x"})
	old3 := avroSerialize(t, c, topic, v1, map[string]any{"id": int64(3), "name": "c"})

	d := newDecoder(t, registryURL(t))
	wantTree(t, decode(t, d, Avro, old1).Value, map[string]any{"id": int64(1), "name": "a"})
	wantTree(t, decode(t, d, Avro, new2).Value, map[string]any{"id": int64(2), "name": "b", "email": "b@x"})
	wantTree(t, decode(t, d, Avro, old3).Value, map[string]any{"id": int64(3), "name": "c"})
	if v, ok := Lookup(decode(t, d, Avro, old1).Value, "email"); ok || v != nil {
		t.Errorf("v1 record has email %v", v)
	}
}

func TestAvroMalformedBody(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("avro-bad")
	id := register(t, c, topic+"-value", "AVRO",
		`{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"s","type":"string"},
		  {"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}}]}`)
	d := newDecoder(t, registryURL(t))
	good := avroSerialize(t, c, topic, id, map[string]any{"id": int64(-1), "s": "ok", "e": "A"})
	decode(t, d, Avro, good)
	for name, data := range map[string][]byte{
		"truncated":       good[:len(good)-2],
		"trailing bytes":  append(append([]byte{}, good...), 0),
		"string too long": wire(id, 2, 40, 'a'),
		"enum index":      wire(id, 2, 0, 2),
		"no header":       []byte(`{"id":1}`),
		"empty":           {},
	} {
		if _, err := d.Decode(Avro, data); !errors.Is(err, ErrMalformed) || !IsPoison(err) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	if m, err := d.Decode(Avro, nil); err != nil || m.Value != nil {
		t.Errorf("tombstone: %v, %v", m, err)
	}
	// A Protobuf reading of an Avro schema is an unusable schema, not a registry error.
	if _, err := d.Decode(Protobuf, append(wire(id), 0)); !errors.Is(err, ErrBadSchema) || !IsPoison(err) {
		t.Errorf("avro schema read as protobuf: err = %v, want ErrBadSchema", err)
	}
}

func TestUnknownSchemaID(t *testing.T) {
	d := newDecoder(t, registryURL(t))
	for _, f := range []Format{Avro, Protobuf, JSONSchema} {
		_, err := d.Decode(f, wire(2_000_000_000, 0, 0))
		if !errors.Is(err, ErrUnknownSchema) || !IsPoison(err) {
			t.Fatalf("%s: err = %v, want ErrUnknownSchema", f, err)
		}
		t.Logf("%s: %v", f, err)
	}
}
