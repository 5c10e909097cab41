package schemaformat

import (
	"errors"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
)

// refDecoder is a Decoder over the client library's in-memory registry: the reference walk
// is pure schema handling, no request semantics of a real registry are asserted here.
func refDecoder(t *testing.T) (*Decoder, schemaregistry.Client) {
	t.Helper()
	c, err := schemaregistry.NewClient(schemaregistry.NewConfig("mock://references"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &Decoder{client: c, schemas: map[schemaKey]*compiled{}}, c
}

func registerRef(t *testing.T, c schemaregistry.Client, subject string, info schemaregistry.SchemaInfo) {
	t.Helper()
	if _, err := c.Register(subject, info, false); err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
}

// TestReferences: Avro and Protobuf schemas compile with references nested two deep (each
// dependency given before what needs it), and nesting past maxReferenceDepth (a cycle)
// makes the schema unusable.
func TestReferences(t *testing.T) {
	d, c := refDecoder(t)
	registerRef(t, c, "cur", schemaregistry.SchemaInfo{SchemaType: "AVRO",
		Schema: `{"type":"enum","name":"com.x.Cur","symbols":["EUR","USD"]}`})
	registerRef(t, c, "money", schemaregistry.SchemaInfo{SchemaType: "AVRO",
		Schema:     `{"type":"record","name":"com.x.Money","fields":[{"name":"cur","type":"com.x.Cur"},{"name":"n","type":"long"}]}`,
		References: []schemaregistry.Reference{{Name: "com.x.Cur", Subject: "cur", Version: 1}}})
	order := schemaregistry.SchemaInfo{SchemaType: "AVRO",
		Schema:     `{"type":"record","name":"com.x.Order","fields":[{"name":"total","type":"com.x.Money"}]}`,
		References: []schemaregistry.Reference{{Name: "com.x.Money", Subject: "money", Version: 1}}}
	if _, err := d.compileAvro(1, order); err != nil {
		t.Fatalf("avro with nested references: %v", err)
	}

	registerRef(t, c, "cur.proto", schemaregistry.SchemaInfo{SchemaType: "PROTOBUF",
		Schema: "syntax = \"proto3\";\npackage x;\nenum Cur { EUR = 0; USD = 1; }\n"})
	registerRef(t, c, "money.proto", schemaregistry.SchemaInfo{SchemaType: "PROTOBUF",
		Schema:     "syntax = \"proto3\";\npackage x;\nimport \"cur.proto\";\nmessage Money { Cur cur = 1; int64 n = 2; }\n",
		References: []schemaregistry.Reference{{Name: "cur.proto", Subject: "cur.proto", Version: 1}}})
	porder := schemaregistry.SchemaInfo{SchemaType: "PROTOBUF",
		Schema:     "syntax = \"proto3\";\npackage x;\nimport \"money.proto\";\nmessage Order { Money total = 1; }\n",
		References: []schemaregistry.Reference{{Name: "money.proto", Subject: "money.proto", Version: 1}}}
	if _, err := d.compileProtobuf(2, porder); err != nil {
		t.Fatalf("protobuf with nested references: %v", err)
	}

	// self refers to itself: the walk must stop at maxReferenceDepth.
	registerRef(t, c, "self", schemaregistry.SchemaInfo{SchemaType: "AVRO", Schema: `"int"`,
		References: []schemaregistry.Reference{{Name: "self", Subject: "self", Version: 1}}})
	self := schemaregistry.SchemaInfo{SchemaType: "AVRO", Schema: `"int"`,
		References: []schemaregistry.Reference{{Name: "self", Subject: "self", Version: 1}}}
	for name, compile := range map[string]func() error{
		"avro":     func() error { _, err := d.compileAvro(4, self); return err },
		"protobuf": func() error { _, err := d.compileProtobuf(5, self); return err },
	} {
		if err := compile(); !errors.Is(err, ErrBadSchema) || !strings.Contains(err.Error(), "nest too deep") {
			t.Errorf("%s: a reference cycle: %v, want ErrBadSchema: references nest too deep", name, err)
		}
	}
}
