package test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/sink"
)

// running is a sink run in this process.
type running struct {
	s      *sink.Sink
	cancel context.CancelFunc
	done   chan error
}

func (p *pipeline) config(t *testing.T, h sink.Handler) sink.Config {
	if h == nil {
		h = app.Handler(p.Schema)
	}
	return sink.Config{
		Brokers: p.Env.Brokers, GroupID: p.Group, Topics: []string{p.Topic},
		DatabaseURL: p.Env.DatabaseURL, Schema: p.OffsetsSchema, Handler: h,
		Kafka:           kafka.ConfigMap{"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
		MaxBatchRecords: 50,
		Logger:          slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
}

func startSink(t *testing.T, cfg sink.Config) *running {
	t.Helper()
	s, err := sink.New(cfg)
	if err != nil {
		t.Fatalf("sink.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{s: s, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := s.Run(ctx)
		if err != nil && ctx.Err() == nil {
			t.Errorf("Run returned before it was stopped: %v", err)
		}
		r.done <- err
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// stop cancels the run and returns Run's error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60s of cancellation")
		return nil
	}
}

func (p *pipeline) setStored(t *testing.T, partition int32, next, epoch int64) {
	t.Helper()
	_, err := pgxExec(t, p, `INSERT INTO `+pgx.Identifier{p.OffsetsSchema, "offsets"}.Sanitize()+
		` (pipeline, topic, partition, next_offset, epoch) VALUES ($1, $2, $3, $4, $5)`, p.Group, p.Topic, partition, next, epoch)
	if err != nil {
		t.Fatalf("insert offset row: %v", err)
	}
}

func (p *pipeline) stored(t *testing.T, partition int32) (next, epoch int64) {
	t.Helper()
	conn := connect(t, p)
	err := conn.QueryRow(context.Background(), `SELECT next_offset, epoch FROM `+pgx.Identifier{p.OffsetsSchema, "offsets"}.Sanitize()+
		` WHERE pipeline = $1 AND topic = $2 AND partition = $3`, p.Group, p.Topic, partition).Scan(&next, &epoch)
	if err != nil {
		t.Fatalf("read offset row: %v", err)
	}
	return next, epoch
}

func (p *pipeline) ledgerOffsets(t *testing.T) (count int, min, max int64) {
	t.Helper()
	conn := connect(t, p)
	err := conn.QueryRow(context.Background(), `SELECT count(*), coalesce(min("offset"), -1), coalesce(max("offset"), -1) FROM `+
		pgx.Identifier{p.Schema, "ledger"}.Sanitize()).Scan(&count, &min, &max)
	if err != nil {
		t.Fatalf("read ledger: %v", err)
	}
	return count, min, max
}

func connect(t *testing.T, p *pipeline) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), p.Env.DatabaseURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func pgxExec(t *testing.T, p *pipeline, sql string, args ...any) (int64, error) {
	tag, err := connect(t, p).Exec(context.Background(), sql, args...)
	return tag.RowsAffected(), err
}

// commitKafkaOffset commits offset for the pipeline's group in Kafka, as a consumer group
// that eosink takes over would have done.
func (p *pipeline) commitKafkaOffset(t *testing.T, partition int32, offset int64) {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": p.Env.Brokers, "group.id": p.Group, "enable.auto.commit": false})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.CommitOffsets([]kafka.TopicPartition{{Topic: &p.Topic, Partition: partition, Offset: kafka.Offset(offset)}})
	if err != nil || res[0].Error != nil {
		t.Fatalf("commit Kafka offset: %v %v", err, res)
	}
}

// admin returns an admin.Client on the pipeline's schema and broker.
func (p *pipeline) admin(pool *pgxpool.Pool) *admin.Client {
	return admin.New(pool, p.OffsetsSchema, kafka.ConfigMap{"bootstrap.servers": p.Env.Brokers})
}

func (p *pipeline) offsetsTable() string {
	return pgx.Identifier{p.OffsetsSchema, "offsets"}.Sanitize()
}
