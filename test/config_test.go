package test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/examples/custom-sink/ledger"
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

// TestSchemaVersionsAreChecked: Run refuses a framework schema behind or ahead of this build,
// and a plugin whose migrations were not applied; AutoMigrate applies both.
func TestSchemaVersionsAreChecked(t *testing.T) {
	e := testbed.Require(t)
	topic := testbed.Topic(t, e, 1)
	db := testbed.Pool(t, e)
	ctx := context.Background()
	runErr := func(schema string, pl sink.Plugin, auto bool) error {
		cfg := sink.Config{Brokers: e.Brokers, GroupID: testbed.Name(t, "g"), Topics: []string{topic},
			DatabaseURL: e.DatabaseURL, Schema: schema, Plugin: pl, AutoMigrate: auto}
		if pl == nil {
			cfg.Plugin, cfg.Handler = nil, nopHandler
		}
		s, err := sink.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if auto {
			time.AfterFunc(3*time.Second, cancel) // it starts: stop it
		}
		return s.Run(rctx)
	}
	ahead := testbed.Schema(t, e)
	if err := sink.Migrate(ctx, e.DatabaseURL, ahead); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "UPDATE "+pgx.Identifier{ahead, "eosink_schema_migrations"}.Sanitize()+" SET version = 99"); err != nil {
		t.Fatal(err)
	}
	if err := runErr(ahead, nil, false); err == nil || !strings.Contains(err.Error(), "newer than the") {
		t.Errorf("framework schema ahead: %v, want a refusal naming the newer version", err)
	}
	behind := testbed.Schema(t, e)
	if err := sink.Migrate(ctx, e.DatabaseURL, behind); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "UPDATE "+pgx.Identifier{behind, "eosink_schema_migrations"}.Sanitize()+" SET version = 2"); err != nil {
		t.Fatal(err)
	}
	if err := runErr(behind, nil, false); err == nil || !strings.Contains(err.Error(), "at version 2, this build needs") {
		t.Errorf("framework schema behind: %v, want a refusal asking for migrate up", err)
	}
	// A plugin with migrations that were not applied, then AutoMigrate.
	fresh := testbed.Schema(t, e)
	if err := sink.Migrate(ctx, e.DatabaseURL, fresh); err != nil {
		t.Fatal(err)
	}
	pl := ledger.New(ledger.Config{Schema: fresh})
	if err := runErr(fresh, pl, false); err == nil || !strings.Contains(err.Error(), "ledger tables in schema") {
		t.Errorf("plugin not migrated: %v, want a refusal naming the plugin's tables", err)
	}
	if err := runErr(fresh, pl, true); err != nil {
		t.Errorf("with AutoMigrate: %v, want a clean start and stop", err)
	}
}
