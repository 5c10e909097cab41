package schemaformat

import (
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/jhump/protoreflect/desc/protoparse"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	// The serde's imports register the well-known files a schema may import
	// (confluent/type/decimal.proto, google/type/date.proto, ...) in GlobalFiles.
	_ "github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/confluent/types"
)

// Protobuf records are decoded by the protobuf serde into a dynamicpb message of the
// record's type. The serde finds that type itself but does not return it, and indexes
// its file's messages without checking the bounds (a bad message index panics), so the
// Decoder parses the registered file descriptor too (with protoparse, as the serde
// does), checks the indexes and builds the message.

// protoSchema is a parsed Protobuf schema.
type protoSchema struct {
	file protoreflect.FileDescriptor
}

func (d *Decoder) compileProtobuf(id int, info schemaregistry.SchemaInfo) (*protoSchema, error) {
	deps := map[string]string{}
	err := d.walkReferences(id, info, 0, func(ref schemaregistry.Reference, ri schemaregistry.SchemaInfo) error {
		deps[ref.Name] = ri.Schema
		return nil
	})
	if err != nil {
		return nil, err
	}
	parser := protoparse.Parser{
		Accessor: func(name string) (io.ReadCloser, error) {
			if name == "." {
				return io.NopCloser(strings.NewReader(info.Schema)), nil
			}
			if s, ok := deps[name]; ok {
				return io.NopCloser(strings.NewReader(s)), nil
			}
			return nil, os.ErrNotExist
		},
		LookupImportProto: func(name string) (*descriptorpb.FileDescriptorProto, error) {
			fd, err := protoregistry.GlobalFiles.FindFileByPath(name)
			if err != nil {
				return nil, err
			}
			return protodesc.ToFileDescriptorProto(fd), nil
		},
	}
	fds, err := parser.ParseFiles(".")
	if err != nil {
		return nil, badSchema(id, "Protobuf schema does not parse: %v", err)
	}
	if len(fds) != 1 {
		return nil, badSchema(id, "Protobuf schema gives %d files", len(fds))
	}
	return &protoSchema{file: fds[0].UnwrapFile()}, nil
}

// message returns the message type that the message-index array names.
func (s *protoSchema) message(indexes []int) (protoreflect.MessageDescriptor, error) {
	msgs := s.file.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range indexes {
		if i >= msgs.Len() {
			return nil, malformed("Protobuf message index %d out of range (%d messages)", i, msgs.Len())
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	if md == nil {
		return nil, malformed("empty Protobuf message-index array")
	}
	return md, nil
}

func (d *Decoder) decodeProtobuf(s *protoSchema, h header, data []byte) (any, error) {
	md, err := s.message(h.indexes)
	if err != nil {
		return nil, err
	}
	msg := dynamicpb.NewMessage(md)
	if err := d.proto.DeserializeInto("", data, msg); err != nil {
		return nil, err
	}
	return protoMessage(msg, 0)
}

// protoMessage turns m into a map by field name. A field without presence (a proto3
// scalar, a repeated or map field) always has its value, the default when unset; a field
// with presence (a message, optional or oneof field) is nil when unset. Some well-known
// types become leaves: google.protobuf.Timestamp a time.Time, the wrappers their value,
// google.type.Date a Date, google.type.TimeOfDay a TimeOfDay, confluent.type.Decimal a
// Decimal.
func protoMessage(m protoreflect.Message, depth int) (any, error) {
	if depth > maxAvroDepth {
		return nil, malformed("Protobuf value nests deeper than %d", maxAvroDepth)
	}
	if v, ok, err := protoWellKnown(m); ok || err != nil {
		return v, err
	}
	fields := m.Descriptor().Fields()
	out := make(map[string]any, fields.Len())
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.HasPresence() && !m.Has(fd) {
			out[string(fd.Name())] = nil
			continue
		}
		v, err := protoField(fd, m.Get(fd), depth)
		if err != nil {
			return nil, inField(string(fd.Name()), err)
		}
		out[string(fd.Name())] = v
	}
	return out, nil
}

func protoField(fd protoreflect.FieldDescriptor, v protoreflect.Value, depth int) (any, error) {
	switch {
	case fd.IsMap():
		out := map[string]any{}
		var err error
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			var x any
			x, err = protoScalar(fd.MapValue(), mv, depth)
			out[k.String()] = x
			return err == nil
		})
		return out, err
	case fd.IsList():
		l := v.List()
		out := make([]any, l.Len())
		for i := range l.Len() {
			x, err := protoScalar(fd, l.Get(i), depth)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	return protoScalar(fd, v, depth)
}

// protoScalar converts one value of fd's kind (an element, for a list or map field).
func protoScalar(fd protoreflect.FieldDescriptor, v protoreflect.Value, depth int) (any, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return v.Bool(), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int(), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		u := v.Uint()
		if u > math.MaxInt64 {
			return Decimal(strconv.FormatUint(u, 10)), nil
		}
		return int64(u), nil
	case protoreflect.FloatKind:
		return float32Value(float32(v.Float())), nil
	case protoreflect.DoubleKind:
		return v.Float(), nil
	case protoreflect.StringKind:
		return v.String(), nil
	case protoreflect.BytesKind:
		return cloneBytes(v.Bytes()), nil
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name()), nil
		}
		return int64(v.Enum()), nil // a number this schema does not know
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return protoMessage(v.Message(), depth+1)
	}
	return nil, malformed("Protobuf kind %s not supported", fd.Kind())
}

// protoWellKnown converts the message types that stand for one value.
func protoWellKnown(m protoreflect.Message) (any, bool, error) {
	d := m.Descriptor()
	get := func(name string) protoreflect.Value {
		return m.Get(d.Fields().ByName(protoreflect.Name(name)))
	}
	switch d.FullName() {
	case "google.protobuf.Timestamp":
		sec, nanos := get("seconds").Int(), get("nanos").Int()
		if nanos < 0 || nanos > 999999999 {
			return nil, true, malformed("google.protobuf.Timestamp nanos %d out of range", nanos)
		}
		return time.Unix(sec, nanos).UTC(), true, nil
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
		"google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
		"google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		fd := d.Fields().ByName("value")
		v, err := protoScalar(fd, m.Get(fd), 0)
		return v, true, err
	case "google.type.Date":
		y, mo, day := get("year").Int(), get("month").Int(), get("day").Int()
		if y < 1 || y > 9999 || mo < 1 || mo > 12 || day < 1 || day > 31 {
			return nil, true, malformed("google.type.Date %d-%d-%d not a full date", y, mo, day)
		}
		return Date(padN(y, 4) + "-" + pad2(mo) + "-" + pad2(day)), true, nil
	case "google.type.TimeOfDay":
		h, mi, s, n := get("hours").Int(), get("minutes").Int(), get("seconds").Int(), get("nanos").Int()
		if h < 0 || h > 24 || mi < 0 || mi > 59 || s < 0 || s > 60 || n < 0 || n > 999999999 {
			return nil, true, malformed("google.type.TimeOfDay out of range")
		}
		return TimeOfDay(pad2(h) + ":" + pad2(mi) + ":" + pad2(s) + "." + padN(n/1000, 6)), true, nil
	case "confluent.type.Decimal":
		b := get("value").Bytes()
		scale := get("scale").Int()
		d, err := DecimalBytes(b, int(scale))
		return d, true, err
	}
	return nil, false, nil
}
