package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/avrov2"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/plugin"
	"github.com/eosink/eosink/sink/table"
)

// Tests of the avro, protobuf and json_schema formats end to end: records serialized with
// confluent-kafka-go's serdes against the test bed's real Schema Registry (Apicurio), the
// real broker, and the built-in plugins writing to the real database.

const orderV1 = `{"type":"record","name":"Order","namespace":"eosink.it","fields":[
 {"name":"id","type":"long"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":30,"scale":10}},
 {"name":"created","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"uid","type":{"type":"string","logicalType":"uuid"}},
 {"name":"blob","type":"bytes"},
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[
   {"name":"name","type":"string"},{"name":"vip","type":"boolean"}]}},
 {"name":"tags","type":{"type":"array","items":"string"}}`

// orderV2 adds an optional field.
var (
	orderSchemaV1 = orderV1 + "]}"
	orderSchemaV2 = orderV1 + `,
 {"name":"note","type":["null","string"],"default":null}]}`
)

// registryClient is a client of the test's own, for registering and serializing.
func registryClient(t *testing.T) (schemaregistry.Client, string) {
	t.Helper()
	u := testbed.RequireRegistry(t)
	c, err := schemaregistry.NewClient(schemaregistry.NewConfig(u))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, u
}

func registerSchema(t *testing.T, c schemaregistry.Client, subject, schemaType, schema string) int {
	t.Helper()
	id, err := c.Register(subject, schemaregistry.SchemaInfo{Schema: schema, SchemaType: schemaType}, false)
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	return id
}

// order is what record i of the Avro tests holds, and what its row must hold.
type order struct {
	id       int64
	amount   string // exact, 30 digits: more than a float64 holds
	created  time.Time
	uid      string
	blob     []byte
	name     string
	vip      bool
	tags     []string
	note     *string // v2 only
	v2       bool
	partOf   int32
	keyValue string
}

