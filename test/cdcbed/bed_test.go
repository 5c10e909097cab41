// Package cdcbed checks the change data capture part of the test bed on the real services:
// a Debezium PostgreSQL source on Kafka Connect standalone (internal/testbed/debezium.go)
// capturing a database in the bed's cluster, writing to the bed's Kafka broker, with Avro
// through the bed's Apicurio Schema Registry or with JSON. No mocks: it needs
// KAFKA_BOOTSTRAP_SERVERS, DATABASE_URL and EOSINK_REGISTRY_URL (`make services`, then
// `. .services/env`), and fails when they are missing.
package cdcbed

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/avrov2"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// requireEnv fails, naming what is missing, unless the three services are named.
func requireEnv(t *testing.T) (testbed.Env, string) {
	t.Helper()
	var missing []string
	for _, k := range []string{"KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL", "EOSINK_REGISTRY_URL"} {
		if os.Getenv(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s not set: this test needs the real Kafka broker, PostgreSQL (wal_level=logical) and Schema Registry "+
			"of the test bed; run `bash test/services/services.sh up` and `. .services/env` (or `make test`)", strings.Join(missing, ", "))
	}
	return testbed.Require(t), testbed.RequireRegistry(t)
}

const tableDDL = `
CREATE TABLE public.items (
	id          bigint PRIMARY KEY,
	name        text NOT NULL,
	price       numeric(12,3),
	happened_at timestamptz,
	attrs       jsonb,
	ref         uuid,
	blob        bytea
);
ALTER TABLE public.items REPLICA IDENTITY FULL;`

// row is one state of a row of public.items, as written and as expected back.
type row struct {
	id    int64
	name  string
	price string // numeric(12,3), as PostgreSQL prints it
	at    time.Time
	attrs string // jsonb, as PostgreSQL prints it
	ref   string
	blob  []byte
}

func (r row) String() string {
	return fmt.Sprintf("{id=%d name=%q price=%s at=%s attrs=%s ref=%s blob=%x}", r.id, r.name, r.price,
		r.at.UTC().Format(time.RFC3339Nano), r.attrs, r.ref, r.blob)
}

var (
	t0   = time.Date(2026, 11, 30, 12, 34, 56, 123456000, time.UTC)
	row1 = row{1, "snapshot row", "12.340", t0, `{"a": 1, "tags": ["x", "y"]}`, "6f1c8a8e-2d4b-4c1e-9a51-0b7a7f3e2c11", []byte{0, 1, 2, 0xfe, 0xff}}
	row2 = row{2, "streamed row", "-0.500", t0.Add(90 * time.Minute), `{"b": null}`, "0d9e2c54-6f0b-47a2-8c3e-5f1d2a9b7c60", []byte("bytes\x00here")}
	// row2u is row2 after the update.
	row2u = row{2, "streamed row, updated", "99999.999", t0.Add(48 * time.Hour), `{"b": {"c": [1, 2, 3]}}`, row2.ref, []byte{0xde, 0xad, 0xbe, 0xef}}
)

func insert(t *testing.T, ctx context.Context, c *pgx.Conn, r row) {
	t.Helper()
	if _, err := c.Exec(ctx, `INSERT INTO public.items VALUES ($1, $2, $3::numeric, $4, $5::jsonb, $6::uuid, $7)`,
		r.id, r.name, r.price, r.at, r.attrs, r.ref, r.blob); err != nil {
		t.Fatalf("insert %d: %v", r.id, err)
	}
}

// event is one change event, decoded: the key's id, the op code, and the before and after
// images turned into rows (nil when absent). tombstone: the record after a delete (null value).
type event struct {
	partition     int32
	id            int64
	op            string
	before, after *row
	tombstone     bool
}

func (e event) String() string {
	if e.tombstone {
		return fmt.Sprintf("tombstone id=%d", e.id)
	}
	return fmt.Sprintf("op=%s id=%d before=%v after=%v", e.op, e.id, e.before, e.after)
}

