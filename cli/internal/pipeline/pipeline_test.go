package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/plugin"
)

// testPlugin records the section it was built from.
type testPlugin struct {
	cfg  plugin.Config
	opts struct {
		Table  string         `yaml:"table"`
		Limit  int            `yaml:"limit"`
		Strict bool           `yaml:"strict"`
		Ratio  float64        `yaml:"ratio"`
		Label  string         `yaml:"label"`
		Nested map[string]any `yaml:"nested"`
		Items  []any          `yaml:"items"`
	}
}

func (*testPlugin) Open(context.Context, sink.Partition) error      { return nil }
func (*testPlugin) Write(context.Context, pgx.Tx, sink.Batch) error { return nil }
func (*testPlugin) Close(context.Context, sink.Partition) error     { return nil }

func init() {
	plugin.Register("pipelinetest", func(cfg plugin.Config) (sink.Plugin, error) {
		p := &testPlugin{cfg: cfg}
		if err := cfg.Decode(&p.opts); err != nil {
			return nil, err
		}
		if p.opts.Table == "" {
			return nil, &sink.ConfigError{Field: cfg.Path + ".table", Reason: "required"}
		}
		return p, nil
	})
}

const minimal = `
kafka:
  brokers: 127.0.0.1:9092
  group: orders-sink
  topics: [orders]
database:
  url: postgres://eosink@127.0.0.1:5432/eosink
sink:
  type: pipelinetest
  table: events
`

