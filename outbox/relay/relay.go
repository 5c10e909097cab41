// Package relay publishes the transactional outbox (package outbox) to Kafka exactly once:
// `eosink relay -config relay.yaml` runs it.
//
// # Reading without skipping
//
// Each outbox row records its transaction's id (xid8). A shard is read in (xid, id) order,
// and only rows whose xid is below the xmin of the current snapshot (pg_current_snapshot()):
// every transaction with a smaller id has ended, so no row can still appear before the last
// one read. A row committed by a transaction still in flight, or behind one, waits; it is
// never skipped. How long committed rows wait is a metric
// (eosink_outbox_horizon_wait_seconds) and, past Config.HorizonWarn, a WARN line naming the
// oldest open transaction.
//
// # Publishing exactly once
//
// Each shard has a transactional producer whose transactional.id is Config.Name + "-" +
// shard. On start it initialises its transactions, which fences any older relay with the
// same id and ends its open transaction, then reads its position from the compacted
// position topic with read_committed, up to the high watermark (every shard writes its
// positions into that topic's one partition, so another shard's open transaction may lie
// below a committed position of ours; the read waits for it to end), never from the
// database. Each Kafka transaction holds
// up to BatchSize events and the new position; a crash before the commit aborts both, a
// crash after it leaves both. A transaction that fails (a broker restart, a timeout) ends the
// producer's session: a new producer initialises again and reads the position again, so a
// retry never guesses what was committed. A relay fenced later (another took the shard)
// stops that shard with ErrFenced.
//
// # A database that went back
//
// A restore or a failover to a standby that lagged gives the database transaction ids the
// relay's position has passed. Before each Kafka transaction that needs one, the relay
// commits a generation row in the database and stores the generation with the position;
// every read checks that the database still holds it, and a database that does not stops
// the shard with ErrDatabaseRewound, before anything is skipped or deleted. Resync is the
// remedy. See generation.go and docs/outbox.md.
//
// # Cleanup, metrics, drain
//
// Published rows are deleted in bulk by a background loop once older than Retention, and
// only up to the position committed to Kafka. Each shard's position and count go to
// <schema>.outbox_relays for `eosink status` (never read back as the position). Cancelling
// Run's context lets each shard finish its transaction, then Run returns nil.
package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/failpoint"
	"github.com/eosink/eosink/outbox"
)

// Relay publishes one schema's outbox.
type Relay struct {
	c       Config
	pool    *pgxpool.Pool
	m       *metrics
	table   string // quoted schema.outbox
	relays  string // quoted schema.outbox_relays
	claims  string // quoted schema.outbox_shard_claims
	gens    string // quoted schema.outbox_generations
	mu      sync.Mutex
	shards  map[int]*shardState
	running sync.WaitGroup
}

// shardState is what the shard goroutine shares with the stats and cleanup loops.
type shardState struct {
	pos       position // committed to Kafka
	gen       string   // the generation pos carries in Kafka ("" for none)
	ready     bool     // pos was read from Kafka
	published int64
	written   position // last position written to outbox_relays
}

// Stats are a relay's counters since New.
type Stats struct {
	Published    int64 // events in committed Kafka transactions
	Transactions int64 // committed Kafka transactions
	Aborted      int64 // aborted Kafka transactions (retried)
}

// New checks c and returns a relay; it does no I/O.
func New(c Config) (*Relay, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Relay{c: c, m: newMetrics(c.Registerer), table: pgx.Identifier{c.Schema, "outbox"}.Sanitize(),
		relays: pgx.Identifier{c.Schema, "outbox_relays"}.Sanitize(), claims: pgx.Identifier{c.Schema, "outbox_shard_claims"}.Sanitize(),
		gens: pgx.Identifier{c.Schema, "outbox_generations"}.Sanitize(), shards: map[int]*shardState{}}
	for _, s := range c.Own {
		r.shards[s] = &shardState{}
	}
	return r, nil
}

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats { return r.m.stats() }

