package schemaformat

import (
	"errors"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/jsonschema"
)

const eventJSONSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Event","type":"object",
 "properties":{"id":{"type":"integer"},"amount":{"type":"number"},"at":{"type":"string","format":"date-time"},
  "tags":{"type":"array","items":{"type":"string"}},"meta":{"type":["object","null"]},"ok":{"type":"boolean"}},
 "required":["id"]}`

func TestJSONSchema(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("json-events")
	id := register(t, c, topic+"-value", "JSON", eventJSONSchema)
	conf := jsonschema.NewSerializerConfig()
	conf.AutoRegisterSchemas = false
	conf.UseSchemaID = id
	s, err := jsonschema.NewSerializer(c, serde.ValueSerde, conf)
	if err != nil {
		t.Fatal(err)
	}
	// The serde marshals msg with encoding/json; amount is written with more digits than
	// a float64 holds.
	type event struct {
		ID     int64          `json:"id"`
		Amount jsonNumberText `json:"amount"`
		At     string         `json:"at"`
		Tags   []string       `json:"tags"`
		Meta   map[string]any `json:"meta"`
		OK     bool           `json:"ok"`
	}
	b, err := s.Serialize(topic, &event{ID: 9007199254740993, Amount: "12345678901234567890.123456789",
		At: "2024-02-29T13:45:06.123456Z", Tags: []string{"a"}, Meta: map[string]any{"k": 1.5}, OK: true})
	if err != nil {
		t.Fatalf("serialize: %v", err)
	}
	d := newDecoder(t, registryURL(t))
	m := decode(t, d, JSONSchema, b)
	if m.SchemaID != id {
		t.Errorf("schema id %d, want %d", m.SchemaID, id)
	}
	wantTree(t, m.Value, map[string]any{
		"id": int64(9007199254740993), "amount": Decimal("12345678901234567890.123456789"),
		"at": "2024-02-29T13:45:06.123456Z", "tags": []any{"a"},
		"meta": map[string]any{"k": Decimal("1.5")}, "ok": true,
	})
	js, err := JSON(m.Value)
	if err != nil || string(js) != `{"amount":12345678901234567890.123456789,"at":"2024-02-29T13:45:06.123456Z","id":9007199254740993,"meta":{"k":1.5},"ok":true,"tags":["a"]}` {
		t.Errorf("JSON = %s, %v", js, err)
	}
	if _, err := d.Decode(JSONSchema, wire(id, '{', '"')); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad JSON body: err = %v, want ErrMalformed", err)
	} else {
		t.Logf("bad JSON body: %v", err)
	}
	if _, err := d.Decode(Avro, b); !errors.Is(err, ErrBadSchema) {
		t.Errorf("JSON schema read as Avro: err = %v, want ErrBadSchema", err)
	}
}

// jsonNumberText marshals as the JSON number it holds.
type jsonNumberText string

func (n jsonNumberText) MarshalJSON() ([]byte, error) { return []byte(n), nil }