func parse(t *testing.T, text string, env map[string]string) (*Pipeline, error) {
	t.Helper()
	var logs bytes.Buffer
	return Parse(filepath.Join(t.TempDir(), "pipeline.yaml"), []byte(text), Options{
		LogOutput: &logs,
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
}

// parseErr parses text and returns its error text, with the temporary folder removed.
func parseErr(t *testing.T, text string, env map[string]string) string {
	t.Helper()
	_, err := parse(t, text, env)
	if err == nil {
		t.Fatalf("no error for:\n%s", text)
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T %v, want Errors", err, err)
	}
	out := err.Error()
	for _, e := range errs {
		out = strings.ReplaceAll(out, e.File, "pipeline.yaml")
	}
	return out
}

func TestMinimalFileTakesTheDefaults(t *testing.T) {
	p, err := parse(t, minimal, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config
	if c.Pipeline != "orders-sink" || c.GroupID != "orders-sink" || c.Schema != "eosink" || c.Brokers != "127.0.0.1:9092" ||
		!reflect.DeepEqual(c.Topics, []string{"orders"}) || c.InitialPosition != sink.Earliest || c.IsolationLevel != pgx.ReadCommitted ||
		c.OnPoison != sink.StopOnPoison || c.AutoMigrate || c.CommitToKafka || c.Kafka != nil || c.MaxBatchRecords != 0 || c.MaxBatchWait != 0 ||
		c.RedactErrorValues {
		t.Fatalf("config: %+v", c)
	}
	if c.Plugin == nil || c.Plugin != p.Config.Plugin || p.PluginType != "pipelinetest" || c.Logger != p.Logger || p.HTTP != "" {
		t.Fatalf("plugin %v, type %q, http %q", c.Plugin, p.PluginType, p.HTTP)
	}
	tp := p.Config.Plugin.(*testPlugin)
	if tp.cfg.Path != "sink" || tp.cfg.Pipeline != "orders-sink" || tp.cfg.Schema != "eosink" || tp.cfg.Logger == nil || tp.opts.Table != "events" {
		t.Fatalf("plugin config: %+v", tp.cfg)
	}
	if _, err := p.NewSink(nil); err != nil {
		t.Fatalf("sink.New: %v", err)
	}
}

func TestRedactErrorValues(t *testing.T) {
	for text, want := range map[string]bool{"true": true, "false": false, "~": false} {
		p, err := parse(t, minimal+"redact_error_values: "+text+"\n", nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.Config.RedactErrorValues != want {
			t.Errorf("redact_error_values: %s gave %t", text, p.Config.RedactErrorValues)
		}
	}
	if got := parseErr(t, minimal+"redact_error_values: yes-please\n", nil); !strings.Contains(got, "redact_error_values") {
		t.Errorf("a bad value: %s", got)
	}
}

func TestFullFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sasl-password"), []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := `
pipeline: orders
instance_id: ${POD_NAME}
kafka:
  brokers: ["${KAFKA_HOST}:9092", kafka-2:9092]
  group: orders-sink
  topics:
    - orders
    - refunds
  initial_position: kafka-committed
  commit_to_kafka: true
  commit_interval: 2s
  properties:
    security.protocol: SASL_SSL
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: ${SASL_USER}
    sasl.password: ${file:sasl-password}
    session.timeout.ms: 10000
database:
  url: ${DATABASE_URL}
  schema: sinks
  auto_migrate: true
  isolation: serializable
batch: { max_records: 1_000, max_bytes: 2MiB, max_wait: 250ms, max_buffered_bytes: 16777216 }
timeouts: { revoke: 20s, shutdown: 1m, lock: 3s, idle_in_transaction: 45s, claim: 2m }
retry: { backoff: 50ms, max_backoff: 10s }
on_poison: dead-letter
dead_letter: { max_ratio: 5%, window: 400 }
sink:
  type: pipelinetest
  table: ${TABLE:-events}
  limit: ${LIMIT}
  strict: ${STRICT}
  ratio: ${RATIO}
  label: "${LIMIT}"
  nested:
    deeper: { key: value, number: 3 }
    1: numeric key
  items: [a, 2, {b: c}]
http: 127.0.0.1:9464
log: { format: json, level: debug }
`
	env := map[string]string{"POD_NAME": "sink-0", "KAFKA_HOST": "kafka-1", "SASL_USER": "orders",
		"DATABASE_URL": "postgres://eosink:pw@db:5432/orders", "LIMIT": "42", "STRICT": "true", "RATIO": "0.5"}
	var logs bytes.Buffer
	p, err := Parse(filepath.Join(dir, "pipeline.yaml"), []byte(text), Options{
		LogOutput: &logs, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config
	want := sink.Config{
		Brokers: "kafka-1:9092,kafka-2:9092", GroupID: "orders-sink", Topics: []string{"orders", "refunds"}, Pipeline: "orders",
		DatabaseURL: "postgres://eosink:pw@db:5432/orders", Schema: "sinks", AutoMigrate: true, OnPoison: sink.DeadLetter,
		Kafka: kafka.ConfigMap{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "orders",
			"sasl.password": "from-a-file", "session.timeout.ms": "10000"},
		InitialPosition: sink.KafkaCommitted, CommitToKafka: true, KafkaCommitInterval: 2 * time.Second,
		MaxBatchRecords: 1000, MaxBatchBytes: 2 << 20, MaxBatchWait: 250 * time.Millisecond, MaxBufferedBytes: 16 << 20,
		IsolationLevel: pgx.Serializable, LockTimeout: 3 * time.Second, IdleInTransactionTimeout: 45 * time.Second,
		ClaimTimeout: 2 * time.Minute, RetryBackoff: 50 * time.Millisecond, MaxRetryBackoff: 10 * time.Second,
		RevokeTimeout: 20 * time.Second, ShutdownTimeout: time.Minute, InstanceID: "sink-0",
		MaxDeadLetterRatio: 0.05, DeadLetterWindow: 400,
	}
	got := c
	got.Plugin, got.Logger = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("config:\n got %+v\nwant %+v", got, want)
	}
	if p.HTTP != "127.0.0.1:9464" {
		t.Fatalf("http %q", p.HTTP)
	}
	tp := p.Config.Plugin.(*testPlugin)
	wantRaw := map[string]any{
		"type": "pipelinetest", "table": "events", "limit": 42, "strict": true, "ratio": 0.5, "label": "42",
		"nested": map[string]any{"deeper": map[string]any{"key": "value", "number": 3}, "1": "numeric key"},
		"items":  []any{"a", 2, map[string]any{"b": "c"}},
	}
	if !reflect.DeepEqual(tp.cfg.Raw, wantRaw) {
		t.Fatalf("plugin section:\n got %#v\nwant %#v", tp.cfg.Raw, wantRaw)
	}
	if tp.opts.Limit != 42 || !tp.opts.Strict || tp.opts.Ratio != 0.5 || tp.opts.Label != "42" || tp.cfg.Pipeline != "orders" || tp.cfg.Schema != "sinks" {
		t.Fatalf("plugin options: %+v", tp.opts)
	}
	if _, err := p.NewSink(nil); err != nil {
		t.Fatalf("sink.New: %v", err)
	}
	p.Logger.Debug("hello")
	if !strings.Contains(logs.String(), `"msg":"hello"`) {
		t.Fatalf("the logger is not JSON at debug level: %q", logs.String())
	}
}

func TestErrorsNameTheirPath(t *testing.T) {
	// Each case changes the minimal file and expects one error naming a path.
	cases := []struct {
		name, text, want string
	}{
		{"no topics", strings.Replace(minimal, "topics: [orders]", "topics: []", 1), "pipeline.yaml: kafka.topics: at least one topic is required"},
		{"topics missing", strings.Replace(minimal, "  topics: [orders]\n", "", 1), "pipeline.yaml: kafka.topics: at least one topic is required"},
		{"bad topic", strings.Replace(minimal, "[orders]", "[orders, ^(ord]", 1), "pipeline.yaml: kafka.topics[1]: \"^(ord\" is not a regular expression: error parsing regexp: missing closing )"},
		{"duplicate pattern", strings.Replace(minimal, "[orders]", "[\"^ord.*\", \"^ord.*\"]", 1), "pipeline.yaml: kafka.topics[1]: \"^ord.*\" is listed twice"},
		{"bad topic name", strings.Replace(minimal, "[orders]", "[orders, \"a b\"]", 1), "pipeline.yaml: kafka.topics[1]: \"a b\" is not a Kafka topic name"},
		{"duplicate topic", strings.Replace(minimal, "[orders]", "[orders, orders]", 1), "pipeline.yaml: kafka.topics[1]: \"orders\" is listed twice"},
		{"topics mapping", strings.Replace(minimal, "[orders]", "{a: b}", 1), "pipeline.yaml: kafka.topics: must be a single value, not a mapping"},
		{"no group", strings.Replace(minimal, "  group: orders-sink\n", "", 1), "pipeline.yaml: kafka.group: required"},
		{"no brokers", strings.Replace(minimal, "  brokers: 127.0.0.1:9092\n", "", 1), "pipeline.yaml: kafka.brokers: required"},
		{"no url", strings.Replace(minimal, "  url: postgres://eosink@127.0.0.1:5432/eosink\n", "  schema: x\n", 1), "pipeline.yaml: database.url: required"},
		{"bad url", strings.Replace(minimal, "127.0.0.1:5432", "127.0.0.1:99999", 1), "pipeline.yaml: database.url: not a PostgreSQL connection string"},
		{"no sink", strings.Replace(minimal, "sink:\n  type: pipelinetest\n  table: events\n", "", 1), "pipeline.yaml: sink: required"},
		{"sink list", strings.Replace(minimal, "sink:\n  type: pipelinetest\n  table: events\n", "sink: [table]\n", 1), "pipeline.yaml: sink: must be a mapping"},
		{"no sink type", strings.Replace(minimal, "  type: pipelinetest\n", "", 1), "pipeline.yaml: sink.type: required"},
		{"unknown plugin", strings.Replace(minimal, "type: pipelinetest", "type: tabel", 1), `pipeline.yaml: sink.type: unknown plugin "tabel"`},
		{"plugin error", strings.Replace(minimal, "table: events", "tables: events", 1), "pipeline.yaml: sink.tables: unknown key (sink has type, table, limit, strict, ratio, label, nested, items); did you mean table? (line 10)"},
		{"plugin field error", strings.Replace(minimal, "table: events", "limit: 3", 1), "pipeline.yaml: sink.table: required"},
		{"duration", minimal + "batch: {max_wait: 10x}\n", `pipeline.yaml: batch.max_wait: "10x" is not a duration`},
		{"negative duration", minimal + "timeouts: {revoke: -1s}\n", `pipeline.yaml: timeouts.revoke: "-1s" must be positive`},
		{"number", minimal + "batch: {max_records: many}\n", `pipeline.yaml: batch.max_records: "many" is not a positive whole number`},
		{"size", minimal + "batch: {max_bytes: 4 parsecs}\n", `pipeline.yaml: batch.max_bytes: "4 parsecs" is not a positive size`},
		{"buffer below batch", minimal + "batch: {max_bytes: 16MiB}\n", "pipeline.yaml: batch.max_buffered_bytes: 8388608 bytes (the default) is less than batch.max_bytes"},
		{"backoff", minimal + "retry: {backoff: 10s, max_backoff: 1s}\n", "pipeline.yaml: retry.max_backoff: 1s is less than retry.backoff"},
		{"ratio", minimal + "dead_letter: {max_ratio: 1.5}\n", `pipeline.yaml: dead_letter.max_ratio: 1.5 is not a share more than 0 and at most 1`},
		{"ratio percent", minimal + "dead_letter: {max_ratio: 0%}\n", `pipeline.yaml: dead_letter.max_ratio: "0%" is not a share`},
		{"window", minimal + "dead_letter: {window: -3}\n", `pipeline.yaml: dead_letter.window: "-3" is not a positive whole number`},
		{"bool", minimal + "database: {auto_migrate: yes please}\n", "pipeline.yaml: database: duplicate key"},
		{"bool value", strings.Replace(minimal, "database:\n", "database:\n  auto_migrate: maybe\n", 1), `pipeline.yaml: database.auto_migrate: "maybe" is not true or false`},
		{"isolation", strings.Replace(minimal, "database:\n", "database:\n  isolation: snapshot\n", 1), `pipeline.yaml: database.isolation: "snapshot" is not read committed`},
		{"schema", strings.Replace(minimal, "database:\n", "database:\n  schema: "+strings.Repeat("s", 64)+"\n", 1), "pipeline.yaml: database.schema: "},
		{"position", strings.Replace(minimal, "kafka:\n", "kafka:\n  initial_position: middle\n", 1), `pipeline.yaml: kafka.initial_position: "middle" is not earliest`},
		{"poison", minimal + "on_poison: ignore\n", `pipeline.yaml: on_poison: "ignore" is not stop or dead-letter`},
		{"http", minimal + "http: 9464\n", `pipeline.yaml: http: "9464" is not a listen address`},
		{"log format", minimal + "log: {format: xml}\n", `pipeline.yaml: log.format: "xml" is not text or json`},
		{"log level", minimal + "log: {level: loud}\n", `pipeline.yaml: log.level: "loud" is not debug, info, warn or error`},
		{"section kind", minimal + "batch: 500\n", "pipeline.yaml: batch: must be a mapping of keys (max_records, max_bytes, max_wait, max_buffered_bytes, max_total_buffered_bytes), not a single value"},
		{"managed property", strings.Replace(minimal, "kafka:\n", "kafka:\n  properties: {auto.offset.reset: earliest}\n", 1), "pipeline.yaml: kafka.properties[auto.offset.reset]: is managed by eosink and must be error"},
		{"group.id property", strings.Replace(minimal, "kafka:\n", "kafka:\n  properties: {group.id: x}\n", 1), "pipeline.yaml: kafka.properties[group.id]: set kafka.group instead"},
		{"go property", strings.Replace(minimal, "kafka:\n", "kafka:\n  properties: {go.events.channel.enable: true}\n", 1), "pipeline.yaml: kafka.properties[go.events.channel.enable]: go.* properties"},
		{"two bootstraps", strings.Replace(minimal, "kafka:\n", "kafka:\n  properties: {bootstrap.servers: x:1}\n", 1), "pipeline.yaml: kafka.properties[bootstrap.servers]: set kafka.brokers or this property, not both"},
		{"property list", strings.Replace(minimal, "kafka:\n", "kafka:\n  properties: {a.b: [1]}\n", 1), "pipeline.yaml: kafka.properties[a.b]: must be a single value, not a list"},
		{"property null", strings.Replace(minimal, "kafka:\n", "kafka:\n  properties: {a.b: }\n", 1), "pipeline.yaml: kafka.properties[a.b]: needs a value"},
		{"properties list", strings.Replace(minimal, "kafka:\n", "kafka:\n  properties: [a]\n", 1), "pipeline.yaml: kafka.properties: must be a mapping"},
		{"unset variable", strings.Replace(minimal, "127.0.0.1:9092", "${BROKERS}", 1), "pipeline.yaml: kafka.brokers: environment variable BROKERS is not set"},
		{"empty variable", strings.Replace(minimal, "127.0.0.1:9092", "${EMPTY}", 1), `pipeline.yaml: kafka.brokers: required: Kafka's bootstrap servers, for example 127.0.0.1:9092 or ${KAFKA_BOOTSTRAP_SERVERS} (${EMPTY} gives an empty value)`},
		{"variable in sink", strings.Replace(minimal, "table: events", "table: ${TABLE}", 1), "pipeline.yaml: sink.table: environment variable TABLE is not set"},
		{"variable in list", strings.Replace(minimal, "[orders]", "[orders, \"${T}\"]", 1), "pipeline.yaml: kafka.topics[1]: environment variable T is not set"},
		{"expanded value", strings.Replace(minimal, "kafka:\n", "kafka:\n  commit_interval: ${WAIT}\n", 1), `pipeline.yaml: kafka.commit_interval: the value of "${WAIT}" is not a duration`},
		{"duplicate key", strings.Replace(minimal, "  group: orders-sink\n", "  group: orders-sink\n  group: other\n", 1), `pipeline.yaml: kafka.group: duplicate key (first at line 4)`},
		{"duplicate in sink", strings.Replace(minimal, "table: events", "table: events\n  table: again", 1), `pipeline.yaml: sink.table: duplicate key (first at line 10)`},
		{"two documents", minimal + "---\nkafka: {}\n", "pipeline.yaml: holds more than one YAML document"},
		{"syntax", minimal + "  bad: [\n", "pipeline.yaml: did not find expected"},
		{"not a mapping", "- a\n- b\n", "pipeline.yaml: must be a mapping of keys"},
		{"empty", "", "pipeline.yaml: the file is empty"},
	}
	env := map[string]string{"EMPTY": "", "WAIT": "soon"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := parseErr(t, c.text, env)
			if !strings.Contains(got, c.want) {
				t.Fatalf("error:\n%s\nwant it to contain:\n%s", got, c.want)
			}
		})
	}
}