// Run publishes until ctx is cancelled, then lets each shard finish its Kafka transaction
// and returns nil. It returns an error when it cannot start (database or broker unreachable,
// outbox not migrated, rows of a shard beyond Config.Shards, ErrPositionLost), or when
// every shard has stopped: each stop is a *ShardError (errors.Is ErrFenced when another
// relay took the shard, ErrDatabaseRewound when the database is not the history of the
// shard's position).
func (r *Relay) Run(ctx context.Context) error {
	log := r.c.Logger
	// A cancellation while starting (a SIGTERM before the shards run) is a stop, as it is
	// later: nothing was published yet.
	started := func(err error) error {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			log.Info("relay stopped while starting")
			return nil
		}
		return err
	}
	pool, err := r.connect(ctx)
	if err != nil {
		return started(err)
	}
	defer pool.Close()
	r.pool = pool
	if err := r.checkTable(ctx); err != nil {
		return started(err)
	}
	if err := ensurePositionTopic(ctx, r.c.Kafka, r.c.PositionTopic); err != nil {
		return started(err)
	}
	log.Info("relay starting", "relay", r.c.Name, "schema", r.c.Schema, "shards", r.c.Shards, "own", r.c.Own,
		"position_topic", r.c.PositionTopic, "instance", r.c.InstanceID)

	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	var bgDone sync.WaitGroup
	bgDone.Add(2)
	go func() { defer bgDone.Done(); r.statsLoop(bg) }()
	go func() { defer bgDone.Done(); r.cleanupLoop(bg) }()

	errs := make(chan error, len(r.c.Own))
	for _, s := range r.c.Own {
		r.running.Add(1)
		go func() {
			defer r.running.Done()
			err := r.runShard(ctx, s)
			r.m.up.WithLabelValues(strconv.Itoa(s)).Set(0)
			if err != nil {
				reason := stopReason(err)
				r.m.stopped.WithLabelValues(strconv.Itoa(s), reason).Set(1)
				log.Error("relay shard stopped", "shard", s, "reason", reason, "err", err)
				err = &ShardError{Shard: s, Err: err}
			}
			errs <- err
		}()
	}
	r.running.Wait()
	close(errs)
	stopBg()
	bgDone.Wait()
	var all []error
	for err := range errs {
		if err != nil {
			all = append(all, err)
		}
	}
	if ctx.Err() != nil && len(all) == 0 {
		log.Info("relay stopped after draining", "relay", r.c.Name)
		return nil
	}
	return errors.Join(all...)
}

// connect opens the relay's pool.
func (r *Relay) connect(ctx context.Context) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(r.c.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("relay: database URL: %w", err)
	}
	if _, ok := pcfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "eosink-relay:" + r.c.Name
	}
	pcfg.MaxConns = int32(len(r.c.Own) + 3)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	return pool, nil
}

