package schemaformat

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/hamba/avro/v2"
)

// Avro records are decoded here, driven by the writer's schema as the registry holds it
// and as hamba/avro (the library of the avrov2 serde) parses it. The avrov2 serde itself
// gives no usable generic tree: its Deserialize panics without a MessageFactory, and
// hamba's decoding into an `any` returns a union either as its bare value or as a
// one-entry map {"type name": value}, depending on which Go types its resolver knows, so
// a union holding a map could not be told from one holding a record. Decoding the
// binary encoding against the parsed schema gives each value its logical type exactly,
// and a decimal straight from its unscaled bytes, never through a float or a big.Rat.

// avroSchema is an Avro schema ready to decode with.
type avroSchema struct {
	schema  avro.Schema
	connect *connectNode
}

// maxAvroDepth bounds the nesting of records, arrays, maps and unions in a value.
const maxAvroDepth = 1000

// compileAvro parses info, after its references, each into the same cache of names.
func (d *Decoder) compileAvro(id int, info schemaregistry.SchemaInfo) (*avroSchema, error) {
	cache := &avro.SchemaCache{}
	err := d.walkReferences(id, info, 0, func(ref schemaregistry.Reference, ri schemaregistry.SchemaInfo) error {
		if _, err := avro.ParseWithCache(ri.Schema, "", cache); err != nil {
			return badSchema(id, "Avro reference %s does not parse: %v", ref.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s, err := avro.ParseWithCache(info.Schema, "", cache)
	if err != nil {
		return nil, badSchema(id, "Avro schema does not parse: %v", err)
	}
	connect, _ := connectTypes(s)
	return &avroSchema{schema: s, connect: connect}, nil
}

// decode decodes body, the Avro binary encoding of one value of s.
func (s *avroSchema) decode(body []byte) (any, error) {
	r := avroReader{buf: body, items: len(body) + itemSlack, budget: len(body) + itemSlack}
	v, err := r.value(s.schema, 0)
	if err != nil {
		return nil, err
	}
	if len(r.buf) != 0 {
		return nil, malformed("%d bytes left after the Avro value", len(r.buf))
	}
	return v, nil
}

type avroReader struct {
	buf []byte
	// items is what is left of the record's item budget (budget: the body's length plus
	// itemSlack). Every value decoded takes one item (a record's field, an array's item, a
	// map's key and value, the top value); a record or a map takes mapItems more, for the
	// Go map it becomes. An item is about 40 bytes of memory, so a body decodes into at
	// most about 40 times its size plus 2.5 MiB: without the weights a body of 1 MiB held
	// 1.1 million empty records (157 MiB). A value takes at least one byte of the body
	// unless it is null or an empty record, so the budget only stops records that are
	// mostly empty records or nulls outside unions, or that are long arrays of records
	// of a byte or two (a million records of one boolean).
	items, budget int
}

const (
	// itemSlack is the item budget's allowance beyond one item per byte of the body.
	itemSlack = 1 << 16
	// mapItems is what a record or a map takes of the item budget beyond its one item.
	mapItems = 7
)

// spend takes n items of the budget, or says the value exceeds it.
func (r *avroReader) spend(n int) error {
	if r.items -= n; r.items < 0 {
		return malformed("Avro value exceeds its item budget of %d (the body's length plus %d; a value takes one item, a record or map %d more)",
			r.budget, itemSlack, mapItems)
	}
	return nil
}

func (r *avroReader) long() (int64, error) {
	u, n := binary.Uvarint(r.buf)
	if n <= 0 {
		return 0, malformed("bad Avro varint")
	}
	r.buf = r.buf[n:]
	return int64(u>>1) ^ -int64(u&1), nil
}

func (r *avroReader) int() (int64, error) {
	v, err := r.long()
	if err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		return 0, malformed("Avro int %d out of range", v)
	}
	return v, err
}

func (r *avroReader) fixed(n int) ([]byte, error) {
	if n < 0 || n > len(r.buf) {
		return nil, malformed("Avro value of %d bytes, %d left", n, len(r.buf))
	}
	b := r.buf[:n:n]
	r.buf = r.buf[n:]
	return b, nil
}

func (r *avroReader) bytes() ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(len(r.buf)) {
		return nil, malformed("Avro bytes of length %d, %d left", n, len(r.buf))
	}
	return r.fixed(int(n))
}

// blockCount reads the count of an array or map block; a negative count is followed by
// the block's size in bytes.
func (r *avroReader) blockCount() (int, error) {
	n, err := r.long()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		if n == math.MinInt64 {
			return 0, malformed("bad Avro block count")
		}
		n = -n
		if _, err := r.long(); err != nil {
			return 0, err
		}
	}
	if n > int64(r.items) {
		return 0, malformed("Avro block of %d items exceeds the item budget of %d (the body's length plus %d; %d left)", n, r.budget, itemSlack, r.items)
	}
	return int(n), nil
}

// value decodes one value of schema s, counted against the item budgets.
func (r *avroReader) value(s avro.Schema, depth int) (any, error) {
	if err := r.spend(1); err != nil {
		return nil, err
	}
	return r.decode(s, depth)
}

// decode decodes one value of schema s; value counts it.
func (r *avroReader) decode(s avro.Schema, depth int) (any, error) {
	if depth > maxAvroDepth {
		return nil, malformed("Avro value nests deeper than %d", maxAvroDepth)
	}
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	switch s.Type() {
	case avro.Null:
		return nil, nil
	case avro.Boolean:
		b, err := r.fixed(1)
		if err != nil {
			return nil, err
		}
		if b[0] > 1 {
			return nil, malformed("Avro boolean byte %d", b[0])
		}
		return b[0] == 1, nil
	case avro.Int:
		v, err := r.int()
		if err != nil {
			return nil, err
		}
		switch logicalType(s) {
		case avro.Date:
			return epochDate(v), nil
		case avro.TimeMillis:
			t, ok := timeOfDay(v, time.Millisecond, 3)
			if !ok {
				return nil, malformed("Avro time-millis %d out of range", v)
			}
			return t, nil
		}
		return v, nil
	case avro.Long:
		v, err := r.long()
		if err != nil {
			return nil, err
		}
		switch logicalType(s) {
		case avro.TimestampMillis:
			return time.UnixMilli(v).UTC(), nil
		case avro.TimestampMicros:
			return time.UnixMicro(v).UTC(), nil
		case avro.LocalTimestampMillis:
			return LocalTimestamp(FormatTime(time.UnixMilli(v).UTC(), localTimestampLayout)), nil
		case avro.LocalTimestampMicros:
			return LocalTimestamp(FormatTime(time.UnixMicro(v).UTC(), localTimestampLayout)), nil
		case avro.TimeMicros:
			t, ok := timeOfDay(v, time.Microsecond, 6)
			if !ok {
				return nil, malformed("Avro time-micros %d out of range", v)
			}
			return t, nil
		}
		return v, nil
	case avro.Float:
		b, err := r.fixed(4)
		if err != nil {
			return nil, err
		}
		return float32Value(math.Float32frombits(binary.LittleEndian.Uint32(b))), nil
	case avro.Double:
		b, err := r.fixed(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	case avro.String:
		b, err := r.bytes()
		if err != nil {
			return nil, err
		}
		return string(b), nil
	case avro.Bytes:
		b, err := r.bytes()
		if err != nil {
			return nil, err
		}
		if dec, ok := s.(avro.LogicalTypeSchema).Logical().(*avro.DecimalLogicalSchema); ok {
			return DecimalBytes(b, dec.Scale())
		}
		return cloneBytes(b), nil
	case avro.Fixed:
		fs := s.(*avro.FixedSchema)
		b, err := r.fixed(fs.Size())
		if err != nil {
			return nil, err
		}
		if dec, ok := fs.Logical().(*avro.DecimalLogicalSchema); ok {
			return DecimalBytes(b, dec.Scale())
		}
		return cloneBytes(b), nil
	case avro.Enum:
		es := s.(*avro.EnumSchema)
		i, err := r.int()
		if err != nil {
			return nil, err
		}
		if i < 0 || int(i) >= len(es.Symbols()) {
			return nil, malformed("Avro enum %s index %d out of range", es.FullName(), i)
		}
		return es.Symbols()[i], nil
	case avro.Union:
		types := s.(*avro.UnionSchema).Types()
		i, err := r.long()
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(types)) {
			return nil, malformed("Avro union index %d out of range", i)
		}
		return r.decode(types[i], depth+1) // the union's index took a byte: one value
	case avro.Record:
		rs := s.(*avro.RecordSchema)
		if err := r.spend(mapItems); err != nil {
			return nil, err
		}
		m := make(map[string]any, len(rs.Fields()))
		for _, f := range rs.Fields() {
			v, err := r.value(f.Type(), depth+1)
			if err != nil {
				return nil, inField(f.Name(), err)
			}
			m[f.Name()] = v
		}
		return m, nil
	case avro.Array:
		items := s.(*avro.ArraySchema).Items()
		out := []any{}
		for {
			n, err := r.blockCount()
			if err != nil {
				return nil, err
			}
			if n == 0 {
				return out, nil
			}
			for range n {
				v, err := r.value(items, depth+1)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
		}
	case avro.Map:
		values := s.(*avro.MapSchema).Values()
		if err := r.spend(mapItems); err != nil {
			return nil, err
		}
		out := map[string]any{}
		for {
			n, err := r.blockCount()
			if err != nil {
				return nil, err
			}
			if n == 0 {
				return out, nil
			}
			for range n {
				if err := r.spend(1); err != nil { // the key
					return nil, err
				}
				k, err := r.bytes()
				if err != nil {
					return nil, err
				}
				v, err := r.value(values, depth+1)
				if err != nil {
					return nil, err
				}
				out[string(k)] = v
			}
		}
	}
	return nil, malformed("Avro type %s not supported", s.Type())
}

// logicalType returns the logical type of s, or "" when it has none.
func logicalType(s avro.Schema) avro.LogicalType {
	if ls, ok := s.(avro.LogicalTypeSchema); ok {
		if l := ls.Logical(); l != nil {
			return l.Type()
		}
	}
	return ""
}