func TestUnknownKeys(t *testing.T) {
	text := strings.Replace(minimal, "kafka:\n", "kafka:\n  grop: x\n  properties: {client.id: ok}\n", 1) +
		"databse: {}\nbatch: {max_record: 5}\nlog: {colour: red}\n"
	got := parseErr(t, text, nil)
	for _, want := range []string{
		"pipeline.yaml: kafka.grop: unknown key (kafka has brokers, group, topics, initial_position, commit_to_kafka, commit_interval, properties); did you mean group? (line 3)",
		"pipeline.yaml: databse: unknown key (the top level has pipeline, instance_id, kafka, database, batch, timeouts, retry, on_poison, dead_letter, sink, schema_registry, http, console, tracing, log, unhealthy_on_stopped_partition, redact_error_values); did you mean database? (line 13)",
		"pipeline.yaml: batch.max_record: unknown key (batch has max_records, max_bytes, max_wait, max_buffered_bytes, max_total_buffered_bytes); did you mean max_records? (line 14)",
		"pipeline.yaml: log.colour: unknown key (log has format, level, progress) (line 15)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors:\n%s\nwant:\n%s", got, want)
		}
	}
	if strings.Contains(got, "client.id") {
		t.Errorf("a Kafka property was taken for an unknown key:\n%s", got)
	}
}

