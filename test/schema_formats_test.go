package test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/jsonschema"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/protobuf"
	"github.com/jackc/pgx/v5"
	"github.com/jhump/protoreflect/desc/protoparse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink/inbox"
	"github.com/eosink/eosink/sink/plugin"
	"github.com/eosink/eosink/sink/table"
)

const itemProto = `syntax = "proto3";
package eosink.it;
import "google/protobuf/timestamp.proto";

message ItemKey {
  int64 id = 1;
}
message Item {
  int64 id = 1;
  string name = 2;
  google.protobuf.Timestamp at = 3;
  repeated int32 qty = 4;
  Detail detail = 5;
  bytes raw = 6;
  message Detail {
    string color = 1;
    double weight = 2;
  }
}
`

// parseProto compiles a .proto text as a producer would have it.
func parseProto(t *testing.T, src string) protoreflect.FileDescriptor {
	t.Helper()
	p := protoparse.Parser{
		Accessor: func(name string) (io.ReadCloser, error) {
			if name == "item.proto" {
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
	fds, err := p.ParseFiles("item.proto")
	if err != nil {
		t.Fatal(err)
	}
	return fds[0].UnwrapFile()
}

func protoBytes(t *testing.T, s *protobuf.Serializer, topic string, md protoreflect.MessageDescriptor, js string) []byte {
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

// TestProtobufIntoUpsert: Protobuf keys and values through the real registry into the upsert
// plugin: key columns from the decoded key, a Timestamp into timestamptz, a repeated field
// into integer[], a nested message into jsonb, bytes into bytea; the last record of a key
// wins, and a tombstone deletes its key's row (its key decoded for the delete).
func TestProtobufIntoUpsert(t *testing.T) {
	t.Parallel()
	c, regURL := registryClient(t)
	p := newPipeline(t, 1)
	fd := parseProto(t, itemProto)
	keyMD, itemMD := fd.Messages().ByName("ItemKey"), fd.Messages().ByName("Item")
	ks, err := protobuf.NewSerializer(c, serde.KeySerde, protobuf.NewSerializerConfig())
	if err != nil {
		t.Fatal(err)
	}
	vs, err := protobuf.NewSerializer(c, serde.ValueSerde, protobuf.NewSerializerConfig())
	if err != nil {
		t.Fatal(err)
	}
	type item struct {
		id           int64
		name         string
		atMicros     int64
		qty          []int32
		color        string
		weight       string
		raw          []byte
		deleted      bool
		lastOffsetOf int
	}
	last := map[int64]item{}
	var msgs []testbed.Msg
	for i := range 30 {
		id := int64(i % 7)
		key := protoBytes(t, ks, p.Topic, keyMD, fmt.Sprintf(`{"id":"%d"}`, id))
		if i == 25 || i == 26 { // tombstones: 4 and 5 are deleted
			msgs = append(msgs, testbed.Msg{Partition: 0, Key: key})
			last[id] = item{id: id, deleted: true}
			continue
		}
		at := time.UnixMicro(1700000000000000 + int64(i)*1234567).UTC()
		it := item{id: id, name: fmt.Sprintf("n-%d \"q\"", i), atMicros: at.UnixMicro(), qty: []int32{int32(i), -1, 0},
			color: fmt.Sprintf("c%d", i), weight: "0.1", raw: []byte{byte(i), 0, 0xff}}
		val := protoBytes(t, vs, p.Topic, itemMD, fmt.Sprintf(`{"id":"%d","name":%q,"at":%q,"qty":[%d,-1,0],"detail":{"color":%q,"weight":0.1},"raw":"%s"}`,
			id, it.name, at.Format(time.RFC3339Nano), i, it.color, base64.StdEncoding.EncodeToString(it.raw)))
		msgs = append(msgs, testbed.Msg{Partition: 0, Key: key, Value: val})
		last[id] = it
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)

	db := testbed.Pool(t, p.Env)
	tbl := pgx.Identifier{p.Schema, "items"}.Sanitize()
	if _, err := db.Exec(context.Background(), "CREATE TABLE "+tbl+` (id bigint PRIMARY KEY, name text NOT NULL,
 at timestamptz NOT NULL, qty integer[] NOT NULL, detail jsonb NOT NULL, raw bytea NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	reg := &plugin.SchemaRegistry{URL: regURL}
	pl, err := table.NewUpsert(table.UpsertConfig{Key: []string{"id"}, DeleteOnTombstone: true, Config: table.Config{
		Table: p.Schema + ".items", KeyFormat: "protobuf", ValueFormat: "protobuf", SchemaRegistry: reg,
		Columns: map[string]table.Column{"id": {From: "key.id"}, "name": {From: "value.name"}, "at": {From: "value.at"},
			"qty": {From: "value.qty"}, "detail": {From: "value.detail"}, "raw": {From: "value.raw"}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := startSink(t, avroSinkConfig(t, p, pl))
	waitEnds(t, p, p.logEnds(t))
	if errs := r.s.PartitionErrors(); len(errs) > 0 {
		t.Fatalf("partition errors: %v", errs)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(context.Background(), `SELECT id, name, (extract(epoch FROM at) * 1000000)::bigint, qty,
 detail->>'color', (detail->'weight')::text, raw FROM `+tbl+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (item, error) {
		var x item
		err := r.Scan(&x.id, &x.name, &x.atMicros, &x.qty, &x.color, &x.weight, &x.raw)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []item
	for id := range int64(7) {
		if it := last[id]; !it.deleted {
			want = append(want, it)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("rows %+v\nwant %+v", got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.id != w.id || g.name != w.name || g.atMicros != w.atMicros || !slices.Equal(g.qty, w.qty) || g.color != w.color ||
			g.weight != w.weight || !slices.Equal(g.raw, w.raw) {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

const eventSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Event","type":"object",
 "properties":{"event_id":{"type":"string"},"amount":{"type":"number"},"tags":{"type":"array","items":{"type":"string"}},
  "meta":{"type":"object"}},
 "required":["event_id","amount"]}`

// exactNumber marshals as the JSON number it holds.
type exactNumber string

func (n exactNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }

// TestJSONSchemaThroughInbox: JSON Schema values through the real registry, deduplicated by
// the inbox plugin on a decoded field (value.event_id) and written by the table plugin: a
// number with more digits than a float64 holds lands in numeric exactly, an array into
// jsonb; republished events are applied once.
func TestJSONSchemaThroughInbox(t *testing.T) {
	t.Parallel()
	c, regURL := registryClient(t)
	p := newPipeline(t, 1)
	id := registerSchema(t, c, p.Topic+"-value", "JSON", eventSchema)
	conf := jsonschema.NewSerializerConfig()
	conf.AutoRegisterSchemas = false
	conf.UseSchemaID = id
	s, err := jsonschema.NewSerializer(c, serde.ValueSerde, conf)
	if err != nil {
		t.Fatal(err)
	}
	type event struct {
		EventID string         `json:"event_id"`
		Amount  exactNumber    `json:"amount"`
		Tags    []string       `json:"tags"`
		Meta    map[string]any `json:"meta"`
	}
	var msgs []testbed.Msg
	for i := range 13 {
		n := i % 10 // events 0, 1 and 2 are republished
		b, err := s.Serialize(p.Topic, &event{EventID: fmt.Sprintf("ev-%d", n), Amount: exactNumber(fmt.Sprintf("9007199254740993%d.000000000000000001", n)),
			Tags: []string{"x", fmt.Sprint(n)}, Meta: map[string]any{"n": n}})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, testbed.Msg{Partition: 0, Key: []byte(fmt.Sprint(n)), Value: b})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)

	db := testbed.Pool(t, p.Env)
	tbl := pgx.Identifier{p.Schema, "events_js"}.Sanitize()
	if _, err := db.Exec(context.Background(), "CREATE TABLE "+tbl+` (event_id text PRIMARY KEY, amount numeric NOT NULL,
 tags jsonb NOT NULL, meta_n integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	reg := &plugin.SchemaRegistry{URL: regURL}
	inner, err := table.New(table.Config{Table: p.Schema + ".events_js", ValueFormat: "json_schema", SchemaRegistry: reg,
		Columns: map[string]table.Column{"event_id": {From: "value.event_id"}, "amount": {From: "value.amount"},
			"tags": {From: "value.tags"}, "meta_n": {From: "value.meta.n"}}})
	if err != nil {
		t.Fatal(err)
	}
	ib, err := inbox.New(inbox.Config{EventID: "value.event_id", Subscriber: p.Group, Schema: p.OffsetsSchema,
		ValueFormat: "json_schema", SchemaRegistry: reg}, inner)
	if err != nil {
		t.Fatal(err)
	}
	cfg := avroSinkConfig(t, p, ib)
	cfg.AutoMigrate = true
	r := startSink(t, cfg)
	waitEnds(t, p, p.logEnds(t))
	if errs := r.s.PartitionErrors(); len(errs) > 0 {
		t.Fatalf("partition errors: %v", errs)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	got := strs(t, db, "SELECT event_id || ' ' || amount::text || ' ' || tags::text || ' ' || meta_n FROM "+tbl)
	var want []string
	for n := range 10 {
		want = append(want, fmt.Sprintf(`ev-%d 9007199254740993%d.000000000000000001 ["x", "%d"] %d`, n, n, n, n))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n got %q\nwant %q", got, want)
	}
	var dups int
	if err := db.QueryRow(context.Background(), "SELECT sum(duplicates) FROM "+pgx.Identifier{p.OffsetsSchema, "inbox"}.Sanitize()+
		" WHERE subscriber = $1", p.Group).Scan(&dups); err != nil || dups != 3 {
		t.Errorf("inbox duplicates %d, %v; want 3", dups, err)
	}
}