// setup makes the source database and table, with row1 in it before Debezium starts.
func setup(t *testing.T, e testbed.Env) (srcURL string, c *pgx.Conn) {
	t.Helper()
	srcURL, _ = testbed.SourceDatabase(t, e, "cdc_src")
	ctx := context.Background()
	c, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		t.Fatalf("connect to source: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if _, err := c.Exec(ctx, tableDDL); err != nil {
		t.Fatalf("create table: %v", err)
	}
	insert(t, ctx, c, row1) // before Debezium starts: arrives as a snapshot read (op r)
	return srcURL, c
}

// changes runs the insert, update and delete the tests expect to see.
func changes(t *testing.T, c *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	insert(t, ctx, c, row2)
	if _, err := c.Exec(ctx, `UPDATE public.items SET name = $2, price = $3::numeric, happened_at = $4, attrs = $5::jsonb, blob = $6 WHERE id = $1`,
		row2u.id, row2u.name, row2u.price, row2u.at, row2u.attrs, row2u.blob); err != nil {
		t.Fatalf("update: %v", err)
	}
	if _, err := c.Exec(ctx, `DELETE FROM public.items WHERE id = 1`); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// consume reads topic from the start until want records arrived (at most 2 minutes) and
// checks the topic has the partitions asked for.
func consume(t *testing.T, e testbed.Env, topic string, partitions int, want int) []*kafka.Message {
	t.Helper()
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": e.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var parts []kafka.TopicPartition
	testbed.Eventually(t, 60*time.Second, "topic "+topic+" created by Connect", func() (bool, string) {
		md, err := a.GetMetadata(&topic, false, 5000)
		if err != nil {
			return false, err.Error()
		}
		tm, ok := md.Topics[topic]
		if !ok || tm.Error.Code() != kafka.ErrNoError {
			return false, fmt.Sprintf("not yet (%v)", tm.Error)
		}
		parts = parts[:0]
		for _, p := range tm.Partitions {
			parts = append(parts, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.OffsetBeginning})
		}
		return true, ""
	})
	if len(parts) != partitions {
		t.Fatalf("topic %s has %d partitions, want %d (topic.creation.default.partitions)", topic, len(parts), partitions)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = a.DeleteTopics(ctx, []string{topic})
	})
	cons, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": e.Brokers, "group.id": "cdcbed-" + topic,
		"enable.auto.commit": false, "go.logs.channel.enable": false})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if err := cons.Assign(parts); err != nil {
		t.Fatal(err)
	}
	var got []*kafka.Message
	deadline := time.Now().Add(2 * time.Minute)
	for len(got) < want && time.Now().Before(deadline) {
		m, err := cons.ReadMessage(time.Second)
		if err != nil {
			if ke, ok := err.(kafka.Error); ok && ke.IsTimeout() {
				continue
			}
			t.Fatalf("consume %s: %v", topic, err)
		}
		got = append(got, m)
	}
	if len(got) < want {
		t.Fatalf("%d of %d change events on %s within 2 minutes", len(got), want, topic)
	}
	return got
}

