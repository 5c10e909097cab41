package schemaformat

import (
	"math/big"
	"reflect"
	"testing"
)

// debeziumSchema is written by hand like the value schema that Debezium's PostgreSQL
// connector gets from Kafka Connect's Avro converter (Apicurio's, as-confluent=true): an
// envelope of before/after/source/op/ts_ms, Connect types in connect.* properties.
const debeziumSchema = `{"type":"record","name":"Envelope","namespace":"dbserver1.public.orders","fields":[
 {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
   {"name":"id","type":"int"},
   {"name":"amount","type":{"type":"bytes","scale":2,"precision":10,"connect.version":1,
     "connect.parameters":{"scale":"2","connect.decimal.precision":"10"},
     "connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}},
   {"name":"created","type":["null",{"type":"long","connect.version":1,"connect.name":"io.debezium.time.MicroTimestamp"}],"default":null},
   {"name":"day","type":["null",{"type":"int","connect.version":1,"connect.name":"io.debezium.time.Date"}],"default":null},
   {"name":"updated","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.time.ZonedTimestamp"}],"default":null},
   {"name":"ratio","type":["null",{"type":"record","name":"VariableScaleDecimal","namespace":"io.debezium.data",
     "fields":[{"name":"scale","type":"int"},{"name":"value","type":"bytes"}],
     "connect.doc":"Variable scaled decimal","connect.version":1,"connect.name":"io.debezium.data.VariableScaleDecimal"}],"default":null},
   {"name":"doc","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}],"default":null},
   {"name":"uid","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Uuid"}],"default":null}
  ],"connect.name":"dbserver1.public.orders.Value"}],"default":null},
 {"name":"after","type":["null","Value"],"default":null},
 {"name":"source","type":{"type":"record","name":"Source","namespace":"io.debezium.connector.postgresql","fields":[
   {"name":"version","type":"string"},{"name":"ts_ms","type":"long"},{"name":"table","type":"string"},
   {"name":"lsn","type":["null","long"],"default":null}],
  "connect.name":"io.debezium.connector.postgresql.Source"}},
 {"name":"op","type":"string"},
 {"name":"ts_ms","type":["null","long"],"default":null}
],"connect.version":2,"connect.name":"dbserver1.public.orders.Envelope"}`

func TestDebeziumAvro(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("dbserver1.public.orders")
	id := register(t, c, topic+"-value", "AVRO", debeziumSchema)
	row := map[string]any{
		"id":      42,
		"amount":  big.NewRat(1234567, 100),
		"created": int64(1700000000123456),
		"day":     19782,
		"updated": "2024-02-29T13:45:06.123456Z",
		"ratio": map[string]any{"io.debezium.data.VariableScaleDecimal": map[string]any{
			"scale": 3, "value": []byte{0x30, 0x39}}}, // 12345 × 10^-3
		"doc": `{"a": [1, 2]}`,
		"uid": "6f1b2c3d-0000-4000-8000-000000000001",
	}
	event := map[string]any{
		"before": nil,
		"after":  map[string]any{"dbserver1.public.orders.Value": row},
		"source": map[string]any{"version": "3.6.1.Final", "ts_ms": int64(1700000000000), "table": "orders", "lsn": int64(123456789)},
		"op":     "c",
		"ts_ms":  int64(1700000000999),
	}
	d := newDecoder(t, registryURL(t))
	m := decode(t, d, Avro, avroSerialize(t, c, topic, id, event))
	wantTree(t, m.Value, map[string]any{
		"before": nil,
		"after": map[string]any{
			"id":      int64(42),
			"amount":  Decimal("12345.67"),
			"created": int64(1700000000123456),
			"day":     int64(19782),
			"updated": "2024-02-29T13:45:06.123456Z",
			"ratio":   map[string]any{"scale": int64(3), "value": []byte{0x30, 0x39}},
			"doc":     `{"a": [1, 2]}`,
			"uid":     "6f1b2c3d-0000-4000-8000-000000000001",
		},
		"source": map[string]any{"version": "3.6.1.Final", "ts_ms": int64(1700000000000), "table": "orders", "lsn": int64(123456789)},
		"op":     "c",
		"ts_ms":  int64(1700000000999),
	})

	// The Connect type of each field, for the CDC layer to convert.
	for path, want := range map[string]ConnectType{
		"":              {Name: "dbserver1.public.orders.Envelope", Version: 2},
		"after":         {Name: "dbserver1.public.orders.Value"},
		"before":        {Name: "dbserver1.public.orders.Value"},
		"after.amount":  {Name: "org.apache.kafka.connect.data.Decimal", Version: 1, Parameters: map[string]string{"scale": "2", "connect.decimal.precision": "10"}},
		"after.created": {Name: "io.debezium.time.MicroTimestamp", Version: 1},
		"after.day":     {Name: "io.debezium.time.Date", Version: 1},
		"after.updated": {Name: "io.debezium.time.ZonedTimestamp", Version: 1},
		"after.ratio":   {Name: "io.debezium.data.VariableScaleDecimal", Version: 1},
		"after.doc":     {Name: "io.debezium.data.Json", Version: 1},
		"before.uid":    {Name: "io.debezium.data.Uuid", Version: 1},
		"source":        {Name: "io.debezium.connector.postgresql.Source"},
	} {
		var p []string
		if path != "" {
			p = splitPath(path)
		}
		got, ok := m.Connect(p...)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("Connect(%q) = %+v, %v; want %+v", path, got, ok, want)
		}
	}
	if _, ok := m.Connect("after", "id"); ok {
		t.Error("after.id has a Connect type")
	}
	if got := len(m.ConnectTypes()); got != 18 { // envelope, source, before and after with 7 typed fields each
		t.Errorf("%d Connect types: %v", got, m.ConnectTypes())
	}

	// The fields of after, in order, with their Avro and Connect types (to create columns).
	fs, ok := m.Fields("after")
	if !ok || len(fs) != 8 {
		t.Fatalf("Fields(after) = %+v, %v", fs, ok)
	}
	for i, want := range []struct {
		name, typ, logical, connect string
		optional                    bool
	}{
		{"id", "int", "", "", false}, {"amount", "bytes", "decimal", "org.apache.kafka.connect.data.Decimal", false},
		{"created", "long", "", "io.debezium.time.MicroTimestamp", true}, {"day", "int", "", "io.debezium.time.Date", true},
		{"updated", "string", "", "io.debezium.time.ZonedTimestamp", true}, {"ratio", "record", "", "io.debezium.data.VariableScaleDecimal", true},
		{"doc", "string", "", "io.debezium.data.Json", true}, {"uid", "string", "", "io.debezium.data.Uuid", true},
	} {
		f := fs[i]
		if f.Name != want.name || f.Type != want.typ || f.Logical != want.logical || f.Connect.Name != want.connect ||
			f.HasConnect != (want.connect != "") || f.Optional != want.optional {
			t.Errorf("field %d: %+v, want %+v", i, f, want)
		}
	}
	if _, ok := m.Fields("op"); ok {
		t.Error("Fields(op): a string is not a record")
	}
	if fs, ok := m.Fields(); !ok || len(fs) != 5 || fs[4].Name != "ts_ms" {
		t.Errorf("Fields() = %+v, %v", fs, ok)
	}
}