func makeOrder(i int, v2 bool) order {
	o := order{id: int64(i), amount: fmt.Sprintf("1234567890123456789%d.01234567%02d", i%10, i%100),
		created: time.UnixMicro(1700000000000000 + int64(i)*1000003).UTC(),
		uid:     fmt.Sprintf("6f1b2c3d-0000-4000-8000-%012d", i),
		blob:    []byte{0, byte(i), 0xff, '\\', '\t'},
		name:    fmt.Sprintf("c\"%d\\ é", i), vip: i%2 == 0,
		tags: []string{"a", fmt.Sprintf("t,%d", i), `q"x\`, "{}"},
		v2:   v2, partOf: int32(i % 2), keyValue: fmt.Sprintf("k-%d", i)}
	if v2 && i%3 != 0 {
		n := fmt.Sprintf("note %d", i)
		o.note = &n
	}
	return o
}

func (o order) avro(t *testing.T, c schemaregistry.Client, topic string, id int) []byte {
	t.Helper()
	amount, ok := new(big.Rat).SetString(o.amount)
	if !ok {
		t.Fatal(o.amount)
	}
	tags := make([]any, len(o.tags))
	for i, s := range o.tags {
		tags[i] = s
	}
	msg := map[string]any{"id": o.id, "amount": amount, "created": o.created, "uid": o.uid, "blob": o.blob,
		"customer": map[string]any{"name": o.name, "vip": o.vip}, "tags": tags}
	if o.v2 {
		msg["note"] = nil
		if o.note != nil {
			msg["note"] = *o.note
		}
	}
	conf := avrov2.NewSerializerConfig()
	conf.AutoRegisterSchemas = false
	conf.UseSchemaID = id
	s, err := avrov2.NewSerializer(c, serde.ValueSerde, conf)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Serialize(topic, &msg)
	if err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return b
}

// orderTable creates the target table and returns the table plugin mapping the decoded
// fields into it.
func orderTable(t *testing.T, p *pipeline, reg *plugin.SchemaRegistry) (*table.Table, string) {
	t.Helper()
	db := testbed.Pool(t, p.Env)
	tbl := pgx.Identifier{p.Schema, "orders_avro"}.Sanitize()
	if _, err := db.Exec(context.Background(), "CREATE TABLE "+tbl+` (k text NOT NULL, id bigint PRIMARY KEY,
 amount numeric(30,10) NOT NULL, created timestamptz NOT NULL, uid uuid NOT NULL, blob bytea NOT NULL,
 customer jsonb NOT NULL, tags text[] NOT NULL, note text, whole jsonb NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	pl, err := table.New(table.Config{Table: p.Schema + ".orders_avro", ValueFormat: "avro", SchemaRegistry: reg,
		Columns: map[string]table.Column{"k": {From: "key"}, "id": {From: "value.id", Required: true},
			"amount": {From: "value.amount"}, "created": {From: "value.created"}, "uid": {From: "value.uid"},
			"blob": {From: "value.blob"}, "customer": {From: "value.customer"}, "tags": {From: "value.tags"},
			"note": {From: "value.note"}, "whole": {From: "value"}}})
	if err != nil {
		t.Fatal(err)
	}
	return pl, tbl
}

// checkOrders compares the table with want, row by row and column by column.
func checkOrders(t *testing.T, db *pgxTable, want []order) {
	t.Helper()
	rows, err := db.pool.Query(context.Background(), `SELECT k, id, amount::text, (extract(epoch FROM created) * 1000000)::bigint,
 uid::text, blob, customer->>'name', (customer->>'vip')::bool, tags, note, whole->>'amount', whole->'customer'->>'name'
 FROM `+db.name+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		k                  string
		id                 int64
		amount             string
		micros             int64
		uid                string
		blob               []byte
		name               string
		vip                bool
		tags               []string
		note               *string
		wholeAmount, name2 string
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.k, &x.id, &x.amount, &x.micros, &x.uid, &x.blob, &x.name, &x.vip, &x.tags, &x.note, &x.wholeAmount, &x.name2)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if g.k != w.keyValue || g.id != w.id || g.amount != w.amount || g.micros != w.created.UnixMicro() || g.uid != w.uid ||
			!slices.Equal(g.blob, w.blob) || g.name != w.name || g.vip != w.vip || !slices.Equal(g.tags, w.tags) ||
			(g.note == nil) != (w.note == nil) || (g.note != nil && *g.note != *w.note) || g.wholeAmount != w.amount || g.name2 != w.name {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

type pgxTable struct {
	pool interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
	}
	name string
}

func avroSinkConfig(t *testing.T, p *pipeline, pl sink.Plugin) sink.Config {
	cfg := pluginConfig(t, p, pl, sink.DeadLetter)
	cfg.MaxBatchRecords = 7
	cfg.RetryBackoff, cfg.MaxRetryBackoff = 50*time.Millisecond, 500*time.Millisecond
	return cfg
}

// TestAvroIntoTable: Avro records through the real registry land in a table with their
// logical types exact (a 30-digit decimal into numeric, timestamp-micros into timestamptz,
// uuid, bytes into bytea, a nested record into jsonb, an array into text[], the whole value
// as jsonb); a v2 schema with a new optional field appears mid-stream; a record with an
// unknown schema id and one that is not in the wire format are dead-lettered with the reason,
// and the rest of their batches applied.
func TestAvroIntoTable(t *testing.T) {
	t.Parallel()
	c, regURL := registryClient(t)
	p := newPipeline(t, 2)
	v1 := registerSchema(t, c, p.Topic+"-value", "AVRO", orderSchemaV1)
	v2 := registerSchema(t, c, p.Topic+"-value", "AVRO", orderSchemaV2)
	if v1 == v2 {
		t.Fatalf("v1 and v2 have the same id %d", v1)
	}
	var want []order
	var msgs []testbed.Msg
	for i := range 60 {
		o := makeOrder(i, i >= 30)
		id := v1
		if o.v2 {
			id = v2
		}
		want = append(want, o)
		msgs = append(msgs, testbed.Msg{Partition: o.partOf, Key: []byte(o.keyValue), Value: o.avro(t, c, p.Topic, id)})
		switch i {
		case 10: // a schema id the registry does not have
			msgs = append(msgs, testbed.Msg{Partition: 0, Key: []byte("unknown-id"), Value: []byte{0, 0x7f, 0xff, 0xff, 0x00, 2, 4}})
		case 40: // not the wire format
			msgs = append(msgs, testbed.Msg{Partition: 1, Key: []byte("not-wire-format"), Value: []byte(`{"id": 1}`)})
		}
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)

	pl, tbl := orderTable(t, p, &plugin.SchemaRegistry{URL: regURL, Timeout: 5 * time.Second})
	r := startSink(t, avroSinkConfig(t, p, pl))
	ends := p.logEnds(t)
	waitEnds(t, p, ends)
	if errs := r.s.PartitionErrors(); len(errs) > 0 {
		t.Fatalf("partition errors: %v", errs)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	db := testbed.Pool(t, p.Env)
	checkOrders(t, &pgxTable{db, tbl}, want)
	dead := strs(t, db, "SELECT convert_from(key, 'UTF8') || ': ' || error FROM "+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize())
	if len(dead) != 2 || !strings.HasPrefix(dead[0], "not-wire-format: ") || !strings.Contains(dead[0], "malformed record") ||
		!strings.HasPrefix(dead[1], "unknown-id: ") || !strings.Contains(dead[1], "unknown schema id 2147483392") {
		t.Fatalf("dead letters: %q", dead)
	}
	t.Logf("dead letters: %q", dead)
}

// waitEnds waits until every partition's stored offset reaches its log end.
func waitEnds(t *testing.T, p *pipeline, ends map[int32]int64) {
	t.Helper()
	testbed.Eventually(t, 90*time.Second, "every partition to reach its log end", func() (bool, string) {
		var st []string
		done := true
		for part, end := range ends {
			n, _ := p.storedOrZero(t, part)
			done = done && n == end
			st = append(st, fmt.Sprintf("p%d %d/%d", part, n, end))
		}
		return done, strings.Join(st, " ")
	})
}

// TestAvroRegistryOutage: the registry stops answering while the sink runs (its URL goes
// through a proxy that is cut: connection refused; then answers 503 with an HTML page, as a
// load balancer whose backend is down) just as records with a new schema id arrive. The
// partition waits and retries, counted as retries: nothing is applied past them, nothing is
// skipped or dead-lettered, no partition stops. When the registry answers again every record
// is applied exactly once.
func TestAvroRegistryOutage(t *testing.T) {
	t.Parallel()
	c, regURL := registryClient(t)
	proxy, proxied := testbed.StartTCPProxy(t, regURL)
	p := newPipeline(t, 2)
	v1 := registerSchema(t, c, p.Topic+"-value", "AVRO", orderSchemaV1)
	pl, tbl := orderTable(t, p, &plugin.SchemaRegistry{URL: proxied, Timeout: 2 * time.Second})
	cfg := avroSinkConfig(t, p, pl)
	metrics := prometheus.NewRegistry()
	cfg.Registerer = metrics
	r := startSink(t, cfg)
	db := testbed.Pool(t, p.Env)
	count := func() int {
		var n int
		if err := db.QueryRow(context.Background(), "SELECT count(*) FROM "+tbl).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	var want []order
	var msgs []testbed.Msg
	for i := range 20 {
		o := makeOrder(i, false)
		want = append(want, o)
		msgs = append(msgs, testbed.Msg{Partition: o.partOf, Key: []byte(o.keyValue), Value: o.avro(t, c, p.Topic, v1)})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	testbed.Eventually(t, 90*time.Second, "the v1 records", func() (bool, string) {
		n := count()
		return n == 20, fmt.Sprintf("%d rows", n)
	})

	// The registry goes away; records of a schema id the sink has not seen arrive.
	proxy.Cut()
	v2 := registerSchema(t, c, p.Topic+"-value", "AVRO", orderSchemaV2)
	msgs = msgs[:0]
	for i := 20; i < 50; i++ {
		o := makeOrder(i, true)
		want = append(want, o)
		msgs = append(msgs, testbed.Msg{Partition: o.partOf, Key: []byte(o.keyValue), Value: o.avro(t, c, p.Topic, v2)})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	away := func(what string) {
		t.Helper()
		retries := r.s.Stats().Retries
		testbed.Eventually(t, 60*time.Second, "retries while the registry "+what, func() (bool, string) {
			n := r.s.Stats().Retries
			if errs := r.s.PartitionErrors(); len(errs) > 0 {
				t.Fatalf("a partition stopped while the registry %s: %v", what, errs)
			}
			return n >= retries+4, fmt.Sprintf("%d retries", n-retries)
		})
		time.Sleep(time.Second)
		if n := count(); n != 20 {
			t.Fatalf("%d rows while the registry %s, want the 20 of v1", n, what)
		}
		if st := r.s.Stats(); st.DeadLetters != 0 || len(r.s.PartitionErrors()) != 0 {
			t.Fatalf("while the registry %s: %d dead letters, partition errors %v", what, st.DeadLetters, r.s.PartitionErrors())
		}
	}
	away("refuses connections")
	proxy.SetAnswer(http.StatusServiceUnavailable)
	proxy.Restore()
	away("answers 503")
	proxy.SetAnswer(0)
	waitEnds(t, p, p.logEnds(t))
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	checkOrders(t, &pgxTable{db, tbl}, want)
	// The retries are counted as the plugin's transient errors (sink.Transient).
	if n := counterValue(t, metrics, "eosink_batch_retries_by_cause_total", "cause", "transient"); n < 8 {
		t.Errorf("eosink_batch_retries_by_cause_total{cause=\"transient\"} = %v, want at least 8", n)
	}
	if st := r.s.Stats(); st.DeadLetters != 0 || st.Records != 50 || len(r.s.PartitionErrors()) != 0 {
		t.Fatalf("after: %+v, partition errors %v", st, r.s.PartitionErrors())
	}
	if n := len(strs(t, db, "SELECT error FROM "+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize())); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
}

// counterValue returns the value of a counter with one label set to value, 0 when absent.
func counterValue(t *testing.T, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestAvroRegistryRefusalStopsPartition: a registry that refuses the sink (a 401 from an
// auth gateway in front of it) is a configuration error, not an outage: the partition stops
// with an error that says so, nothing is applied past it and nothing is dead-lettered.
func TestAvroRegistryRefusalStopsPartition(t *testing.T) {
	t.Parallel()
	c, regURL := registryClient(t)
	proxy, proxied := testbed.StartTCPProxy(t, regURL)
	proxy.SetAnswer(http.StatusUnauthorized)
	p := newPipeline(t, 1)
	v1 := registerSchema(t, c, p.Topic+"-value", "AVRO", orderSchemaV1)
	var msgs []testbed.Msg
	for i := range 5 {
		o := makeOrder(i, false)
		msgs = append(msgs, testbed.Msg{Partition: 0, Key: []byte(o.keyValue), Value: o.avro(t, c, p.Topic, v1)})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	pl, tbl := orderTable(t, p, &plugin.SchemaRegistry{URL: proxied, Timeout: 2 * time.Second})
	r := startSink(t, avroSinkConfig(t, p, pl))
	testbed.Eventually(t, 60*time.Second, "the partition to stop", func() (bool, string) {
		return len(r.s.PartitionErrors()) == 1, fmt.Sprintf("partition errors %v, retries %d", r.s.PartitionErrors(), r.s.Stats().Retries)
	})
	err := r.s.PartitionErrors()[0]
	var he *sink.HandlerError
	if !errors.As(err, &he) || !strings.Contains(err.Error(), "schema registry refused the request") || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("partition error: %v", err)
	}
	t.Logf("partition error: %v", err)
	db := testbed.Pool(t, p.Env)
	if n := len(strs(t, db, "SELECT k FROM "+tbl)); n != 0 {
		t.Errorf("%d rows applied", n)
	}
	if n := len(strs(t, db, "SELECT error FROM "+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize())); n != 0 {
		t.Errorf("%d dead letters", n)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestRunConfigWithAvro: `eosink run -config` with a schema_registry section (its password
// read with ${file:...}) and a table sink with value_format: avro: -validate accepts it and
// shows the registry without the password, the run applies every record exactly as the
// in-process sink does, and SIGTERM drains. The registry's front demands basic auth (a
// proxy that checks the header), so the credentials are proven to be sent.
func TestRunConfigWithAvro(t *testing.T) {
	t.Parallel()
	c, regURL := registryClient(t)
	front := startAuthFront(t, regURL, "sink-user", "reg-pass-7")
	p := newPipeline(t, 2)
	v1 := registerSchema(t, c, p.Topic+"-value", "AVRO", orderSchemaV1)
	var want []order
	var msgs []testbed.Msg
	for i := range 25 {
		o := makeOrder(i, false)
		want = append(want, o)
		msgs = append(msgs, testbed.Msg{Partition: o.partOf, Key: []byte(o.keyValue), Value: o.avro(t, c, p.Topic, v1)})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	db := testbed.Pool(t, p.Env)
	tbl := pgx.Identifier{p.Schema, "orders_avro"}.Sanitize()
	if _, err := db.Exec(context.Background(), "CREATE TABLE "+tbl+` (k text NOT NULL, id bigint PRIMARY KEY,
 amount numeric(30,10) NOT NULL, created timestamptz NOT NULL, uid uuid NOT NULL, blob bytea NOT NULL,
 customer jsonb NOT NULL, tags text[] NOT NULL, note text, whole jsonb NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "registry-password"), []byte("reg-pass-7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`
pipeline: %[1]s
kafka:
  brokers: ${KAFKA_BOOTSTRAP_SERVERS}
  group: %[1]s
  topics: [%[2]s]
  properties: {session.timeout.ms: 6000, heartbeat.interval.ms: 1000}
database:
  url: ${DATABASE_URL}
  schema: %[3]s
batch: {max_records: 7, max_wait: 20ms}
on_poison: dead-letter
schema_registry:
  url: ${REGISTRY_URL}
  username: sink-user
  password: ${file:registry-password}
  timeout: 5s
sink:
  type: table
  table: %[4]s.orders_avro
  value_format: avro
  columns:
    k: key
    id: {from: value.id, required: true}
    amount: value.amount
    created: value.created
    uid: value.uid
    blob: value.blob
    customer: value.customer
    tags: value.tags
    note: value.note
    whole: value
`, p.Group, p.Topic, p.OffsetsSchema, p.Schema)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"KAFKA_BOOTSTRAP_SERVERS=" + p.Env.Brokers, "DATABASE_URL=" + p.Env.DatabaseURL, "REGISTRY_URL=" + front}
	out, _ := run(t, env, false, eosinkBin, "run", "-config", config, "-validate")
	if !strings.Contains(out, "registry:  "+front+", basic auth as sink-user") || strings.Contains(out, "reg-pass-7") {
		t.Fatalf("run -validate:\n%s", out)
	}
	proc := testbed.StartProcess(t, eosinkBin, "eosink run avro", []string{"run", "-config", config}, env...)
	waitEnds(t, p, p.logEnds(t))
	proc.StopClean(60 * time.Second)
	checkOrders(t, &pgxTable{db, tbl}, want)
	if strings.Contains(proc.Output(), "reg-pass-7") {
		t.Error("the run's output shows the registry password")
	}

	// Without the section, -validate names the problem at load.
	noRegistry := strings.Replace(mustRead(t, config), "schema_registry:", "unused:", 1)
	noRegistry = strings.Replace(noRegistry, "unused:\n  url: ${REGISTRY_URL}\n  username: sink-user\n  password: ${file:registry-password}\n  timeout: 5s\n", "", 1)
	if err := os.WriteFile(config, []byte(noRegistry), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, env, true, eosinkBin, "run", "-config", config, "-validate")
	if err == nil || !strings.Contains(out, "value_format: avro needs the pipeline's schema_registry section") {
		t.Fatalf("run -validate without schema_registry: %v\n%s", err, out)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startAuthFront serves a reverse proxy to the registry that answers 401 unless the request
// carries the given basic auth credentials. It returns the URL to use instead of regURL.
func startAuthFront(t *testing.T, regURL, user, password string) string {
	t.Helper()
	target, err := url.Parse(regURL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, pw, ok := r.BasicAuth(); !ok || u != user || pw != password {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error_code":40101,"message":"Unauthorized"}`)
			return
		}
		r.Header.Del("Authorization")
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + target.Path
}
