package test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestBadConnectionsGiveClearErrors: Run fails fast, names what is wrong, and never prints
// the password.
func TestBadConnectionsGiveClearErrors(t *testing.T) {
	e := testbed.Require(t)
	topic := testbed.Topic(t, e, 1)
	schema := testbed.Schema(t, e)
	if err := sink.Migrate(context.Background(), e.DatabaseURL, schema); err != nil {
		t.Fatal(err)
	}
	base := func() sink.Config {
		return sink.Config{Brokers: e.Brokers, GroupID: testbed.Name(t, "g"), Topics: []string{topic},
			DatabaseURL: e.DatabaseURL, Schema: schema, Handler: nopHandler}
	}
	cases := []struct {
		name string
		mod  func(*sink.Config)
		want string
	}{
		{"database unreachable", func(c *sink.Config) { c.DatabaseURL = "postgres://eosink:s3cret-pw@127.0.0.1:1/x?connect_timeout=3" }, "cannot connect to PostgreSQL at 127.0.0.1:1/x"},
		{"offsets table missing", func(c *sink.Config) { c.Schema = testbed.Name(t, "nosuch") }, "run `eosink migrate up`"},
		{"broker unreachable", func(c *sink.Config) { c.Brokers = "127.0.0.1:1" }, "cannot reach Kafka at 127.0.0.1:1"},
		{"topic missing", func(c *sink.Config) { c.Topics = []string{"no-such-topic-" + testbed.Name(t, "x")} }, "does not exist"},
		{"bad librdkafka property", func(c *sink.Config) { c.Kafka = kafka.ConfigMap{"no.such.property": 1} }, "No such configuration property"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := base()
			tc.mod(&cfg)
			s, err := sink.New(cfg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			began := time.Now()
			err = s.Run(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: got %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret-pw") {
				t.Fatalf("error leaks the password: %v", err)
			}
			if took := time.Since(began); took > 30*time.Second {
				t.Fatalf("took %s to fail", took)
			}
			t.Logf("%s: %v", tc.name, err)
		})
	}
}

func nopHandler(context.Context, pgx.Tx, sink.Batch) error { return nil }
