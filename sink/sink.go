package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

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
	store  *rebalance.Store

	// Owned by the poll goroutine (Run and the rebalance callbacks it serves).
	consumer *kafka.Consumer
	workers  map[partitionKey]*worker
	paused   map[partitionKey]*worker
	kcommit  *kafkaCommitter

	recheck      chan partitionKey // partitions whose row to read again (fenced, see reset.go)
	recheckEvery chan struct{}     // read every partition's row again (notified of a reset)

	mu     sync.Mutex
	failed map[partitionKey]error // why partitions stopped on this instance, latest per partition

	m          *metrics
	live       map[partitionKey]*worker // copy of workers for metrics, under mu
	consumerMu sync.RWMutex             // write-held to set scraped; read-held while metrics use it
	scraped    *kafka.Consumer          // the consumer while it is open, for metrics
	polled     atomic.Int64             // unix nanos of the last poll loop iteration
	running    atomic.Bool              // Run is consuming
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
	DeadLetters    int64 // poison records written to the dead-letter table
}

// New validates cfg and returns a Sink. It does no I/O; with Config.Registerer it registers
// the sink's metrics.
func New(cfg Config) (*Sink, error) {
	c, err := cfg.build()
	if err != nil {
		return nil, err
	}
	s := &Sink{
		cfg:     c,
		log:     c.Logger.With("pipeline", c.Pipeline),
		workers: map[partitionKey]*worker{},
		paused:  map[partitionKey]*worker{},
		failed:  map[partitionKey]error{},

		recheck:      make(chan partitionKey, 256),
		recheckEvery: make(chan struct{}, 1),
		live:         map[partitionKey]*worker{},
	}
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
	return s, nil
}

func (s *Sink) setScraped(c *kafka.Consumer) {
	s.consumerMu.Lock()
	s.scraped = c
	s.consumerMu.Unlock()
}

// setLive records the worker of k for metrics (nil: none).
func (s *Sink) setLive(k partitionKey, w *worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w == nil {
		delete(s.live, k)
	} else {
		s.live[k] = w
	}
}

func (s *Sink) liveWorkers() []*worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := make([]*worker, 0, len(s.live))
	for _, w := range s.live {
		ws = append(ws, w)
	}
	return ws
}

// Stats returns the counters. Safe to call from any goroutine.
func (s *Sink) Stats() Stats {
	m := s.m
	return Stats{
		Records: m.records.load(), Batches: m.batches.load(), Retries: m.retries.load(),
		Fenced: m.fenced.load(), UnknownCommits: m.unknownCommits.load(), Claims: m.claims.load(),
		Pauses: m.pauses.load(), DeadLetters: m.deadLetters.load(),
	}
}

// PartitionErrors returns why partitions stopped on this instance, the latest error of each
// partition: *FencedError, *HandlerError or *PartitionError values. A stopped partition stays
// assigned but makes no progress until it is reassigned. Safe to call from any goroutine.
func (s *Sink) PartitionErrors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, 0, len(s.failed))
	for _, err := range s.failed {
		errs = append(errs, err)
	}
	return errs
}

func (s *Sink) recordFailure(topic string, partition int32, err error) {
	s.mu.Lock()
	s.failed[partitionKey{topic, partition}] = err
	s.mu.Unlock()
}

