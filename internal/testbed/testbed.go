// Package testbed gives integration tests the real services: a Kafka broker and a
// PostgreSQL server, named by KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL (`make services`
// starts both and `make test` exports them). Each test gets its own topic, group and schema,
// so tests run in parallel. A missing service fails the test with a message saying how to
// start it; it never skips.
package testbed

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Env names the services.
type Env struct {
	Brokers     string
	DatabaseURL string
}

var (
	once    sync.Once
	env     Env
	envErr  error
	counter atomic.Int64
)

// Require returns the services, checking once per process that both answer. It fails the
// test, never skips it, when they are missing.
func Require(t testing.TB) Env {
	t.Helper()
	once.Do(func() { env, envErr = discover() })
	if envErr != nil {
		t.Fatalf("testbed: %v", envErr)
	}
	return env
}

func discover() (Env, error) {
	e := Env{Brokers: os.Getenv("KAFKA_BOOTSTRAP_SERVERS"), DatabaseURL: os.Getenv("DATABASE_URL")}
	if e.Brokers == "" || e.DatabaseURL == "" {
		ce, err := startContainers()
		if err != nil {
			return Env{}, fmt.Errorf("KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL must name a Kafka broker and a PostgreSQL database "+
				"(run `make services` then `. .services/env`, or use `make test`, which does both); %v", err)
		}
		e = ce
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.DatabaseURL)
	if err != nil {
		return Env{}, fmt.Errorf("PostgreSQL at DATABASE_URL does not answer: %v (is `make services` running?)", err)
	}
	_ = conn.Close(ctx)
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": e.Brokers})
	if err != nil {
		return Env{}, fmt.Errorf("kafka admin client: %v", err)
	}
	defer a.Close()
	if _, err := a.ClusterID(ctx); err != nil {
		return Env{}, fmt.Errorf("Kafka at KAFKA_BOOTSTRAP_SERVERS=%s does not answer: %v (is `make services` running?)", e.Brokers, err)
	}
	return e, nil
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// Name returns a name unique to this test run, made of the test's name, usable as a topic,
// group or schema name.
func Name(t testing.TB, prefix string) string {
	base := unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(base) > 30 {
		base = base[len(base)-30:]
	}
	return fmt.Sprintf("%s_%s_%d_%d", prefix, strings.Trim(base, "_"), time.Now().UnixNano()%1e9, counter.Add(1))
}

// Topic creates a topic with the given partitions and deletes it when the test ends.
func Topic(t testing.TB, e Env, partitions int) string {
	t.Helper()
	return NamedTopic(t, e, Name(t, "t"), partitions)
}

// NamedTopic creates topic name with the given partitions and deletes it when the test
// ends; for names that must follow a convention, such as Debezium's
// <topic.prefix>.<schema>.<table>.
func NamedTopic(t testing.TB, e Env, name string, partitions int) string {
	t.Helper()
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": e.Brokers})
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}},
		kafka.SetAdminOperationTimeout(20*time.Second))
	if err != nil || res[0].Error.Code() != kafka.ErrNoError {
		t.Fatalf("create topic %s: %v %v", name, err, res)
	}
	// CreateTopics can return before the broker's metadata has the topic.
	Eventually(t, 30*time.Second, "topic "+name+" in the metadata", func() (bool, string) {
		md, err := a.GetMetadata(&name, false, 5000)
		if err != nil {
			return false, err.Error()
		}
		tm, ok := md.Topics[name]
		return ok && tm.Error.Code() == kafka.ErrNoError && len(tm.Partitions) == partitions, "not yet"
	})
	t.Cleanup(func() {
		a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": e.Brokers})
		if err != nil {
			return
		}
		defer a.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = a.DeleteTopics(ctx, []string{name})
	})
	return name
}

// Schema returns a fresh schema name and drops the schema when the test ends.
func Schema(t testing.TB, e Env) string {
	t.Helper()
	name := Name(t, "s")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, e.DatabaseURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	})
	return name
}

// Pool returns a connection pool closed when the test ends.
func Pool(t testing.TB, e Env) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), e.DatabaseURL)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// Eventually polls cond until it returns true, failing the test with cond's last message
// after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