// checkTable makes sure the outbox exists and that no row lies in a shard beyond Shards
// (writers configured with more shards than this relay would never see it published).
func (r *Relay) checkTable(ctx context.Context) error {
	var n int64
	err := r.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM `+r.table+` WHERE shard >= $1 LIMIT 1) s`, r.c.Shards).Scan(&n)
	if err != nil {
		return fmt.Errorf("relay: outbox table %s (migrate it with `eosink relay -migrate` or outbox.Migrate): %w", r.table, err)
	}
	if n > 0 {
		return fmt.Errorf("relay: %s holds rows of shard %d or above: the writers use more shards than this relay's shards: %d", r.table, r.c.Shards, r.c.Shards)
	}
	return nil
}

// row is one outbox row to publish.
type row struct {
	pos     position
	topic   string
	key     []byte
	value   []byte
	hkeys   []string
	hvalues [][]byte
	eventID string
	created time.Time
}

// errProducer: the producer could not be created (its configuration); not retried.
var errProducer = errors.New("kafka producer")

// runShard publishes one shard until ctx is cancelled (nil) or it cannot go on: fenced by
// another relay (ErrFenced), ErrPositionLost, ErrPositionAhead, ErrDatabaseRewound, or a
// producer that cannot be created. Any other failure, such as a fatal producer error after a broker restart, ends the session:
// a new producer with the same transactional.id initialises its transactions (which
// aborts the old one's) and reads the position from Kafka again.
func (r *Relay) runShard(ctx context.Context, shard int) error {
	epoch, err := r.claim(ctx, shard)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	backoff := r.c.PollInterval
	for {
		err := r.session(ctx, shard, epoch)
		if errors.Is(err, ErrFenced) {
			// Kafka fenced this producer, or the claim moved on. With the claim still ours,
			// the fence came from a stale relay that initialised late: initialise again.
			ok, cerr := r.owns(ctx, shard, epoch)
			if cerr == nil && !ok {
				return err
			}
			r.c.Logger.Warn("a stale relay fenced this shard's producer; this relay holds the current claim and starts a new producer",
				"shard", shard, "epoch", epoch)
		} else if err == nil || errors.Is(err, ErrPositionLost) || errors.Is(err, ErrPositionAhead) || errors.Is(err, ErrDatabaseRewound) ||
			errors.Is(err, errProducer) {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		r.m.up.WithLabelValues(strconv.Itoa(shard)).Set(0)
		r.c.Logger.Warn("relay shard failed; starting a new producer, which reads the position from Kafka again", "shard", shard, "err", err, "backoff", backoff)
		sleep(ctx, backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
}

// session is one producer's life on a shard: check the claim, init transactions, check the
// claim again (initialising may have taken long enough for another relay to claim the shard),
// read the position, publish.
func (r *Relay) session(ctx context.Context, shard int, epoch int64) error {
	if err := r.checkClaim(ctx, shard, epoch); err != nil {
		return err
	}
	log := r.c.Logger.With("shard", shard)
	label := strconv.Itoa(shard)
	tid := r.c.Name + "-" + label
	p, err := r.newProducer(tid)
	if err != nil {
		return err
	}
	defer p.Close()
	// Kafka calls run on a context drain does not cancel, each bounded by the transaction
	// timeout: a transaction under way finishes.
	kctx := context.WithoutCancel(ctx)
	if err := r.retry(ctx, log, "init transactions", func() error {
		c, cancel := context.WithTimeout(kctx, r.c.TransactionTimeout+10*time.Second)
		defer cancel()
		return p.InitTransactions(c)
	}); err != nil {
		return err
	}
	if err := r.checkClaim(ctx, shard, epoch); err != nil {
		return err
	}
	var pos position
	var genName string
	var found bool
	if err := r.retry(ctx, log, "read position", func() error {
		c, cancel := context.WithTimeout(kctx, 2*r.c.TransactionTimeout)
		defer cancel()
		pos, genName, found, err = readPosition(c, log, r.c.Kafka, r.c.PositionTopic, tid)
		return err
	}); err != nil {
		return err
	}
	gen, err := r.holdsGeneration(ctx, shard, pos, genName)
	if err != nil {
		return err
	}
	if found && genName == "" {
		log.Warn("the Kafka position carries no generation (an older relay wrote it): the check that the database is the "+
			"position's history starts with this relay's first transaction", "position", pos.String())
	}
	if err := r.checkRecorded(ctx, shard, pos, found); err != nil {
		return err
	}
	r.mu.Lock()
	r.shards[shard].pos, r.shards[shard].gen, r.shards[shard].ready, r.shards[shard].written = pos, genName, true, pos
	r.mu.Unlock()
	r.m.up.WithLabelValues(label).Set(1)
	log.Info("relay shard publishing", "transactional_id", tid, "position", pos.String(), "generation", genName, "position_found", found)

	backoff := r.c.PollInterval
	for ctx.Err() == nil {
		rows, next, err := r.read(ctx, shard, pos, gen)
		if errors.Is(err, ErrDatabaseRewound) {
			return err
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			log.Warn("reading the outbox failed; retrying", "err", err, "backoff", backoff)
			sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = r.c.PollInterval
		failpoint.Eval(failpoint.RelayAfterRead)
		if len(rows) == 0 {
			sleep(ctx, r.c.PollInterval)
			continue
		}
		end, err := r.publish(kctx, p, tid, shard, next.name, rows, rows[len(rows)-1].pos)
		if isFenced(err) {
			return ErrFenced
		}
		if err != nil {
			// Aborted, or in a state only a new producer clears: the session ends and the
			// next one starts from the position in Kafka.
			r.m.transactions.WithLabelValues(label, "aborted").Inc()
			r.m.nAborted.Add(1)
			return fmt.Errorf("kafka transaction after %s not committed: %w", pos, err)
		}
		pos, gen = end, next
		now := time.Now()
		r.m.transactions.WithLabelValues(label, "committed").Inc()
		r.m.published.WithLabelValues(label).Add(float64(len(rows)))
		r.m.nCommitted.Add(1)
		r.m.nPublished.Add(int64(len(rows)))
		for i := range rows {
			r.m.latency.Observe(now.Sub(rows[i].created).Seconds())
		}
		r.mu.Lock()
		r.shards[shard].pos, r.shards[shard].gen = pos, gen.name
		r.shards[shard].published += int64(len(rows))
		r.mu.Unlock()
		failpoint.Eval(failpoint.RelayAfterCommit)
	}
	r.writeStatus(context.WithoutCancel(ctx))
	log.Info("relay shard drained", "position", pos.String())
	return nil
}

// newProducer returns a transactional producer with transactional.id tid.
func (r *Relay) newProducer(tid string) (*kafka.Producer, error) {
	pcfg := clientConfig(r.c.Kafka)
	for k, v := range map[string]kafka.ConfigValue{"transactional.id": tid, "enable.idempotence": true,
		"transaction.timeout.ms": int(r.c.TransactionTimeout / time.Millisecond), "go.delivery.reports": false} {
		(*pcfg)[k] = v
	}
	p, err := kafka.NewProducer(pcfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errProducer, err)
	}
	return p, nil
}

// publish sends rows and the position next (the last row's, or past it), with generation
// gen, in one Kafka transaction, aborting it on any error. It returns next once the
// transaction committed.
func (r *Relay) publish(ctx context.Context, p *kafka.Producer, tid string, shard int, gen string, rows []row, next position) (position, error) {
	if err := p.BeginTransaction(); err != nil {
		return position{}, err
	}
	abort := func(err error) (position, error) {
		c, cancel := context.WithTimeout(ctx, r.c.TransactionTimeout)
		defer cancel()
		if aerr := p.AbortTransaction(c); aerr != nil && (isFenced(aerr) || isFatal(aerr)) {
			return position{}, aerr
		}
		return position{}, err
	}
	for i := range rows {
		w := &rows[i]
		hs := make([]kafka.Header, 0, len(w.hkeys)+2)
		for j, k := range w.hkeys {
			hs = append(hs, kafka.Header{Key: k, Value: w.hvalues[j]})
		}
		hs = append(hs, kafka.Header{Key: outbox.EventIDHeader, Value: []byte(w.eventID)})
		if err := produce(p, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &w.topic, Partition: kafka.PartitionAny},
			Key: w.key, Value: w.value, Headers: hs}); err != nil {
			return abort(err)
		}
	}
	val, err := encodePosition(next, gen, r.c.Name, shard, r.c.Shards, r.c.InstanceID)
	if err != nil {
		return abort(err)
	}
	if err := produce(p, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &r.c.PositionTopic, Partition: kafka.PartitionAny},
		Key: []byte(tid), Value: val}); err != nil {
		return abort(err)
	}
	failpoint.Eval(failpoint.RelayMidTransaction)
	for {
		c, cancel := context.WithTimeout(ctx, r.c.TransactionTimeout)
		err := p.CommitTransaction(c)
		cancel()
		if err == nil {
			return next, nil
		}
		var ke kafka.Error
		if errors.As(err, &ke) && ke.IsRetriable() && !ke.TxnRequiresAbort() {
			continue // the outcome is not known yet: commit again, as librdkafka asks
		}
		if isFenced(err) || isFatal(err) {
			return position{}, err
		}
		return abort(err)
	}
}

func isFatal(err error) bool {
	var ke kafka.Error
	return errors.As(err, &ke) && ke.IsFatal()
}

// produce enqueues m, waiting while librdkafka's queue is full.
func produce(p *kafka.Producer, m *kafka.Message) error {
	for {
		err := p.Produce(m, nil)
		var ke kafka.Error
		if errors.As(err, &ke) && ke.Code() == kafka.ErrQueueFull {
			p.Flush(100)
			continue
		}
		return err
	}
}

// retry runs f until it succeeds, ctx is cancelled, or it fails with a fenced or fatal
// Kafka error.
func (r *Relay) retry(ctx context.Context, log interface{ Warn(string, ...any) }, what string, f func() error) error {
	backoff := r.c.PollInterval
	for {
		err := f()
		if err == nil {
			return nil
		}
		if isFenced(err) {
			return ErrFenced
		}
		if isFatal(err) || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		log.Warn(what+" failed; retrying", "err", err, "backoff", backoff)
		sleep(ctx, backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
