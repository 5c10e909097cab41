package schemaformat

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/protobuf"
	"github.com/jhump/protoreflect/desc/protoparse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

const orderProto = `syntax = "proto3";
package eosink.test;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Order {
  int64 id = 1;
  string name = 2;
  Customer customer = 3;
  repeated int32 items = 4;
  Status status = 5;
  google.protobuf.Timestamp created = 6;
  map<string, string> tags = 7;
  bytes blob = 8;
  double ratio = 9;
  float score = 10;
  optional string note = 11;
  google.protobuf.Int64Value maybe = 12;
  uint64 big = 13;
  repeated Customer contacts = 14;
  sint32 delta = 15;
  message Customer {
    string name = 1;
    bool vip = 2;
  }
}
enum Status {
  NEW = 0;
  PAID = 1;
}
message Other {
  string x = 1;
}
`

// protoFile parses a .proto text as the producer side would have it compiled.
func protoFile(t *testing.T, src string) protoreflect.FileDescriptor {
	t.Helper()
	p := protoparse.Parser{
		Accessor: func(name string) (io.ReadCloser, error) {
			if name == "order.proto" {
				return io.NopCloser(strings.NewReader(src)), nil
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
	fds, err := p.ParseFiles("order.proto")
	if err != nil {
		t.Fatal(err)
	}
	return fds[0].UnwrapFile()
}

// protoRecord serializes the message of type md given as protojson text, through the
// protobuf serde's serializer (which registers the schema under <topic>-value).
func protoRecord(t *testing.T, s *protobuf.Serializer, topic string, md protoreflect.MessageDescriptor, js string) []byte {
	t.Helper()
	msg := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(js), msg); err != nil {
		t.Fatal(err)
	}
	b, err := s.Serialize(topic, msg)
	if err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return b
}

func TestProtobuf(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("proto-orders")
	s, err := protobuf.NewSerializer(c, serde.ValueSerde, protobuf.NewSerializerConfig())
	if err != nil {
		t.Fatal(err)
	}
	fd := protoFile(t, orderProto)
	order, other := fd.Messages().ByName("Order"), fd.Messages().ByName("Other")
	customer := order.Messages().ByName("Customer")

	full := protoRecord(t, s, topic, order, `{"id":"9007199254740993","name":"n","customer":{"name":"Ada","vip":true},
	  "items":[1,2,3],"status":"PAID","created":"2023-11-14T22:13:20.123456Z","tags":{"a":"x"},"blob":"AAH/",
	  "ratio":0.1,"score":0.25,"note":"hi","maybe":"-7","big":"18446744073709551615",
	  "contacts":[{"name":"B"},{"name":"C","vip":true}],"delta":-5}`)
	empty := protoRecord(t, s, topic, order, `{}`)
	second := protoRecord(t, s, topic, other, `{"x":"y"}`)
	nested := protoRecord(t, s, topic, customer, `{"name":"Nested"}`)

	d := newDecoder(t, registryURL(t))
	m := decode(t, d, Protobuf, full)
	wantTree(t, m.Value, map[string]any{
		"id": int64(9007199254740993), "name": "n",
		"customer": map[string]any{"name": "Ada", "vip": true},
		"items":    []any{int64(1), int64(2), int64(3)},
		"status":   "PAID",
		"created":  time.UnixMicro(1700000000123456).UTC(),
		"tags":     map[string]any{"a": "x"},
		"blob":     []byte{0, 1, 255},
		"ratio":    0.1, "score": 0.25,
		"note": "hi", "maybe": int64(-7),
		"big":      Decimal("18446744073709551615"),
		"contacts": []any{map[string]any{"name": "B", "vip": false}, map[string]any{"name": "C", "vip": true}},
		"delta":    int64(-5),
	})
	if got, _ := Text(m.Value.(map[string]any)["created"]); got != "2023-11-14T22:13:20.123456Z" {
		t.Errorf("created text %v", got)
	}
	// Unset fields: proto3 scalars give their default, fields with presence nil.
	wantTree(t, decode(t, d, Protobuf, empty).Value, map[string]any{
		"id": int64(0), "name": "", "customer": nil, "items": []any{}, "status": "NEW", "created": nil,
		"tags": map[string]any{}, "blob": []byte{}, "ratio": 0.0, "score": 0.0, "note": nil, "maybe": nil,
		"big": int64(0), "contacts": []any{}, "delta": int64(0),
	})
	// Message indexes: the second top-level message, and a nested one.
	wantTree(t, decode(t, d, Protobuf, second).Value, map[string]any{"x": "y"})
	wantTree(t, decode(t, d, Protobuf, nested).Value, map[string]any{"name": "Nested", "vip": false})

	// A message index the schema does not have is malformed (the serde would panic).
	bad := append([]byte{}, second...)
	bad[5], bad[6] = 2, 18 // one index (zig-zag 2), 9 (zig-zag 18): the file has 2 messages
	if _, err := d.Decode(Protobuf, bad); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad message index: err = %v, want ErrMalformed", err)
	}
	bad = append(append([]byte{}, full[:6]...), 0x0a, 0x7f) // field 1 bytes of length 127, absent
	if _, err := d.Decode(Protobuf, bad); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated body: err = %v, want ErrMalformed", err)
	}
}
