package sink

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/kafkaconf"
)

func validConfig() Config {
	return Config{
		Brokers: "127.0.0.1:9092", GroupID: "g", Topics: []string{"t"},
		DatabaseURL: "postgres://u:pw@127.0.0.1:5432/db",
		Handler:     func(context.Context, pgx.Tx, Batch) error { return nil },
	}
}

func TestConfigAcceptsNames(t *testing.T) {
	c := validConfig()
	c.Topics = []string{"orders.v1_EU-2", "^cdc\\.public\\..*", strings.Repeat("t", 249)}
	c.GroupID, c.Pipeline, c.InstanceID, c.Schema = "grüppe one", "Pipeline.1", "host-1-2", "Sales"
	c.Kafka = kafka.ConfigMap{"ssl.ca.pem": "-----BEGIN CERTIFICATE-----\nMII...\n-----END CERTIFICATE-----\n"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	cases := []struct {
		field string
		mod   func(*Config)
	}{
		{"Brokers", func(c *Config) { c.Brokers = "" }},
		{"GroupID", func(c *Config) { c.GroupID = "" }},
		{"Topics", func(c *Config) { c.Topics = nil }},
		{"Topics[1]", func(c *Config) { c.Topics = []string{"a", " "} }},
		{"Topics[0]", func(c *Config) { c.Topics = []string{"^(unclosed"} }},
		{"Topics[1]", func(c *Config) { c.Topics = []string{"a", "a"} }},
		{"Handler", func(c *Config) { c.Handler = nil }},
		{"DatabaseURL", func(c *Config) { c.DatabaseURL = "" }},
		{"DatabaseURL", func(c *Config) { c.DatabaseURL = "postgres://u:hunter2@[::1" }},
		{"Kafka[enable.auto.commit]", func(c *Config) { c.Kafka = kafka.ConfigMap{"enable.auto.commit": true} }},
		{"Kafka[auto.offset.reset]", func(c *Config) { c.Kafka = kafka.ConfigMap{"auto.offset.reset": "earliest"} }},
		{"Kafka[group.id]", func(c *Config) { c.Kafka = kafka.ConfigMap{"group.id": "x"} }},
		{"Kafka[go.events.channel.enable]", func(c *Config) { c.Kafka = kafka.ConfigMap{"go.events.channel.enable": true} }},
		{"Kafka[bootstrap.servers]", func(c *Config) { c.Kafka = kafka.ConfigMap{"bootstrap.servers": "b:1"} }},
		{"Topics[0]", func(c *Config) { c.Topics = []string{""} }},
		{"InitialPosition", func(c *Config) { c.InitialPosition = 42 }},
		{"IsolationLevel", func(c *Config) { c.IsolationLevel = "read uncommitted" }},
		{"MaxBatchRecords", func(c *Config) { c.MaxBatchRecords = -1 }},
		{"MaxBatchWait", func(c *Config) { c.MaxBatchWait = -time.Second }},
		{"MaxBufferedBytes", func(c *Config) { c.MaxBatchBytes = 10 << 20; c.MaxBufferedBytes = 1 << 20 }},
		{"Schema", func(c *Config) { c.Schema = strings.Repeat("s", 64) }},
		{"MaxDeadLetterRatio", func(c *Config) { c.MaxDeadLetterRatio = 1.5 }},
		{"MaxDeadLetterRatio", func(c *Config) { c.MaxDeadLetterRatio = -0.1 }},
		{"DeadLetterWindow", func(c *Config) { c.DeadLetterWindow = -1 }},
		// Names with a NUL, another control character or invalid UTF-8 (review defect 7).
		{"Topics[0]", func(c *Config) { c.Topics = []string{"t\x00x"} }},
		{"Topics[0]", func(c *Config) { c.Topics = []string{"^t\x00.*"} }},
		{"Topics[0]", func(c *Config) { c.Topics = []string{"^t\n.*"} }},
		{"Topics[1]", func(c *Config) { c.Topics = []string{"a", "t\x1b[2Jx"} }},
		{"Topics[0]", func(c *Config) { c.Topics = []string{"orders/eu"} }},
		{"Topics[0]", func(c *Config) { c.Topics = []string{".."} }},
		{"Topics[0]", func(c *Config) { c.Topics = []string{strings.Repeat("t", 250)} }},
		{"GroupID", func(c *Config) { c.GroupID = "g\x00" }},
		{"GroupID", func(c *Config) { c.GroupID = "g\nlevel=ERROR msg=forged" }},
		{"Pipeline", func(c *Config) { c.Pipeline = "p\x00" }},
		{"Pipeline", func(c *Config) { c.Pipeline = "p\xff" }},
		{"InstanceID", func(c *Config) { c.InstanceID = "i\r" }},
		{"Schema", func(c *Config) { c.Schema = "s\x00public" }},
		{"Schema", func(c *Config) { c.Schema = "s\tx" }},
		{"Kafka[\"a\\x00b\"]", func(c *Config) { c.Kafka = kafka.ConfigMap{"a\x00b": "1"} }},
		{"Kafka[sasl.password]", func(c *Config) { c.Kafka = kafka.ConfigMap{"sasl.password": "hunter2\x00"} }},
	}
	for _, tc := range cases {
		c := validConfig()
		tc.mod(&c)
		_, err := New(c)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: got %v, want a ConfigError for field %s", tc.field, err, tc.field)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error leaks the password: %v", tc.field, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	s, err := New(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := s.cfg
	if c.Pipeline != "g" || c.Schema != "eosink" || c.MaxBatchRecords != 500 || c.MaxBatchWait != 100*time.Millisecond ||
		c.LockTimeout != 5*time.Second || c.InitialPosition != Earliest || c.InstanceID == "" {
		t.Fatalf("defaults not applied: %+v", c)
	}
	km := c.kafkaConfig()
	for k, want := range map[string]any{"enable.auto.commit": "false", "auto.offset.reset": "error",
		"isolation.level": "read_committed", "group.id": "g", "bootstrap.servers": "127.0.0.1:9092"} {
		if km[k] != want {
			t.Errorf("kafka %s = %v, want %v", k, km[k], want)
		}
	}
}

// batchPlugin is a Plugin with batch defaults of its own (BatchDefaulter).
type batchPlugin struct {
	handlerPlugin
	records, bytes int
}

func (p batchPlugin) BatchDefaults() (int, int) { return p.records, p.bytes }

// TestConfigPluginBatchDefaults: a BatchDefaulter's values fill MaxBatchRecords and
// MaxBatchBytes where Config leaves them unset, never where it sets them; its 0 leaves the
// sink's default, and its bytes never pass MaxBufferedBytes. An unset MaxBufferedBytes is
// at least twice the plugin's batch bytes.
func TestConfigPluginBatchDefaults(t *testing.T) {
	pl := func(records, bytes int) Plugin {
		return batchPlugin{handlerPlugin(func(context.Context, pgx.Tx, Batch) error { return nil }), records, bytes}
	}
	for _, c := range []struct {
		name                            string
		cfg                             Config
		wantRecords, wantByte, wantBuff int
	}{
		// The plugin's batch bytes get a buffer of twice them: a batch in flight and the next.
		{"plugin's", Config{Plugin: pl(5000, 8<<20)}, 5000, 8 << 20, 16 << 20},
		{"plugin's small", Config{Plugin: pl(5000, 1<<20)}, 5000, 1 << 20, DefaultMaxBufferedBytes},
		{"set wins", Config{Plugin: pl(5000, 8<<20), MaxBatchRecords: 100, MaxBatchBytes: 1 << 20}, 100, 1 << 20, DefaultMaxBufferedBytes},
		{"set bytes", Config{Plugin: pl(5000, 1<<20), MaxBatchBytes: 8 << 20}, 5000, 8 << 20, DefaultMaxBufferedBytes},
		{"plugin's 0", Config{Plugin: pl(0, 0)}, DefaultMaxBatchRecords, DefaultMaxBatchBytes, DefaultMaxBufferedBytes},
		{"within the buffer", Config{Plugin: pl(5000, 8<<20), MaxBufferedBytes: 2 << 20}, 5000, 2 << 20, 2 << 20},
		{"buffer set", Config{Plugin: pl(5000, 8<<20), MaxBufferedBytes: 9 << 20}, 5000, 8 << 20, 9 << 20},
		{"no defaulter", Config{Plugin: handlerPlugin(func(context.Context, pgx.Tx, Batch) error { return nil })}, DefaultMaxBatchRecords, DefaultMaxBatchBytes, DefaultMaxBufferedBytes},
	} {
		d := c.cfg.WithDefaults()
		if d.MaxBatchRecords != c.wantRecords || d.MaxBatchBytes != c.wantByte || d.MaxBufferedBytes != c.wantBuff {
			t.Errorf("%s: MaxBatchRecords %d, MaxBatchBytes %d, MaxBufferedBytes %d; want %d, %d, %d", c.name,
				d.MaxBatchRecords, d.MaxBatchBytes, d.MaxBufferedBytes, c.wantRecords, c.wantByte, c.wantBuff)
		}
		v := validConfig()
		v.Handler, v.Plugin = nil, c.cfg.Plugin
		v.MaxBatchRecords, v.MaxBatchBytes, v.MaxBufferedBytes = c.cfg.MaxBatchRecords, c.cfg.MaxBatchBytes, c.cfg.MaxBufferedBytes
		if err := v.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestConfigPassesKafkaPropertiesThrough(t *testing.T) {
	c := validConfig()
	c.Kafka = kafka.ConfigMap{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "isolation.level": "read_uncommitted"}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	km := s.cfg.kafkaConfig()
	if km["security.protocol"] != "SASL_SSL" || km["sasl.mechanism"] != "SCRAM-SHA-512" || km["isolation.level"] != "read_uncommitted" {
		t.Fatalf("properties not passed through: %v", km)
	}
}

func TestParseInitialPosition(t *testing.T) {
	for s, want := range map[string]InitialPosition{"earliest": Earliest, "LATEST": Latest, "error": ErrorPosition, "kafka-committed": KafkaCommitted} {
		if got, err := ParseInitialPosition(s); err != nil || got != want {
			t.Errorf("%s: %v %v", s, got, err)
		}
	}
	if _, err := ParseInitialPosition("smallest"); err == nil {
		t.Error("smallest accepted")
	}
}

func TestCrossFieldRulesUseTheDefaults(t *testing.T) {
	cases := []struct {
		name, field, reason string
		mod                 func(*Config)
	}{
		{"batch above the default buffer", "MaxBufferedBytes",
			"8388608 bytes (the default) is less than MaxBatchBytes (16777216 bytes); set it at least as large",
			func(c *Config) { c.MaxBatchBytes = 16 << 20 }},
		{"buffer below the default batch", "MaxBufferedBytes",
			"1048576 bytes is less than MaxBatchBytes (4194304 bytes); set it at least as large",
			func(c *Config) { c.MaxBufferedBytes = 1 << 20 }},
		{"backoff above the default maximum", "MaxRetryBackoff", "5s (the default) is less than RetryBackoff (10s)",
			func(c *Config) { c.RetryBackoff = 10 * time.Second }},
		{"maximum below the default backoff", "MaxRetryBackoff", "50ms is less than RetryBackoff (100ms)",
			func(c *Config) { c.MaxRetryBackoff = 50 * time.Millisecond }},
	}
	for _, tc := range cases {
		c := validConfig()
		tc.mod(&c)
		for _, err := range []error{c.Validate(), func() error { _, err := New(c); return err }()} {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || ce.Reason != tc.reason {
				t.Errorf("%s: got %v, want %s: %s", tc.name, err, tc.field, tc.reason)
			}
		}
	}
	c := validConfig()
	c.MaxBatchBytes, c.MaxBufferedBytes, c.RetryBackoff, c.MaxRetryBackoff = 16<<20, 16<<20, time.Second, time.Second
	if err := c.Validate(); err != nil {
		t.Fatalf("equal values refused: %v", err)
	}
}

func TestValidateReportsEveryProblemAndNewTheFirst(t *testing.T) {
	c := validConfig()
	c.GroupID, c.MaxBatchWait, c.RetryBackoff = "", -time.Second, time.Minute
	var fields []string
	for _, err := range c.Validate().(interface{ Unwrap() []error }).Unwrap() {
		fields = append(fields, err.(*ConfigError).Field)
	}
	if want := []string{"GroupID", "MaxBatchWait", "MaxRetryBackoff"}; !slices.Equal(fields, want) {
		t.Fatalf("Validate: fields %v, want %v", fields, want)
	}
	_, err := New(c)
	if ce, ok := err.(*ConfigError); !ok || ce.Field != "GroupID" {
		t.Fatalf("New: %v, want the first problem, for GroupID", err)
	}
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
}

func TestWithDefaults(t *testing.T) {
	c := validConfig()
	d := c.WithDefaults()
	if d.Pipeline != "g" || d.Schema != DefaultSchema || d.MaxBatchRecords != DefaultMaxBatchRecords ||
		d.MaxBatchBytes != DefaultMaxBatchBytes || d.MaxBufferedBytes != DefaultMaxBufferedBytes || d.MaxBatchWait != DefaultMaxBatchWait ||
		d.KafkaCommitInterval != DefaultKafkaCommitInterval || d.IsolationLevel != DefaultIsolationLevel ||
		d.LockTimeout != DefaultLockTimeout || d.IdleInTransactionTimeout != DefaultIdleInTransactionTimeout ||
		d.ClaimTimeout != DefaultClaimTimeout || d.RetryBackoff != DefaultRetryBackoff || d.MaxRetryBackoff != DefaultMaxRetryBackoff ||
		d.RevokeTimeout != DefaultRevokeTimeout || d.ShutdownTimeout != DefaultShutdownTimeout || d.Logger == nil ||
		d.MaxDeadLetterRatio != DefaultMaxDeadLetterRatio || d.DeadLetterWindow != DefaultDeadLetterWindow {
		t.Fatalf("defaults not applied: %+v", d)
	}
	if d.InstanceID != "" || c.Schema != "" || c.MaxBatchRecords != 0 {
		t.Fatalf("WithDefaults set InstanceID %q or changed its receiver: %+v", d.InstanceID, c)
	}
	c.MaxBatchRecords, c.Schema = 7, "s"
	if d := c.WithDefaults(); d.MaxBatchRecords != 7 || d.Schema != "s" {
		t.Fatalf("set values replaced: %+v", d)
	}
}

// TestManagedKafkaProperties: the one list of managed properties is what the consumer gets
// and what New refuses other values for; callers get a copy.
func TestManagedKafkaProperties(t *testing.T) {
	m := kafkaconf.ManagedProperties()
	if len(m) != 2 || m["enable.auto.commit"] != "false" || m["auto.offset.reset"] != "error" {
		t.Fatalf("kafkaconf.ManagedProperties() = %v", m)
	}
	c := validConfig()
	c.Kafka = kafka.ConfigMap{}
	for k, v := range m {
		c.Kafka[k] = v + "x"
	}
	err := c.Validate()
	for k := range m {
		if err == nil || !strings.Contains(err.Error(), "Kafka["+k+"]") {
			t.Errorf("Validate with %s overridden: %v, want a ConfigError for Kafka[%s]", k, err, k)
		}
	}
	s, err := New(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	km := s.cfg.kafkaConfig()
	for k, v := range m {
		if km[k] != v {
			t.Errorf("consumer config %s = %v, want %s", k, km[k], v)
		}
	}
	m["enable.auto.commit"] = "true"
	if kafkaconf.ManagedProperties()["enable.auto.commit"] != "false" || managedKafkaKeys["enable.auto.commit"] != "false" {
		t.Fatal("kafkaconf.ManagedProperties returns a shared map, not a copy")
	}
}

// A shutdown requested while Run connects is a clean stop (nil), not a connection failure:
// nothing was consumed. With the same unreachable database and a live context, Run fails.
func TestRunCancelledWhileStartingIsACleanStop(t *testing.T) {
	c := validConfig()
	c.DatabaseURL = "postgres://u:pw@127.0.0.1:1/db?connect_timeout=2"
	c.Logger = slog.New(slog.DiscardHandler)
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run cancelled while starting: %v, want nil", err)
	}
	s, err = New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "cannot connect to PostgreSQL") {
		t.Fatalf("Run with a live context: %v, want a connection error", err)
	}
}

// Kafka's bootstrap.servers stands in for Brokers, but not beside it.
func TestBootstrapServersInKafka(t *testing.T) {
	c := validConfig()
	c.Brokers, c.Kafka = "", kafka.ConfigMap{"bootstrap.servers": "127.0.0.1:9092"}
	if err := c.Validate(); err != nil {
		t.Fatalf("bootstrap.servers without Brokers: %v", err)
	}
	c.Brokers = "127.0.0.1:9092"
	var ce *ConfigError
	if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "Kafka[bootstrap.servers]" || ce.Reason != "set Brokers or this property, not both" {
		t.Fatalf("both: %v", err)
	}
}

// librdkafka's prefetch queue follows MaxTotalBufferedBytes (issue 26); Kafka's own setting wins.
func TestConfigPrefetchFromTotalBuffer(t *testing.T) {
	for _, c := range []struct{ total, want int }{{32 << 20, 8192}, {256 << 20, 65536}, {1 << 20, 1024}, {0, 1024}} {
		if got := PrefetchKiB(c.total); got != c.want {
			t.Errorf("PrefetchKiB(%d) = %d, want %d", c.total, got, c.want)
		}
	}
	s, err := New(Config{Brokers: "127.0.0.1:9092", GroupID: "g", Topics: []string{"t"}, DatabaseURL: "postgres://x/y",
		Handler: func(context.Context, pgx.Tx, Batch) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.cfg.kafkaConfig()["queued.max.messages.kbytes"]; got != 8192 {
		t.Errorf("default queued.max.messages.kbytes = %v, want 8192", got)
	}
	s, err = New(Config{Brokers: "127.0.0.1:9092", GroupID: "g", Topics: []string{"t"}, DatabaseURL: "postgres://x/y",
		MaxTotalBufferedBytes: 128 << 20, Kafka: kafka.ConfigMap{"queued.max.messages.kbytes": 4096},
		Handler: func(context.Context, pgx.Tx, Batch) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.cfg.kafkaConfig()["queued.max.messages.kbytes"]; got != 4096 {
		t.Errorf("queued.max.messages.kbytes set in Kafka = %v, want 4096", got)
	}
}

// fetch.max.bytes is twice the prefetch queue unless set, within librdkafka's bounds.
func TestConfigFetchMaxBytes(t *testing.T) {
	for _, c := range []struct {
		kafka kafka.ConfigMap
		want  any
	}{
		{nil, 16 << 20},
		{kafka.ConfigMap{"queued.max.messages.kbytes": "4096"}, 8 << 20},
		{kafka.ConfigMap{"queued.max.messages.kbytes": 1}, nil},   // under message.max.bytes: librdkafka's own
		{kafka.ConfigMap{"message.max.bytes": 20000000}, nil},     // the same
		{kafka.ConfigMap{"message.max.bytes": 2000000}, 16 << 20}, // within it
		{kafka.ConfigMap{"receive.message.max.bytes": "10000000"}, 10000000 - 512},
		{kafka.ConfigMap{"fetch.max.bytes": "1048576"}, "1048576"},
	} {
		s, err := New(Config{Brokers: "127.0.0.1:9092", GroupID: "g", Topics: []string{"t"}, DatabaseURL: "postgres://x/y",
			Kafka: c.kafka, Handler: func(context.Context, pgx.Tx, Batch) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		km := s.cfg.kafkaConfig()
		if got := km["fetch.max.bytes"]; got != c.want {
			t.Errorf("%v: fetch.max.bytes = %v, want %v", c.kafka, got, c.want)
		}
		km["bootstrap.servers"] = "127.0.0.1:1"
		if cons, err := kafka.NewConsumer(&km); err != nil { // librdkafka's own checks
			t.Errorf("%v: librdkafka refuses the configuration: %v", c.kafka, err)
		} else {
			cons.Close()
		}
	}
}