func TestAllErrorsAreReported(t *testing.T) {
	text := `
kafka:
  topics: []
  initial_position: sideways
database:
  isolation: chaos
batch: {max_wait: 10x, max_records: 0}
timeouts: {claim: forever}
sink: {type: pipelinetest}
`
	got := parseErr(t, text, nil)
	want := []string{
		"pipeline.yaml: kafka.topics: at least one topic is required (line 3)",
		"pipeline.yaml: kafka.initial_position: \"sideways\" is not earliest, latest, error or kafka-committed (line 4)",
		"pipeline.yaml: database.isolation: \"chaos\" is not read committed, repeatable read or serializable (line 6)",
		"pipeline.yaml: batch.max_records: \"0\" is not a positive whole number (line 7)",
		"pipeline.yaml: batch.max_wait: \"10x\" is not a duration; write Go syntax with a unit, such as 100ms, 30s or 1m30s (line 7)",
		"pipeline.yaml: timeouts.claim: \"forever\" is not a duration; write Go syntax with a unit, such as 100ms, 30s or 1m30s (line 8)",
		"pipeline.yaml: sink.table: required (line 9)",
		"pipeline.yaml: kafka.group: required: the Kafka consumer group",
		"pipeline.yaml: kafka.brokers: required: Kafka's bootstrap servers, for example 127.0.0.1:9092 or ${KAFKA_BOOTSTRAP_SERVERS}",
		"pipeline.yaml: database.url: required: a PostgreSQL connection string, for example ${DATABASE_URL}",
	}
	if got != strings.Join(want, "\n") {
		t.Fatalf("errors:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

func TestSecretsAreNeverShown(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("file-secret-3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"db-secret-1", "sasl-secret-2", "file-secret-3", "env-secret-4"}
	env := map[string]string{"DB_PASSWORD": "env-secret-4"}
	valid := `
pipeline: orders
kafka:
  brokers: 127.0.0.1:9092
  group: orders-sink
  topics: [orders]
  properties:
    security.protocol: SSL
    sasl.password: sasl-secret-2
    sasl.oauthbearer.client.secret: ${file:token}
database:
  url: postgres://eosink:db-secret-1@127.0.0.1:5432/eosink
sink:
  type: pipelinetest
  table: events
  label: ${DB_PASSWORD}
`
	check := func(what, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s[:7]) { // yaml quotes the first 7 bytes of long values
				t.Errorf("%s shows the secret %q:\n%s", what, s, text)
			}
		}
	}
	load := func(text string) (*Pipeline, error) {
		return Parse(filepath.Join(dir, "pipeline.yaml"), []byte(text), Options{
			LogOutput: new(bytes.Buffer), LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	}
	p, err := load(valid)
	if err != nil {
		t.Fatal(err)
	}
	var summary bytes.Buffer
	if err := p.Summary(&summary); err != nil {
		t.Fatal(err)
	}
	check("the summary", summary.String())
	for _, want := range []string{"pipeline:  orders", "group orders-sink, topics orders", "127.0.0.1:5432/eosink, schema eosink",
		"sink:      pipelinetest", "on_poison: stop", "errors:    error texts show record values (redact_error_values: false)", "properties: sasl.oauthbearer.client.secret, sasl.password, security.protocol (values not shown)"} {
		if !strings.Contains(summary.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, summary.String())
		}
	}

	// Secrets put where they do not belong, or in values that fail, are never echoed.
	broken := []string{
		strings.Replace(valid, "127.0.0.1:5432", "127.0.0.1:99999", 1),                                    // bad URL: pgx's message
		strings.Replace(valid, "postgres://eosink:db-secret-1@", "postgres://eosink:db-secret-1@[::1", 1), // unparsable URL
		strings.Replace(valid, "url: postgres://eosink:db-secret-1@127.0.0.1:5432/eosink", "url: host=x password=db-secret-1 port=x", 1),
		strings.Replace(valid, "pipeline: orders", "pipeline: orders\nbatch: {max_wait: ${DB_PASSWORD}, max_records: ${file:token}}", 1),
		strings.Replace(valid, "pipeline: orders", "on_poison: sasl-secret-2x", 1),
		strings.Replace(valid, "sasl.password: sasl-secret-2", "sasl.password: [sasl-secret-2]", 1),
		strings.Replace(valid, "table: events", "table: events\n  limit: db-secret-1", 1), // the plugin's decode error
		strings.Replace(valid, "kafka:", "kafka:\n  sasl-secret-2: 1", 1),                 // a secret as a key
		strings.Replace(valid, "  topics: [orders]", "  topics: db-secret-1 is bad", 1),
	}
	for i, text := range broken {
		_, err := load(text)
		if err == nil {
			t.Errorf("case %d: no error", i)
			continue
		}
		check(fmt.Sprintf("case %d's error", i), err.Error())
	}
}

func TestNewSinkErrorsNameTheFileField(t *testing.T) {
	for field, want := range map[string]string{
		"MaxBatchWait": "batch.max_wait", "Kafka[enable.auto.commit]": "kafka.properties[enable.auto.commit]",
		"Topics[2]": "kafka.topics[2]", "DatabaseURL": "database.url", "Plugin": "sink", "Brand": "Config.Brand",
	} {
		if got := fieldPath(field); got != want {
			t.Errorf("fieldPath(%q) = %q, want %q", field, got, want)
		}
	}
	// A Config that only sink.New refuses (the file cannot express it): the error names the path.
	p, err := parse(t, minimal, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Config.MaxBatchWait = -time.Second
	_, err = p.NewSink(nil)
	var e *Error
	if !errors.As(err, &e) || e.Path != "batch.max_wait" || !strings.HasSuffix(err.Error(), "pipeline.yaml: batch.max_wait: must not be negative, got -1s") {
		t.Fatalf("error %v", err)
	}
}

func TestLoadReadsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orders.yaml")
	if err := os.WriteFile(path, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, Options{LogOutput: new(bytes.Buffer)}); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path+".missing", Options{}); err == nil || !strings.Contains(err.Error(), "orders.yaml.missing") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestDatabasePasswordsAreRedacted(t *testing.T) {
	for _, url := range []string{
		"postgres://eosink:db-secret-1@127.0.0.1:5432/eosink",
		"postgres://eosink:db-secret-1@[::1", // does not parse
		"host=127.0.0.1 password=db-secret-1 dbname=eosink",
		"host=127.0.0.1 password='db-secret-1' dbname=eosink",
	} {
		var r Redactor
		r.AddDatabaseURL(url)
		if got := r.Redact("x db-secret-1 y"); got != "x xxxxx y" {
			t.Errorf("%q: the password is not redacted: %q", url, got)
		}
	}
}

// kafka.topics takes patterns; the table plugin's routes are checked against the listed
// names at load (connecting to nothing) and shown by the summary.
func TestTopicPatternsAndRoutes(t *testing.T) {
	const routed = `
kafka:
  brokers: 127.0.0.1:9092
  group: g
  topics: ["^cdc\\.public\\..*", orders]
database:
  url: postgres://eosink@127.0.0.1:5432/eosink
sink:
  type: table
  columns: {id: value.id}
  routes:
    - {topic: orders, table: shop.orders}
    - {topic: "^cdc\\.public\\.(.*)", table: "replica.$${1}"}
`
	p, err := parse(t, routed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`^cdc\.public\..*`, "orders"}; !reflect.DeepEqual(p.Config.Topics, want) {
		t.Errorf("topics %q, want %q", p.Config.Topics, want)
	}
	var summary bytes.Buffer
	if err := p.Summary(&summary); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"topics ^cdc\\.public\\..*, orders", "routes:    orders -> shop.orders\n", "           ^cdc\\.public\\.(.*) -> replica.${1}\n"} {
		if !strings.Contains(summary.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, summary.String())
		}
	}
	got := parseErr(t, strings.Replace(routed, `orders]`, `orders, payments]`, 1), nil)
	if want := `pipeline.yaml: kafka.topics[2]: no route for topic "payments": it matches none of the sink's routes (orders, ^cdc\.public\.(.*)) and the sink has no default table (line 5)`; got != want {
		t.Errorf("unrouted topic:\n got %s\nwant %s", got, want)
	}
	got = parseErr(t, strings.Replace(routed, `table: "replica.$${1}"`, `table: "replica.$${2}"`, 1), nil)
	if want := "${2} but the route's topic pattern has 1 capture groups"; !strings.Contains(got, want) {
		t.Errorf("bad template: %s", got)
	}
}