// check asserts the events of the run: id 1 read by the snapshot then deleted (with its
// tombstone), id 2 created then updated, each key's events in order on one partition.
func check(t *testing.T, evs []event) {
	t.Helper()
	byID := map[int64][]event{}
	for _, ev := range evs {
		byID[ev.id] = append(byID[ev.id], ev)
	}
	same := func(what string, got *row, want row) {
		t.Helper()
		if got == nil {
			t.Errorf("%s: no image", what)
			return
		}
		if got.id != want.id || got.name != want.name || got.price != want.price || !got.at.Equal(want.at) ||
			!jsonEqual(got.attrs, want.attrs) || got.ref != want.ref || !bytes.Equal(got.blob, want.blob) {
			t.Errorf("%s:\n got  %v\n want %v", what, *got, want)
		}
	}
	one := byID[1]
	if len(one) != 3 || one[0].op != "r" || one[1].op != "d" || !one[2].tombstone {
		t.Fatalf("id 1: want read, delete, tombstone; got %v", one)
	}
	same("id 1 read: after", one[0].after, row1)
	if one[0].before != nil {
		t.Errorf("id 1 read: before = %v, want none", one[0].before)
	}
	same("id 1 delete: before (REPLICA IDENTITY FULL)", one[1].before, row1)
	if one[1].after != nil {
		t.Errorf("id 1 delete: after = %v, want none", one[1].after)
	}
	two := byID[2]
	if len(two) != 2 || two[0].op != "c" || two[1].op != "u" {
		t.Fatalf("id 2: want create, update; got %v", two)
	}
	same("id 2 create: after", two[0].after, row2)
	same("id 2 update: before (REPLICA IDENTITY FULL)", two[1].before, row2)
	same("id 2 update: after", two[1].after, row2u)
	for id, list := range byID {
		for _, ev := range list[1:] {
			if ev.partition != list[0].partition {
				t.Errorf("id %d: events on partitions %d and %d", id, list[0].partition, ev.partition)
			}
		}
	}
	if len(byID) != 2 {
		t.Errorf("events for ids %v, want 1 and 2", byID)
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// TestDebeziumAvroThroughRegistry: Debezium with Apicurio's Avro converter through the bed's
// registry; the Go consumer decodes keys and values with confluent-kafka-go's schemaregistry
// client and the avrov2 deserializer, on the registry's Confluent-compatible API. Numerics use
// Debezium's default decimal.handling.mode=precise (Avro decimal logical type).
func TestDebeziumAvroThroughRegistry(t *testing.T) {
	t.Parallel()
	e, registryURL := requireEnv(t)
	srcURL, c := setup(t, e)
	prefix := testbed.Name(t, "cdc")
	d := testbed.RunDebezium(t, testbed.DebeziumOptions{
		Brokers: e.Brokers, SourceURL: srcURL, Tables: []string{"public.items"}, TopicPrefix: prefix,
		Converter: testbed.Avro, RegistryURL: registryURL, Partitions: 2, DecimalHandling: "precise",
	})
	t.Logf("Debezium (Avro) running after %s; log %s", d.StartedIn.Round(time.Millisecond), d.Log)
	changes(t, c)
	topic := d.Topic("public.items")
	msgs := consume(t, e, topic, 2, 5)

	client, err := schemaregistry.NewClient(schemaregistry.NewConfig(registryURL))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := avrov2.NewDeserializer(client, serde.KeySerde, avrov2.NewDeserializerConfig())
	if err != nil {
		t.Fatal(err)
	}
	values, err := avrov2.NewDeserializer(client, serde.ValueSerde, avrov2.NewDeserializerConfig())
	if err != nil {
		t.Fatal(err)
	}
	var evs []event
	for _, m := range msgs {
		if len(m.Key) < 5 || m.Key[0] != 0 {
			t.Fatalf("key %x is not in the Confluent wire format (magic byte 0, 4-byte id)", m.Key)
		}
		var k map[string]any
		if err := keys.DeserializeInto(topic, m.Key, &k); err != nil {
			t.Fatalf("decode key %x: %v", m.Key, err)
		}
		ev := event{partition: m.TopicPartition.Partition, id: k["id"].(int64)}
		if m.Value == nil {
			ev.tombstone = true
			evs = append(evs, ev)
			continue
		}
		var v map[string]any
		if err := values.DeserializeInto(topic, m.Value, &v); err != nil {
			t.Fatalf("decode value: %v", err)
		}
		ev.op, _ = v["op"].(string)
		ev.before, ev.after = avroRow(t, v["before"]), avroRow(t, v["after"])
		evs = append(evs, ev)
	}
	check(t, evs)
	for _, s := range []string{topic + "-key", topic + "-value"} {
		if _, err := client.GetLatestSchemaMetadata(s); err != nil {
			t.Errorf("subject %s in the registry: %v", s, err)
		}
	}
}

// union unwraps an Avro union value as the generic decoder gives it: nil, or a map with one
// entry keyed by the branch's type name.
func union(v any) any {
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for _, x := range m {
			return x
		}
	}
	return v
}

func avroRow(t *testing.T, v any) *row {
	t.Helper()
	v = union(v)
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("row image is %T %v, want a record", v, v)
	}
	r := &row{id: m["id"].(int64), name: m["name"].(string)}
	switch p := union(m["price"]).(type) {
	case *big.Rat:
		r.price = p.FloatString(3)
	default:
		t.Fatalf("price is %T %v, want an Avro decimal (*big.Rat)", p, p)
	}
	at, err := time.Parse(time.RFC3339Nano, union(m["happened_at"]).(string))
	if err != nil {
		t.Fatalf("happened_at: %v", err)
	}
	r.at = at
	r.attrs = union(m["attrs"]).(string)
	r.ref = union(m["ref"]).(string)
	r.blob = union(m["blob"]).([]byte)
	return r
}

