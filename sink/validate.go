package sink

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/kafkaconf"
	"github.com/eosink/eosink/internal/names"
	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/rebalance"
)

// Validation: the rules New applies to a Config once its defaults are in, in one place for
// the library and the config file (cli/internal/pipeline maps each *ConfigError to its key).

var instanceSeq atomic.Int64

// kafkaTopicName is Kafka's rule for topic names (kafka.common.internals.Topic).
var kafkaTopicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Validate reports every problem New would find in c, each a *ConfigError naming the field,
// joined with errors.Join (New returns the first); nil when c is valid. Names (Topics,
// GroupID, Pipeline, InstanceID, Schema) may hold no NUL byte, no other control character
// and no bytes that are not UTF-8; a topic that is not a pattern must be a Kafka topic name
// (1 to 249 of a-z, A-Z, 0-9, '.', '_', '-'); Kafka's property names and string values may
// hold no NUL byte, its go.* properties (which configure the Go client) are eosink's, and
// its bootstrap.servers is refused when Brokers is set. Unset fields stand for their
// defaults, so that rules between fields hold for the values New uses: with the default
// MaxBufferedBytes, MaxBatchBytes may not exceed 8 MiB.
//
// A reason that names another field writes its Go name (MaxBatchBytes, Topics[0]) or follows
// "set" with it, so that the config file's loader can name its own key instead.
func (c Config) Validate() error {
	problems := c.WithDefaults().problems(c)
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// build is c as New runs it: with its defaults applied, then validated (the first problem
// is the error), and with an InstanceID unique in the process unless one is set.
func (c Config) build() (Config, error) {
	d := c.WithDefaults()
	if problems := d.problems(c); len(problems) > 0 {
		return Config{}, problems[0]
	}
	if d.InstanceID == "" {
		host, _ := os.Hostname()
		d.InstanceID = fmt.Sprintf("%s-%d-%d", host, os.Getpid(), instanceSeq.Add(1))
	}
	return d, nil
}

// problems checks c, a Config with its defaults applied, in a fixed order, cross-field rules
// last. given is the Config as the caller set it, to tell defaults apart in messages.
func (c Config) problems(given Config) []*ConfigError {
	var errs []*ConfigError
	bad := func(field, reason string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Reason: fmt.Sprintf(reason, args...)})
	}
	if c.GroupID == "" {
		bad("GroupID", "required")
	}
	for _, f := range []struct{ name, v string }{{"GroupID", c.GroupID}, {"Pipeline", given.Pipeline}, {"InstanceID", c.InstanceID}} {
		if r := names.Check(f.v); r != "" {
			bad(f.name, "%q %s", f.v, r)
		}
	}
	if len(c.Topics) == 0 {
		bad("Topics", "at least one topic is required")
	}
	for i, t := range c.Topics {
		field := fmt.Sprintf("Topics[%d]", i)
		switch {
		case t == "":
			bad(field, "empty topic name")
		case strings.TrimSpace(t) == "" || t != strings.TrimSpace(t):
			bad(field, "%q is not a topic name", t)
		case names.Check(t) != "":
			bad(field, "%q %s", t, names.Check(t))
		case slices.Index(c.Topics, t) < i:
			bad(field, "%q is listed twice (first at Topics[%d])", t, slices.Index(c.Topics, t))
		case kafkaconf.IsTopicPattern(t):
			if _, err := regexp.Compile(t); err != nil {
				bad(field, "%q is not a regular expression: %v", t, err)
			}
		case !kafkaTopicName.MatchString(t) || t == "." || t == "..":
			bad(field, "%q is not a Kafka topic name (1 to 249 of a-z, A-Z, 0-9, '.', '_' and '-'; not . or ..), nor a pattern starting with ^", t)
		case c.Plugin != nil:
			if err := checkRoute(c.Plugin, t, ""); err != nil {
				var nr *NoRouteError
				if errors.As(err, &nr) {
					bad(field, "no route for topic %q: %s", t, nr.Reason)
				} else {
					bad(field, "%v", err)
				}
			}
		}
	}
	if c.Brokers == "" {
		if v, ok := c.Kafka["bootstrap.servers"]; !ok || fmt.Sprint(v) == "" {
			bad("Brokers", "required (Kafka bootstrap servers, for example 127.0.0.1:9092)")
		}
	}
	if (c.Handler == nil) == (c.Plugin == nil) {
		bad("Handler", "exactly one of Handler and Plugin is required")
	}
	if c.OnPoison != StopOnPoison && c.OnPoison != DeadLetter {
		bad("OnPoison", "unknown value %d", c.OnPoison)
	}
	if c.Pool == nil {
		if c.DatabaseURL == "" {
			bad("DatabaseURL", "required unless Pool is set")
		} else if _, err := pgxpool.ParseConfig(c.DatabaseURL); err != nil {
			// pgx masks the password on a best-effort basis; RedactError rebuilds its message
			// around the parsed string.
			bad("DatabaseURL", "not a PostgreSQL connection string: %v", pgerr.RedactError(err, c.DatabaseURL))
		}
	}
	if r := names.Check(c.Schema); r != "" {
		bad("Schema", "%q %s", c.Schema, r)
	} else if len(c.Schema) > 63 {
		bad("Schema", "%q is not a valid PostgreSQL identifier (at most 63 bytes)", c.Schema)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Kafka)) {
		// librdkafka takes C strings: a NUL would cut the name or value. Not the value: it may
		// be a secret. Other control characters are allowed in values (a PEM in ssl.ca.pem).
		if strings.ContainsRune(k, 0) {
			bad(fmt.Sprintf("Kafka[%q]", k), "the property name holds a NUL byte (\\x00)")
		} else if v, ok := c.Kafka[k].(string); ok && strings.ContainsRune(v, 0) {
			bad("Kafka["+k+"]", "the value holds a NUL byte (\\x00) (not shown: it may be a secret)")
		} else if strings.HasPrefix(k, "go.") {
			bad("Kafka["+k+"]", "go.* properties configure the Go client, which eosink manages")
		}
	}
	if v, ok := c.Kafka["bootstrap.servers"]; ok && c.Brokers != "" && fmt.Sprint(v) != "" {
		bad("Kafka[bootstrap.servers]", "set Brokers or this property, not both")
	}
	for _, k := range slices.Sorted(maps.Keys(managedKafkaKeys)) {
		if v, ok := c.Kafka[k]; ok && fmt.Sprint(v) != managedKafkaKeys[k] {
			bad("Kafka["+k+"]", "is managed by eosink and must be %s (positions come from the database)", managedKafkaKeys[k])
		}
	}
	if _, ok := c.Kafka["group.id"]; ok {
		bad("Kafka[group.id]", "set GroupID instead")
	}
	if !(c.MaxDeadLetterRatio > 0 && c.MaxDeadLetterRatio <= 1) { // NaN fails too
		bad("MaxDeadLetterRatio", "%g is not a share more than 0 and at most 1 (1 turns the breaker off)", c.MaxDeadLetterRatio)
	}
	switch c.IsolationLevel {
	case pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable:
	default:
		bad("IsolationLevel", "%q is not read committed, repeatable read or serializable", c.IsolationLevel)
	}
	if c.InitialPosition < rebalance.Earliest || c.InitialPosition > rebalance.KafkaCommitted {
		bad("InitialPosition", "unknown value %d", c.InitialPosition)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxBatchRecords", c.MaxBatchRecords}, {"MaxBatchBytes", c.MaxBatchBytes}, {"MaxBufferedBytes", c.MaxBufferedBytes},
		{"MaxTotalBufferedBytes", c.MaxTotalBufferedBytes},
		{"DeadLetterWindow", c.DeadLetterWindow}} {
		if f.v < 0 {
			bad(f.name, "must be positive, got %d", f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"MaxBatchWait", c.MaxBatchWait}, {"KafkaCommitInterval", c.KafkaCommitInterval}, {"LockTimeout", c.LockTimeout},
		{"IdleInTransactionTimeout", c.IdleInTransactionTimeout}, {"ClaimTimeout", c.ClaimTimeout},
		{"RetryBackoff", c.RetryBackoff}, {"MaxRetryBackoff", c.MaxRetryBackoff},
		{"RevokeTimeout", c.RevokeTimeout}, {"ShutdownTimeout", c.ShutdownTimeout},
	} {
		if f.v < 0 {
			bad(f.name, "must not be negative, got %s", f.v)
		}
	}

	// Rules between fields, on the effective values.
	if c.MaxBatchBytes > 0 && c.MaxBufferedBytes > 0 && c.MaxBufferedBytes < c.MaxBatchBytes {
		bad("MaxBufferedBytes", "%d bytes%s is less than MaxBatchBytes (%d bytes); set it at least as large",
			c.MaxBufferedBytes, defaultNote(given.MaxBufferedBytes), c.MaxBatchBytes)
	}
	if c.MaxBatchBytes > 0 && c.MaxTotalBufferedBytes > 0 && c.MaxTotalBufferedBytes < c.MaxBatchBytes {
		bad("MaxTotalBufferedBytes", "%d bytes%s is less than MaxBatchBytes (%d bytes); set it at least as large",
			c.MaxTotalBufferedBytes, defaultNote(given.MaxTotalBufferedBytes), c.MaxBatchBytes)
	}
	if c.RetryBackoff > 0 && c.MaxRetryBackoff > 0 && c.MaxRetryBackoff < c.RetryBackoff {
		bad("MaxRetryBackoff", "%s%s is less than RetryBackoff (%s)", c.MaxRetryBackoff, defaultNote(given.MaxRetryBackoff), c.RetryBackoff)
	}
	return errs
}

// defaultNote marks a value in a message as the default when the caller left it unset.
func defaultNote[T comparable](given T) string {
	var zero T
	if given == zero {
		return " (the default)"
	}
	return ""
}
