package schemaformat

import (
	"fmt"
	"strings"

	"github.com/hamba/avro/v2"
)

// ConnectType is the Kafka Connect type that an Avro schema node carries when Kafka
// Connect's Avro converter (Confluent's, or Apicurio's with as-confluent=true) wrote it:
// the properties connect.name, connect.version and connect.parameters. Debezium's semantic
// types are such names: io.debezium.time.MicroTimestamp on a long,
// io.debezium.time.Date on an int, io.debezium.time.ZonedTimestamp on a string,
// io.debezium.data.VariableScaleDecimal on a record of scale and value,
// io.debezium.data.Json and io.debezium.data.Uuid on strings. A Connect Decimal
// (org.apache.kafka.connect.data.Decimal) also carries Avro's decimal logical type, so it
// decodes to a Decimal by itself; its parameters hold the scale.
type ConnectType struct {
	Name       string
	Version    int
	Parameters map[string]string
}

// Connect returns the Kafka Connect type of the node at path in m's value, such as
// ("after", "amount"). Path segments are record field names; "*" stands for the items of
// an array and the values of a map; unions are transparent. The empty path is the whole
// value (Debezium's envelope). ok is false when the node has no connect.name, or m is not
// Avro.
func (m *Message) Connect(path ...string) (t ConnectType, ok bool) {
	t, ok = m.connect[strings.Join(path, "\x00")]
	return t, ok
}

// ConnectTypes returns the Kafka Connect types of all the nodes that have one, by path
// (segments joined by "."), for inspection and logs.
func (m *Message) ConnectTypes() map[string]ConnectType {
	out := make(map[string]ConnectType, len(m.connect))
	for k, v := range m.connect {
		out[strings.ReplaceAll(k, "\x00", ".")] = v
	}
	return out
}

// connectTypes walks s and notes the Connect type of every node that has one.
func connectTypes(s avro.Schema) map[string]ConnectType {
	out := map[string]ConnectType{}
	seen := map[string]bool{} // named types being walked, against recursive schemas
	var walk func(s avro.Schema, path []string)
	walk = func(s avro.Schema, path []string) {
		if ref, ok := s.(*avro.RefSchema); ok {
			s = ref.Schema()
		}
		key := strings.Join(path, "\x00")
		if t, ok := connectType(s); ok {
			if _, dup := out[key]; !dup {
				out[key] = t
			}
		}
		if n, ok := s.(avro.NamedSchema); ok {
			if seen[n.FullName()] {
				return
			}
			seen[n.FullName()] = true
			defer delete(seen, n.FullName())
		}
		switch s := s.(type) {
		case *avro.RecordSchema:
			for _, f := range s.Fields() {
				walk(f.Type(), append(path[:len(path):len(path)], f.Name()))
			}
		case *avro.UnionSchema:
			for _, t := range s.Types() {
				walk(t, path)
			}
		case *avro.ArraySchema:
			walk(s.Items(), append(path[:len(path):len(path)], "*"))
		case *avro.MapSchema:
			walk(s.Values(), append(path[:len(path):len(path)], "*"))
		}
	}
	walk(s, nil)
	return out
}

func connectType(s avro.Schema) (ConnectType, bool) {
	ps, ok := s.(avro.PropertySchema)
	if !ok {
		return ConnectType{}, false
	}
	name, _ := ps.Prop("connect.name").(string)
	if name == "" {
		return ConnectType{}, false
	}
	t := ConnectType{Name: name}
	switch v := ps.Prop("connect.version").(type) {
	case float64:
		t.Version = int(v)
	case int:
		t.Version = v
	}
	if params, ok := ps.Prop("connect.parameters").(map[string]any); ok {
		t.Parameters = make(map[string]string, len(params))
		for k, v := range params {
			if s, ok := v.(string); ok {
				t.Parameters[k] = s
			} else {
				t.Parameters[k] = fmt.Sprint(v)
			}
		}
	}
	return t, true
}
