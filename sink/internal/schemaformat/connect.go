package schemaformat

import (
	"fmt"
	"sort"
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
// an array and the values of a map; unions are transparent (the first branch, in the
// schema's order, with a type at the path gives it). The empty path is the whole value
// (Debezium's envelope). ok is false when the node has no connect.name, or m is not Avro.
func (m *Message) Connect(path ...string) (t ConnectType, ok bool) {
	if m.connect == nil {
		return ConnectType{}, false
	}
	return m.connect.lookup(path)
}

// maxConnectTypes bounds what ConnectTypes lists: a schema that reuses named records has
// as many paths as ways through them, which double with every level of reuse.
const maxConnectTypes = 10000

// ConnectTypes returns the Kafka Connect types of the nodes that have one, by path
// (segments joined by "."), for inspection and logs: at most 10,000 of them, a recursive
// type followed once.
func (m *Message) ConnectTypes() map[string]ConnectType {
	out := map[string]ConnectType{}
	if m.connect != nil {
		m.connect.list(nil, map[*connectNode]bool{}, out)
	}
	return out
}

// connectNode holds the Kafka Connect types of one node of an Avro schema and of the nodes
// below it: its own type, its record fields' nodes by name ("*" for an array's items or a
// map's values), and, for a union, its branches' nodes, in order. A named type has one
// node however many times the schema uses it (a recursive type points back to its own), so
// the tree is as large as the schema's text, not as the number of paths through it.
type connectNode struct {
	t        *ConnectType
	fields   map[string]*connectNode
	branches []*connectNode
}

// lookup returns the type of the node at path below n. It follows each union's branches
// in order; a path is as long as the caller's, whatever cycles the tree has.
func (n *connectNode) lookup(path []string) (ConnectType, bool) {
	if len(n.branches) > 0 {
		for _, b := range n.branches {
			if t, ok := b.lookup(path); ok {
				return t, true
			}
		}
		return ConnectType{}, false
	}
	if len(path) == 0 {
		if n.t == nil {
			return ConnectType{}, false
		}
		return *n.t, true
	}
	c := n.fields[path[0]]
	if c == nil {
		return ConnectType{}, false
	}
	return c.lookup(path[1:])
}

// list adds the types below n to out, by path, the first found for a path kept, until out
// holds maxConnectTypes; on names the nodes being listed, so that a recursive type is
// followed once.
func (n *connectNode) list(path []string, on map[*connectNode]bool, out map[string]ConnectType) {
	if on[n] || len(out) >= maxConnectTypes {
		return
	}
	on[n] = true
	defer delete(on, n)
	for _, b := range n.branches {
		b.list(path, on, out)
	}
	if n.t != nil {
		if k := strings.Join(path, "."); out[k].Name == "" {
			out[k] = *n.t
		}
	}
	names := make([]string, 0, len(n.fields))
	for name := range n.fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n.fields[name].list(append(path[:len(path):len(path)], name), on, out)
	}
}

// connectTypes builds the connectNode tree of s. Each named type is walked once, on its
// first use, and every later use shares its node, so the work is linear in the size of s;
// walked counts the schema nodes visited (for the tests).
func connectTypes(s avro.Schema) (root *connectNode, walked int) {
	named := map[string]*connectNode{}
	var walk func(s avro.Schema) *connectNode
	walk = func(s avro.Schema) *connectNode {
		if ref, ok := s.(*avro.RefSchema); ok {
			s = ref.Schema()
		}
		var key string
		if ns, ok := s.(avro.NamedSchema); ok {
			key = string(s.Type()) + ":" + ns.FullName()
			if n := named[key]; n != nil {
				return n
			}
		}
		walked++
		n := &connectNode{}
		if key != "" {
			named[key] = n // before the fields: a recursive use finds it
		}
		if t, ok := connectType(s); ok {
			n.t = &t
		}
		child := func(name string, c *connectNode) {
			if n.fields == nil {
				n.fields = map[string]*connectNode{}
			}
			n.fields[name] = c
		}
		switch s := s.(type) {
		case *avro.RecordSchema:
			for _, f := range s.Fields() {
				child(f.Name(), walk(f.Type()))
			}
		case *avro.UnionSchema:
			for _, t := range s.Types() {
				n.branches = append(n.branches, walk(t))
			}
		case *avro.ArraySchema:
			child("*", walk(s.Items()))
		case *avro.MapSchema:
			child("*", walk(s.Values()))
		}
		return n
	}
	root = walk(s)
	return root, walked
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