// TestDebeziumJSONWithSchemas: Debezium with Connect's JsonConverter, schemas enabled, and
// decimal.handling.mode=string.
func TestDebeziumJSONWithSchemas(t *testing.T) {
	t.Parallel()
	e, _ := requireEnv(t)
	srcURL, c := setup(t, e)
	prefix := testbed.Name(t, "cdc")
	d := testbed.RunDebezium(t, testbed.DebeziumOptions{
		Brokers: e.Brokers, SourceURL: srcURL, Tables: []string{"public.items"}, TopicPrefix: prefix,
		Converter: testbed.JSONWithSchemas, Partitions: 1, DecimalHandling: "string",
	})
	t.Logf("Debezium (JSON) running after %s; log %s", d.StartedIn.Round(time.Millisecond), d.Log)
	changes(t, c)
	topic := d.Topic("public.items")
	msgs := consume(t, e, topic, 1, 5)

	type envelope struct {
		Schema  json.RawMessage `json:"schema"`
		Payload json.RawMessage `json:"payload"`
	}
	var evs []event
	for _, m := range msgs {
		var k envelope
		if err := json.Unmarshal(m.Key, &k); err != nil || len(k.Schema) == 0 {
			t.Fatalf("key %s: want {schema, payload} (%v)", m.Key, err)
		}
		var kp struct{ ID int64 }
		if err := json.Unmarshal(k.Payload, &kp); err != nil {
			t.Fatalf("key payload %s: %v", k.Payload, err)
		}
		ev := event{partition: m.TopicPartition.Partition, id: kp.ID}
		if m.Value == nil {
			ev.tombstone = true
			evs = append(evs, ev)
			continue
		}
		var v envelope
		if err := json.Unmarshal(m.Value, &v); err != nil || len(v.Schema) == 0 {
			t.Fatalf("value %s: want {schema, payload} (%v)", m.Value, err)
		}
		var schema struct{ Name string }
		_ = json.Unmarshal(v.Schema, &schema)
		if want := topic + ".Envelope"; schema.Name != want {
			t.Errorf("value schema name %q, want %q", schema.Name, want)
		}
		var p struct {
			Op            string
			Before, After *jsonRow
		}
		if err := json.Unmarshal(v.Payload, &p); err != nil {
			t.Fatalf("value payload %s: %v", v.Payload, err)
		}
		ev.op, ev.before, ev.after = p.Op, p.Before.row(t), p.After.row(t)
		evs = append(evs, ev)
	}
	check(t, evs)
}

// jsonRow is a row image in the JsonConverter payload: numeric as a string
// (decimal.handling.mode=string), timestamptz as an ISO 8601 string, bytea in base64.
type jsonRow struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	Price      string `json:"price"`
	HappenedAt string `json:"happened_at"`
	Attrs      string `json:"attrs"`
	Ref        string `json:"ref"`
	Blob       string `json:"blob"`
}

func (j *jsonRow) row(t *testing.T) *row {
	t.Helper()
	if j == nil {
		return nil
	}
	at, err := time.Parse(time.RFC3339Nano, j.HappenedAt)
	if err != nil {
		t.Fatalf("happened_at: %v", err)
	}
	blob, err := base64.StdEncoding.DecodeString(j.Blob)
	if err != nil {
		t.Fatalf("blob: %v", err)
	}
	return &row{id: j.ID, name: j.Name, price: j.Price, at: at, attrs: j.Attrs, ref: j.Ref, blob: blob}
}
