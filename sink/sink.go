package sink

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/rebalance"
)

// Sink consumes Kafka topics and applies each batch, with the partition's next offset, in one
// PostgreSQL transaction. Create it with New and start it with Run. A Sink runs once.
type Sink struct {
	cfg    Config
	plugin Plugin // cfg.Plugin, or cfg.Handler as a Plugin
	tracer trace.Tracer
	log    *slog.Logger
	ran    atomic.Bool
	pool   *pgxpool.Pool
	store  *offsets.Store
	// buffered is the memory of fetched, uncommitted records over all partitions
	// (MaxTotalBufferedBytes); the workers add and subtract.
	buffered atomic.Int64

	poll  *poller     // the poll goroutine's subsystem (poller.go)
	stops *stopLedger // the partitions stopped on this instance (stops.go)
	clock pollClock   // when the poll loop last turned (Healthy)

	m          *metrics
	consumerMu sync.RWMutex    // write-held to set scraped; read-held while metrics use it
	scraped    *kafka.Consumer // the consumer while it is open, for metrics
	running    atomic.Bool     // Run is consuming
	assigned   assignment      // the group's assignment here (Stats.Assigned)
}

type partitionKey struct {
	topic     string
	partition int32
}

// Stats are counters since the Sink was created.
type Stats struct {
	Records        int64 // records committed
	Batches        int64 // transactions committed
	Retries        int64 // batches retried after a transient error
	Fenced         int64 // commits rejected because another claim owns the partition
	UnknownCommits int64 // COMMITs whose outcome had to be settled by reading the row back
	Claims         int64 // partitions claimed
	Pauses         int64 // times a partition was paused because its buffer was full
	// CapWaits counts the times the sink stopped taking records at MaxTotalBufferedBytes
	// until commits freed memory (without pausing partitions; see MaxTotalBufferedBytes).
	CapWaits    int64
	DeadLetters int64 // poison records written to the dead-letter table
	// BufferedBytes is the memory of records fetched and not yet committed, over all
	// partitions, now (what MaxTotalBufferedBytes caps).
	BufferedBytes int64
	// Assigned is how many partitions the consumer group assigns to this instance now,
	// stopped and contested ones included; 0 before Run subscribes and after it returns.
	Assigned int
	// UnassignedSince is, while Run is a group member that is assigned no partition, since
	// when: its subscription, or the rebalance that took its last partition. A member that
	// restarted after a kill waits here until the group rebalances, up to the session
	// timeout (session.timeout.ms) from the dead member's last heartbeat. Zero otherwise,
	// and for a Sequencer's set, which a lease assigns rather than a group.
	UnassignedSince time.Time
}

// New validates cfg and returns a Sink. It does no I/O; with Config.Registerer it registers
// the sink's metrics.
func New(cfg Config) (*Sink, error) {
	c, err := cfg.build()
	if err != nil {
		return nil, err
	}
	s := &Sink{
		cfg: c,
		log: errorLogger(c.Logger, c.RedactErrorValues).With("pipeline", c.Pipeline),
	}
	s.stops = newStopLedger(&s.cfg, s.log)
	s.tracer = newTracer(c.TracerProvider)
	s.plugin = c.Plugin
	if s.plugin == nil {
		s.plugin = handlerPlugin(c.Handler)
	}
	m, err := newMetrics(s, c.Registerer)
	if err != nil {
		return nil, err
	}
	s.m = m
	s.poll = newPoller(&s.cfg, s.log, m, s.stops, &s.clock)
	return s, nil
}

func (s *Sink) setScraped(c *kafka.Consumer) {
	s.consumerMu.Lock()
	s.scraped = c
	s.consumerMu.Unlock()
}

// Stats returns the counters. Safe to call from any goroutine.
func (s *Sink) Stats() Stats {
	m := s.m
	n, since := s.assigned.get()
	return Stats{
		Records: m.records.load(), Batches: m.batches.load(), Retries: m.retries.load(),
		Fenced: m.fenced.load(), UnknownCommits: m.unknownCommits.load(), Claims: m.claims.load(),
		Pauses: m.pauses.load(), CapWaits: m.capWaits.load(), DeadLetters: m.deadLetters.load(), BufferedBytes: s.buffered.Load(),
		Assigned: n, UnassignedSince: since,
	}
}

// PartitionErrors returns why partitions stopped on this instance, the latest error of each
// partition: *FencedError, *HandlerError or *PartitionError values. A stopped partition stays
// assigned but makes no progress until it is reassigned. Safe to call from any goroutine.
func (s *Sink) PartitionErrors() []error {
	return s.stops.errors()
}

