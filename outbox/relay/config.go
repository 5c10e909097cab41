package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/internal/migrator"
	"github.com/eosink/eosink/outbox"
)

// Defaults of Config.
const (
	DefaultPositionTopic      = "eosink-outbox-positions"
	DefaultBatchSize          = 500
	DefaultPollInterval       = 100 * time.Millisecond
	DefaultHorizonWarn        = 30 * time.Second
	DefaultRetention          = time.Hour
	DefaultCleanupInterval    = 10 * time.Second
	DefaultCleanupBatch       = 10000
	DefaultTransactionTimeout = 60 * time.Second
	DefaultStatsInterval      = 5 * time.Second
)

// Config configures a Relay.
type Config struct {
	// DatabaseURL names the PostgreSQL database holding the outbox. Required.
	DatabaseURL string
	// Schema holds the outbox table. Defaults to outbox.DefaultSchema.
	Schema string
	// Kafka holds librdkafka properties; bootstrap.servers is required. The relay sets
	// transactional.id, enable.idempotence and transaction.timeout.ms itself.
	Kafka kafka.ConfigMap
	// Name prefixes each shard's transactional.id (Name + "-" + shard) and keys its position.
	// Two relays with the same Name and shard fence each other: the later one wins. Defaults
	// to "eosink-outbox-" + Schema.
	Name string
	// Shards must equal the writers' shard count (outbox.Config.Shards). Defaults to
	// outbox.DefaultShards.
	Shards int
	// Own lists the shards this relay publishes. Defaults to all of them.
	Own []int
	// PositionTopic is the compacted topic holding each shard's position, written in the same
	// Kafka transaction as the events; created (compacted, one partition) when missing.
	// Defaults to DefaultPositionTopic.
	PositionTopic string
	// BatchSize is the most events per Kafka transaction. Defaults to DefaultBatchSize.
	BatchSize int
	// PollInterval is the wait after finding nothing to publish. Defaults to
	// DefaultPollInterval.
	PollInterval time.Duration
	// HorizonWarn: committed rows held back longer than this by a transaction still in
	// flight (the snapshot's xmin) are logged at WARN with the oldest open transaction; they
	// are never skipped. Defaults to DefaultHorizonWarn.
	HorizonWarn time.Duration
	// Retention keeps published rows this long before cleanup deletes them; 0 deletes them
	// at the next cleanup. nil defaults to DefaultRetention.
	Retention *time.Duration
	// CleanupInterval is how often published rows past retention are deleted, at most
	// CleanupBatch rows per statement. Default to DefaultCleanupInterval and
	// DefaultCleanupBatch.
	CleanupInterval time.Duration
	CleanupBatch    int
	// TransactionTimeout is the Kafka transaction.timeout.ms: a relay stalled longer has its
	// transaction aborted by the broker. Defaults to DefaultTransactionTimeout.
	TransactionTimeout time.Duration
	// StatsInterval is how often depth and age are measured for metrics and the
	// outbox_relays table. Defaults to DefaultStatsInterval.
	StatsInterval time.Duration
	// InstanceID names this process in outbox_relays and logs. Defaults to hostname-pid.
	InstanceID string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the relay's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// ConfigError names a Config field and what is wrong with it.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string { return "relay: " + e.Field + ": " + e.Reason }

// withDefaults returns c with its defaults applied, or the first problem.
func (c Config) withDefaults() (Config, error) {
	if c.DatabaseURL == "" {
		return c, &ConfigError{"DatabaseURL", "required"}
	}
	if c.Schema == "" {
		c.Schema = outbox.DefaultSchema
	}
	if err := migrator.CheckSchemaName(c.Schema); err != nil {
		return c, &ConfigError{"Schema", err.Error()}
	}
	if v, _ := c.Kafka.Get("bootstrap.servers", ""); v == "" {
		return c, &ConfigError{"Kafka", "bootstrap.servers is required"}
	}
	for _, k := range []string{"transactional.id", "enable.idempotence", "isolation.level"} {
		if _, ok := c.Kafka[k]; ok {
			return c, &ConfigError{"Kafka", k + " is set by the relay"}
		}
	}
	if c.Name == "" {
		c.Name = "eosink-outbox-" + c.Schema
	}
	if strings.ContainsAny(c.Name, " \t\n") {
		return c, &ConfigError{"Name", "must not contain spaces"}
	}
	if c.Shards == 0 {
		c.Shards = outbox.DefaultShards
	}
	if c.Shards < 0 || c.Shards > 1<<16 {
		return c, &ConfigError{"Shards", fmt.Sprintf("%d is not between 1 and 65536", c.Shards)}
	}
	if len(c.Own) == 0 {
		for i := range c.Shards {
			c.Own = append(c.Own, i)
		}
	}
	c.Own = slices.Clone(c.Own)
	slices.Sort(c.Own)
	for i, s := range c.Own {
		if s < 0 || s >= c.Shards {
			return c, &ConfigError{"Own", fmt.Sprintf("shard %d is not between 0 and %d", s, c.Shards-1)}
		}
		if i > 0 && c.Own[i-1] == s {
			return c, &ConfigError{"Own", fmt.Sprintf("shard %d is listed twice", s)}
		}
	}
	if c.PositionTopic == "" {
		c.PositionTopic = DefaultPositionTopic
	}
	positive := func(field string, d *time.Duration, def time.Duration) error {
		if *d == 0 {
			*d = def
		}
		if *d < 0 {
			return &ConfigError{field, "must be positive"}
		}
		return nil
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.CleanupBatch == 0 {
		c.CleanupBatch = DefaultCleanupBatch
	}
	if c.BatchSize < 0 || c.CleanupBatch < 0 {
		return c, &ConfigError{"BatchSize", "must be positive"}
	}
	for _, p := range []struct {
		f   string
		d   *time.Duration
		def time.Duration
	}{{"PollInterval", &c.PollInterval, DefaultPollInterval}, {"HorizonWarn", &c.HorizonWarn, DefaultHorizonWarn},
		{"CleanupInterval", &c.CleanupInterval, DefaultCleanupInterval}, {"TransactionTimeout", &c.TransactionTimeout, DefaultTransactionTimeout},
		{"StatsInterval", &c.StatsInterval, DefaultStatsInterval}} {
		if err := positive(p.f, p.d, p.def); err != nil {
			return c, err
		}
	}
	if c.Retention == nil {
		d := DefaultRetention
		c.Retention = &d
	}
	if *c.Retention < 0 {
		return c, &ConfigError{"Retention", "must not be negative"}
	}
	if c.InstanceID == "" {
		h, _ := os.Hostname()
		c.InstanceID = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// ErrFenced: another relay with the same Name took the shard (a newer producer with the same
// transactional.id); this one stopped publishing it.
var ErrFenced = errors.New("relay: fenced by a newer relay with the same transactional.id")

// ErrPositionLost: the position topic holds no position (or an older one) for a shard that
// outbox_relays says has published further. Publishing from there would send events again,
// so the relay refuses to start; see docs/outbox.md for the remedy.
var ErrPositionLost = errors.New("relay: the Kafka position is behind the last published position recorded in the database")

// ErrPositionAhead: a shard's position in Kafka names a transaction id the database has not
// reached yet, as after restoring it from a backup or moving it with dump and restore. Rows
// written now would sort before the position and never be published, so the relay refuses
// to start; see docs/outbox.md for the remedy.
var ErrPositionAhead = errors.New("relay: the Kafka position is ahead of the database's transaction ids")

// ErrDatabaseRewound: the database does not hold the generation the shard's Kafka position
// carries, so it is not the history the position came from: it was restored from a backup,
// or a standby that lagged was promoted, and its transaction ids went back. Rows written now
// could sort at or below the position and never be published, and events published from
// commits the database no longer has are in Kafka. The relay stops the shard (reason
// database_rewound) before it reads, publishes or deletes anything; Resync is the remedy
// (docs/outbox.md, "After a restore or a failover").
var ErrDatabaseRewound = errors.New("relay: the database is not the history of the Kafka position (database_rewound)")

// ShardError says which shard stopped and why.
type ShardError struct {
	Shard int
	Err   error
}

func (e *ShardError) Error() string { return fmt.Sprintf("relay: shard %d: %v", e.Shard, e.Err) }

// Unwrap returns the cause.
func (e *ShardError) Unwrap() error { return e.Err }