// Run connects to PostgreSQL and Kafka, joins the consumer group and applies records until
// ctx is cancelled or a fatal error occurs. On cancellation it drains: in-flight and queued
// batches commit within ShutdownTimeout, then the consumer leaves the group. It returns nil
// after a clean drain.
//
// Errors in one partition (fenced, handler failure, offset out of range) stop that
// partition only; they are logged and listed by PartitionErrors. Run returns an error when
// the sink cannot go on: the database or the broker is unreachable at start, the offsets
// table is missing, a claim keeps failing, or librdkafka reports a fatal error.
func (s *Sink) Run(ctx context.Context) (err error) {
	if !s.ran.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if err := s.openDatabase(ctx); err != nil {
		return err
	}
	if s.cfg.Pool == nil {
		defer s.pool.Close()
	}
	s.store = rebalance.NewStore(s.pool, s.cfg.Schema, s.cfg.Pipeline, s.cfg.InstanceID, s.cfg.LockTimeout)
	s.store.TerminateStalled = s.pool.Config().ConnConfig.RuntimeParams["application_name"]
	s.store.OnTerminate = func(topic string, partition int32, pid int64, ok bool) {
		s.log.Warn("claim terminated a stalled session of this pipeline holding the offset row",
			"topic", topic, "partition", partition, "pid", pid, "terminated", ok)
	}

	c, err := kafka.NewConsumer(ptr(s.cfg.kafkaConfig()))
	if err != nil {
		return fmt.Errorf("eosink: kafka consumer: %w", err)
	}
	s.consumer = c
	s.setScraped(c)
	defer s.setScraped(nil)
	if err := s.checkTopics(ctx); err != nil {
		_ = c.Close()
		return err
	}
	bal := rebalance.NewBalancer(s.store, s.cfg.InitialPosition, (*lifecycle)(s), s.log)
	bal.ClaimTimeout = s.cfg.ClaimTimeout
	if err := c.SubscribeTopics(s.cfg.Topics, bal.OnRebalance); err != nil {
		_ = c.Close()
		return fmt.Errorf("eosink: subscribe %v: %w", s.cfg.Topics, err)
	}
	if s.cfg.CommitToKafka {
		s.kcommit = newKafkaCommitter(c, s.cfg.KafkaCommitInterval, s.log)
	}
	s.log.Info("sink started", "topics", s.cfg.Topics, "group", s.cfg.GroupID, "instance", s.cfg.InstanceID)

	lctx, stopListening := context.WithCancel(context.Background())
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		s.listen(lctx)
	}()
	s.running.Store(true)
	err = s.poll(ctx, bal)
	s.running.Store(false)
	stopListening()
	<-listening

	s.drain()
	if s.kcommit != nil {
		s.kcommit.close()
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

// poll is the consumer loop: it serves rebalance callbacks, hands records to partition
// workers, and pauses and resumes partitions to bound memory.
func (s *Sink) poll(ctx context.Context, bal *rebalance.Balancer) error {
	c := s.consumer
	for ctx.Err() == nil {
		s.polled.Store(time.Now().UnixNano())
		ev := c.Poll(100)
		if err := bal.Err(); err != nil {
			return err
		}
		switch e := ev.(type) {
		case nil:
		case *kafka.Message:
			s.dispatch(e)
		case kafka.Error:
			if e.IsFatal() {
				return fmt.Errorf("eosink: kafka fatal error: %w", e)
			}
			if e.Code() == kafka.ErrAutoOffsetReset {
				// auto.offset.reset=error: librdkafka stopped a partition whose position left
				// the log. Find which, and stop it loudly.
				s.log.Error("kafka reports an offset out of range", "err", e)
				s.checkRanges()
			} else {
				s.log.Warn("kafka error", "code", e.Code().String(), "err", e)
			}
		default:
			s.log.Debug("kafka event", "event", e.String())
		}
		s.resumeDrained()
		s.serveRechecks()
	}
	return nil
}

func (s *Sink) dispatch(m *kafka.Message) {
	tp := m.TopicPartition
	if tp.Error != nil {
		s.log.Warn("kafka partition error", "topic", *tp.Topic, "partition", tp.Partition, "err", tp.Error)
		return
	}
	k := partitionKey{*tp.Topic, tp.Partition}
	w := s.workers[k]
	if w == nil {
		return // not ours (any more): never committed, never lost
	}
	if w.dead.Load() {
		s.pause(k, w)
		return
	}
	r := Record{
		Topic: k.topic, Partition: k.partition, Offset: int64(tp.Offset),
		Key: m.Key, Value: m.Value, Timestamp: m.Timestamp,
	}
	if len(m.Headers) > 0 {
		r.Headers = make([]Header, len(m.Headers))
		for i, h := range m.Headers {
			r.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	if w.push(r) {
		s.pause(k, w)
	}
}

func (s *Sink) pause(k partitionKey, w *worker) {
	if _, ok := s.paused[k]; ok {
		return
	}
	if err := s.consumer.Pause([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition}}); err != nil {
		s.log.Warn("pause failed", "topic", k.topic, "partition", k.partition, "err", err)
		return
	}
	s.paused[k] = w
	s.m.pauses.add(1)
}

func (s *Sink) resumeDrained() {
	for k, w := range s.paused {
		if w.dead.Load() || !w.canResume() {
			continue
		}
		if err := s.consumer.Resume([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition}}); err != nil {
			s.log.Warn("resume failed", "topic", k.topic, "partition", k.partition, "err", err)
			continue
		}
		delete(s.paused, k)
	}
}

// checkRanges stops every partition whose stored position is outside its log.
func (s *Sink) checkRanges() {
	for k, w := range s.workers {
		if w.dead.Load() {
			continue
		}
		low, high, err := s.consumer.QueryWatermarkOffsets(k.topic, k.partition, 10000)
		if err != nil {
			s.log.Warn("query watermark offsets", "topic", k.topic, "partition", k.partition, "err", err)
			continue
		}
		// librdkafka complains about its fetch position, which may be ahead of the stored one.
		next, fetch := w.next.Load(), w.fetchNext
		if next < low || next > high || fetch < low || fetch > high {
			w.cancel()
			<-w.done
			s.partitionFailed(w, &PartitionError{Topic: k.topic, Partition: k.partition,
				Err: fmt.Errorf("%w: stored next offset %d, fetch position %d, log has %d..%d", ErrOffsetOutOfRange, next, fetch, low, high)})
			s.pause(k, w)
		}
	}
}

// drain stops every worker, letting queued batches commit within ShutdownTimeout.
func (s *Sink) drain() {
	var parts []kafka.TopicPartition
	for k := range s.workers {
		parts = append(parts, kafka.TopicPartition{Topic: &k.topic, Partition: k.partition})
	}
	if len(parts) > 0 {
		s.stopWorkers(parts, false, s.cfg.ShutdownTimeout)
	}
}

// stopWorkers stops the workers of parts and waits for them: a graceful stop commits what is
// queued; after timeout, or at once when abort is set, in-flight transactions roll back.
func (s *Sink) stopWorkers(parts []kafka.TopicPartition, abort bool, timeout time.Duration) {
	var ws []*worker
	var paused []kafka.TopicPartition
	for _, p := range parts {
		k := partitionKey{*p.Topic, p.Partition}
		if _, ok := s.paused[k]; ok {
			// librdkafka keeps an application's pause across unassign and assign: resume
			// while still assigned, or the partition stays silent if it comes back to us.
			paused = append(paused, kafka.TopicPartition{Topic: p.Topic, Partition: p.Partition})
			delete(s.paused, k)
		}
		w := s.workers[k]
		if w == nil {
			continue
		}
		delete(s.workers, k)
		s.setLive(k, nil)
		ws = append(ws, w)
		if abort {
			w.cancel()
		} else {
			close(w.stop)
		}
	}
	if len(paused) > 0 {
		if err := s.consumer.Resume(paused); err != nil {
			s.log.Warn("resume before unassign failed", "err", err)
		}
	}
	// Past the timeout, abort what is still running: its transaction rolls back and the
	// next owner resumes from the stored offset. A handler that ignores its context gets a
	// grace period more; then it is left behind, and the epoch fences whatever it does later.
	const grace = 5 * time.Second
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	aborted := abort
	for _, w := range ws {
		for waiting := true; waiting; {
			select {
			case <-w.done:
				waiting = false
			case <-deadline.C:
				if aborted {
					s.log.Error("a handler ignored cancellation; leaving it behind (its commits will be fenced)",
						"topic", w.topic, "partition", w.partition)
					waiting = false
					continue
				}
				s.log.Warn("in-flight batches did not finish in time; aborting them", "timeout", timeout)
				for _, w := range ws {
					w.cancel()
				}
				aborted = true
				deadline.Reset(grace)
			}
		}
		w.cancel() // releases the context
		s.polled.Store(time.Now().UnixNano())
	}
}

func (s *Sink) partitionFailed(w *worker, err error) {
	s.recordFailure(w.topic, w.partition, err)
	if errors.Is(err, ErrFenced) {
		s.log.Warn("partition fenced: another instance or an operator moved it; stopped here", "topic", w.topic, "partition", w.partition, "epoch", w.epoch, "err", err)
		s.requestRecheck(partitionKey{w.topic, w.partition}) // an operator's reset is claimed again
		return
	}
	s.log.Error("partition stopped", "topic", w.topic, "partition", w.partition, "err", err)
}

// lifecycle is the Sink seen by the rebalance.Balancer. Its methods run on the poll goroutine.
type lifecycle Sink

func (l *lifecycle) Start(c rebalance.Claim) {
	s := (*Sink)(l)
	s.polled.Store(time.Now().UnixNano()) // a long rebalance is progress, not a hang
	s.m.claims.add(1)
	s.m.rebalance("assigned", 1)
	w := newWorker(s, c.Topic, c.Partition, c.Epoch, c.NextOffset)
	s.workers[partitionKey{c.Topic, c.Partition}] = w
	s.setLive(partitionKey{c.Topic, c.Partition}, w)
	if s.kcommit != nil {
		s.kcommit.forget(c.Topic, c.Partition)
	}
	go w.run()
}

func (l *lifecycle) Stop(parts []kafka.TopicPartition, lost bool) {
	s := (*Sink)(l)
	if lost {
		s.m.rebalance("lost", len(parts))
	} else {
		s.m.rebalance("revoked", len(parts))
	}
	s.stopWorkers(parts, lost, s.cfg.RevokeTimeout)
}

func (l *lifecycle) Failed(err *rebalance.PartitionError) {
	(*Sink)(l).recordFailure(err.Topic, err.Partition, err)
}

// checkTopics fails fast, with a clear message, when the broker cannot be reached or a topic
// does not exist. A topic that is unknown is asked for again for up to topicWait, since a
// topic created a moment ago may not be in the broker's metadata yet.
func (s *Sink) checkTopics(ctx context.Context) error {
	const topicWait = 10 * time.Second
	deadline := time.Now().Add(topicWait)
	for _, t := range s.cfg.Topics {
		for {
			timeout := time.Until(deadline)
			if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
				timeout = time.Until(d)
			}
			md, err := s.consumer.GetMetadata(&t, false, int(max(timeout, time.Second).Milliseconds()))
			if err != nil {
				return fmt.Errorf("eosink: cannot reach Kafka at %s: %w", s.brokers(), err)
			}
			tm, ok := md.Topics[t]
			if ok && tm.Error.Code() == kafka.ErrNoError {
				break
			}
			unknown := !ok || tm.Error.Code() == kafka.ErrUnknownTopicOrPart || tm.Error.Code() == kafka.ErrUnknownTopic
			if !unknown {
				return fmt.Errorf("eosink: topic %q: %w", t, tm.Error)
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("eosink: topic %q does not exist on %s", t, s.brokers())
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return nil
}

func (s *Sink) brokers() string {
	if s.cfg.Brokers != "" {
		return s.cfg.Brokers
	}
	return fmt.Sprint(s.cfg.Kafka["bootstrap.servers"])
}

// openDatabase creates the pool (unless the caller gave one), checks the connection,
// migrates when asked, checks the schema versions and lets the plugin check the database.
func (s *Sink) openDatabase(ctx context.Context) error {
	s.pool = s.cfg.Pool
	if s.pool == nil {
		pc, err := pgxpool.ParseConfig(s.cfg.DatabaseURL)
		if err != nil {
			return &ConfigError{Field: "DatabaseURL", Reason: err.Error()}
		}
		rp := pc.ConnConfig.RuntimeParams
		if _, ok := rp["application_name"]; !ok {
			rp["application_name"] = "eosink:" + s.cfg.Pipeline
		}
		if _, ok := rp["idle_in_transaction_session_timeout"]; !ok {
			rp["idle_in_transaction_session_timeout"] = strconv.FormatInt(s.cfg.IdleInTransactionTimeout.Milliseconds(), 10)
		}
		if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return fmt.Errorf("eosink: database pool: %w", err)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := s.pool.Ping(pctx); err != nil {
		if s.cfg.Pool == nil {
			s.pool.Close()
		}
		return fmt.Errorf("eosink: cannot connect to PostgreSQL at %s: %w", safeDatabaseAddr(s.pool), err)
	}
	url := s.cfg.DatabaseURL
	if url == "" {
		url = s.cfg.Pool.Config().ConnString()
	}
	if err := s.prepareDatabase(ctx, url); err != nil {
		if s.cfg.Pool == nil {
			s.pool.Close()
		}
		return err
	}
	return nil
}

// safeDatabaseAddr names the server without user or password.
func safeDatabaseAddr(p *pgxpool.Pool) string {
	cc := p.Config().ConnConfig
	return fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, cc.Database)
}

func ptr[T any](v T) *T { return &v }