// Run connects to PostgreSQL and Kafka, joins the consumer group and applies records until
// ctx is cancelled or a fatal error occurs. On cancellation it drains: in-flight and queued
// batches commit within ShutdownTimeout, then the consumer leaves the group. It returns nil
// after a clean drain, and when ctx is cancelled before consuming began.
//
// Errors in one partition (fenced, handler failure, offset out of range) stop that
// partition only; they are logged and listed by PartitionErrors. Run returns an error when
// the sink cannot go on: the database or the broker is unreachable at start, the offsets
// table is missing, a listed topic does not exist, the plugin has no route for a topic
// about to be consumed (ErrNoRoute: *NoRouteError values, joined), a claim keeps failing,
// or librdkafka reports a fatal error. Refused credentials or a failed TLS handshake with
// the broker at start return at once, matching ErrKafkaAuthentication or ErrKafkaTLS.
func (s *Sink) Run(ctx context.Context) (err error) {
	if !s.ran.CompareAndSwap(false, true) {
		return ErrClosed
	}
	started := false
	defer func() {
		// Cancelled while starting: nothing was consumed or written, so that is a clean stop,
		// not a failure to connect (a SIGTERM during a rollout's start must not fail it).
		if err != nil && !started && ctx.Err() != nil {
			s.log.Info("sink stopped while starting: nothing consumed", "cause", err)
			err = nil
		}
	}()
	if err := s.openDatabase(ctx); err != nil {
		return err
	}
	if s.cfg.Pool == nil {
		defer s.pool.Close()
	}
	s.store = offsets.NewStore(s.pool, s.cfg.Schema, s.cfg.Pipeline, s.cfg.InstanceID, s.cfg.LockTimeout)
	s.store.TerminateStalled = s.sessionName(ctx)
	s.store.OnTerminateError = s.terminateFailed
	s.checkSignalPrivilege(ctx)
	s.store.OnTerminate = func(topic string, partition int32, pid int64, ok bool) {
		s.log.Warn("claim terminated a stalled session of this pipeline holding the offset row",
			"topic", topic, "partition", partition, "pid", pid, "terminated", ok)
	}
	p := s.poll
	p.store = s.store
	p.wcfg = s.workerConfig()

	c, err := kafka.NewConsumer(ptr(s.cfg.kafkaConfig()))
	if err != nil {
		return fmt.Errorf("eosink: kafka consumer: %w", err)
	}
	p.consumer = c
	s.setScraped(c)
	defer s.setScraped(nil)
	topics, err := s.checkTopics(ctx)
	if err == nil {
		err = s.checkRoutes(topics)
	}
	if err != nil {
		_ = c.Close()
		return err
	}
	if sq, o, ok := sequenced(s.plugin); ok {
		return s.runSequenced(ctx, c, sq, o, &started)
	}
	// The stop ledger's persistence goroutine, with the heartbeat, starts once Kafka answers:
	// a sink that cannot connect writes nothing.
	pctx, stopPersister := context.WithCancel(context.Background())
	persisted := make(chan struct{})
	go func() {
		defer close(persisted)
		s.stops.run(pctx, s.store, s.beat)
	}()
	defer func() { stopPersister(); <-persisted }()
	bal := rebalance.NewBalancer(s.store, s.cfg.InitialPosition, p, s.log)
	bal.ClaimTimeout = s.cfg.ClaimTimeout
	s.assigned.joined(time.Now())
	defer s.assigned.left()
	if err := c.SubscribeTopics(s.cfg.Topics, s.assigned.onRebalance(bal.OnRebalance)); err != nil {
		_ = c.Close()
		return fmt.Errorf("eosink: subscribe %v: %w", s.cfg.Topics, err)
	}
	if s.cfg.CommitToKafka {
		p.kcommit = newKafkaCommitter(c, s.cfg.KafkaCommitInterval, s.log)
		p.wcfg.kcommit = p.kcommit
	}
	s.log.Info("sink started", "topics", s.cfg.Topics, "matching", topics, "group", s.cfg.GroupID, "instance", s.cfg.InstanceID)

	lctx, stopListening := context.WithCancel(context.Background())
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		s.listen(lctx)
	}()
	s.running.Store(true)
	started = true
	err = p.run(ctx, bal)
	s.running.Store(false)
	p.closeRanges()
	stopListening()
	<-listening

	p.drain()
	if p.kcommit != nil {
		p.kcommit.close()
	}
	bal.Close()
	s.setScraped(nil)
	if cerr := c.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("eosink: close consumer: %w", cerr)
	}
	if err == nil {
		err = bal.Err()
	}
	st := s.Stats()
	s.log.Info("sink stopped", "records", st.Records, "batches", st.Batches, "retries", st.Retries, "fenced", st.Fenced, "err", err)
	return err
}

// workerConfig gathers what the partition workers use, once the pool and the store exist.
func (s *Sink) workerConfig() *workerConfig {
	c := &s.cfg
	sub, _ := newSubscription(c.Topics) // compiled by Validate already
	sub.ignore(c.Kafka["topic.blacklist"])
	return &workerConfig{
		subscription: sub,
		plugin:       s.plugin, db: s.pool, store: s.store,
		limits: batchLimits{maxBatchRecords: c.MaxBatchRecords, maxBatchBytes: c.MaxBatchBytes, maxBatchWait: c.MaxBatchWait,
			maxBufferedBytes: c.MaxBufferedBytes, maxTotalBufferedBytes: c.MaxTotalBufferedBytes},
		isolationLevel: c.IsolationLevel, onPoison: c.OnPoison, schema: c.Schema, pipeline: c.Pipeline, instance: c.InstanceID,
		redactErrorValues: c.RedactErrorValues, maxDeadLetterRatio: c.MaxDeadLetterRatio, deadLetterWindow: c.DeadLetterWindow,
		retryBackoff: c.RetryBackoff, maxRetryBackoff: c.MaxRetryBackoff, claimTimeout: c.ClaimTimeout,
		m: s.m, tracer: s.tracer, log: s.log, total: &s.buffered,
		stops: s.stops, rechecks: s.poll.rechecks,
	}
}
