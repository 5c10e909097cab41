package schemaformat

import (
	"github.com/hamba/avro/v2"
)

// Field is one field of an Avro record in a Message's schema: what a CDC layer needs to
// create a column for it (its Avro type, its logical type, the Kafka Connect type the
// writer put on it).
type Field struct {
	Name string
	// Type is the field's Avro type, of the non-null branch of a union with null: boolean,
	// int, long, float, double, string, bytes, fixed, enum, record, array or map; union when
	// the union has more than one branch besides null.
	Type string
	// Logical is the Avro logicalType (date, timestamp-micros, decimal...), "" for none.
	Logical string
	// Connect is the Kafka Connect type (connect.name, connect.parameters); HasConnect
	// reports whether the node has one.
	Connect    ConnectType
	HasConnect bool
	// ConnectBase is Kafka Connect's connect.type property, which the Avro converters put on
	// an Avro int that holds a Connect int8 or int16; "" otherwise.
	ConnectBase string
	// Optional is true for a union with null.
	Optional bool
	// Items is the type of an array's items (Name empty); nil for other types.
	Items *Field
}

// Fields returns the fields, in the schema's order, of the Avro record at path in m's
// schema (path as for Connect; a union of null and a record is looked through). ok is false
// when the node is not a record, or m is not Avro.
func (m *Message) Fields(path ...string) (fields []Field, ok bool) {
	if m.avro == nil {
		return nil, false
	}
	s := m.avro
	for _, seg := range path {
		rec, ok := nonNull(s).(*avro.RecordSchema)
		if !ok {
			return nil, false
		}
		var next avro.Schema
		for _, f := range rec.Fields() {
			if f.Name() == seg {
				next = f.Type()
			}
		}
		if next == nil {
			return nil, false
		}
		s = next
	}
	rec, ok := nonNull(s).(*avro.RecordSchema)
	if !ok {
		return nil, false
	}
	for _, f := range rec.Fields() {
		fields = append(fields, fieldOf(f.Name(), f.Type()))
	}
	return fields, true
}

// Node returns the node at path in m's schema as a Field named after the path's last
// segment: path segments are record field names; through an array any segment (an index,
// or "*") stands for its items, through a map for its values; a union of null and one
// other type is looked through. ok is false when the path leads nowhere, or m is not Avro.
func (m *Message) Node(path ...string) (f Field, ok bool) {
	if m.avro == nil {
		return Field{}, false
	}
	s := m.avro
	for _, seg := range path {
		switch n := nonNull(s).(type) {
		case *avro.RecordSchema:
			var next avro.Schema
			for _, f := range n.Fields() {
				if f.Name() == seg {
					next = f.Type()
				}
			}
			if next == nil {
				return Field{}, false
			}
			s = next
		case *avro.ArraySchema:
			s = n.Items()
		case *avro.MapSchema:
			s = n.Values()
		default:
			return Field{}, false
		}
	}
	name := ""
	if len(path) > 0 {
		name = path[len(path)-1]
	}
	return fieldOf(name, s), true
}

// fieldOf describes schema s of a field named name.
func fieldOf(name string, s avro.Schema) Field {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	out := Field{Name: name}
	if u, ok := s.(*avro.UnionSchema); ok {
		out.Optional = u.Nullable()
	}
	b := nonNull(s)
	out.Type = string(b.Type())
	out.Logical = string(logicalType(b))
	out.Connect, out.HasConnect = connectType(b)
	if ps, ok := b.(avro.PropertySchema); ok {
		out.ConnectBase, _ = ps.Prop("connect.type").(string)
	}
	if a, ok := b.(*avro.ArraySchema); ok {
		items := fieldOf("", a.Items())
		out.Items = &items
	}
	return out
}

// nonNull returns s without references, and the branch of a union of null and one other
// type; any other union as it is.
func nonNull(s avro.Schema) avro.Schema {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	u, ok := s.(*avro.UnionSchema)
	if !ok {
		return s
	}
	var branch avro.Schema
	for _, t := range u.Types() {
		if t.Type() == avro.Null {
			continue
		}
		if branch != nil {
			return s
		}
		branch = t
	}
	if branch == nil {
		return s
	}
	if ref, ok := branch.(*avro.RefSchema); ok {
		return ref.Schema()
	}
	return branch
}
