package relay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/outbox"
)

// ResyncClockMargin widens the window of Kafka records Resync reads, for clock differences
// between the database's host (created_at) and the relay's (record timestamps).
const ResyncClockMargin = 10 * time.Minute

// ResyncReport is what Resync found and did for one shard.
type ResyncReport struct {
	Shard int
	// Rewound is false when the database holds the generation of the shard's Kafka position
	// (or the position has none): Resync changed nothing.
	Rewound bool
	// From is the last position the database is known to have been published to: its latest
	// generation's, or the Kafka position when that is lower. To is the new position.
	From, To string
	// InDoubt counts the rows between From and the Kafka position: published before the
	// database went back, or written since into transaction ids it reuses. InKafka of them
	// were found in Kafka by event id and not published again.
	InDoubt, InKafka int
	// Published counts the rows Resync published, in one Kafka transaction with To.
	Published int
	// Phantoms are event ids of this shard in Kafka, published since the database's latest
	// generation was written, that its outbox does not hold: events from commits the
	// database no longer has (or rows cleanup deleted, when retention is shorter than that).
	Phantoms []string
}

// Resync is the remedy for a shard stopped with ErrDatabaseRewound; run it with every relay
// of c.Name stopped (`eosink relay -config FILE -resync`). For each shard of c.Own it claims
// the shard and initialises its transactional producer (which fences any relay still
// running), reads the position from Kafka and, when the database does not hold its
// generation:
//
//   - starts From the position of the database's latest generation (rows at or below it are
//     published; rows written since have higher transaction ids);
//   - reads every finished row after From; the rows at or below the Kafka position are in
//     doubt: those whose event id is in Kafka (read with read_committed from the oldest of
//     their created_at, less ResyncClockMargin) are not published again, the others are;
//   - commits a new generation, then publishes the rest and the new position To (below the
//     snapshot's xmin, so rows still in flight follow through the relay) in one Kafka
//     transaction: a failure leaves nothing, and Resync can run again.
//
// It reports the event ids in Kafka that the database lost (phantoms) and does not touch
// them: what they announced never happened in the database now; see docs/outbox.md.
func Resync(ctx context.Context, c Config) ([]ResyncReport, error) {
	c.Registerer = nil
	r, err := New(c)
	if err != nil {
		return nil, err
	}
	pool, err := r.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	r.pool = pool
	if err := r.checkTable(ctx); err != nil {
		return nil, err
	}
	var out []ResyncReport
	for _, s := range r.c.Own {
		rep, err := r.resyncShard(ctx, s)
		if err != nil {
			return out, &ShardError{Shard: s, Err: fmt.Errorf("resync: %w", err)}
		}
		r.c.Logger.Info("relay resync", "shard", s, "rewound", rep.Rewound, "from", rep.From, "to", rep.To, "in_doubt", rep.InDoubt,
			"in_kafka", rep.InKafka, "published", rep.Published, "phantoms", len(rep.Phantoms))
		if len(rep.Phantoms) > 0 {
			r.c.Logger.Warn("events in Kafka from commits the database no longer has (phantoms): see docs/outbox.md",
				"shard", s, "event_ids", rep.Phantoms[:min(len(rep.Phantoms), 100)])
		}
		out = append(out, rep)
	}
	return out, nil
}

func (r *Relay) resyncShard(ctx context.Context, shard int) (ResyncReport, error) {
	rep := ResyncReport{Shard: shard}
	epoch, err := r.claim(ctx, shard)
	if err != nil {
		return rep, err
	}
	tid := r.c.Name + "-" + strconv.Itoa(shard)
	p, err := r.newProducer(tid)
	if err != nil {
		return rep, err
	}
	defer p.Close()
	kctx, cancel := context.WithTimeout(ctx, 2*r.c.TransactionTimeout+10*time.Second)
	defer cancel()
	if err := p.InitTransactions(kctx); err != nil {
		return rep, fmt.Errorf("init transactions: %w", err)
	}
	if err := r.checkClaim(ctx, shard, epoch); err != nil {
		return rep, err
	}
	pos, genName, found, err := readPosition(kctx, r.c.Logger.With("shard", shard), r.c.Kafka, r.c.PositionTopic, tid)
	if err != nil {
		return rep, err
	}
	rep.From, rep.To = pos.String(), pos.String()
	if !found || genName == "" {
		return rep, nil
	}
	if _, err := r.holdsGeneration(ctx, shard, pos, genName); !errors.Is(err, ErrDatabaseRewound) {
		return rep, err
	}
	rep.Rewound = true

	// From: the position of the database's latest generation, or the Kafka one if lower.
	from := pos
	var lx, lastGenAt = "", time.Time{}
	var lid int64
	err = r.pool.QueryRow(ctx, `SELECT last_xid::text, last_id, created_at FROM `+r.gens+` WHERE relay = $1 AND shard = $2
ORDER BY seq DESC LIMIT 1`, r.c.Name, shard).Scan(&lx, &lid, &lastGenAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		from = position{}
	case err != nil:
		return rep, err
	default:
		x, err := strconv.ParseUint(lx, 10, 64)
		if err != nil {
			return rep, err
		}
		if g := (position{Xid: x, ID: lid}); g.less(from) {
			from = g
		}
	}
	rep.From = from.String()

	// Every finished row after From, and the snapshot's xmin, in one snapshot.
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return rep, err
	}
	defer conn.Release()
	var rows []row
	var xmin uint64
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var x string
		if err := tx.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&x); err != nil {
			return err
		}
		var err error
		if xmin, err = strconv.ParseUint(x, 10, 64); err != nil {
			return err
		}
		q, err := tx.Query(ctx, `SELECT o.xid::text AS xid_text, o.id, o.topic, o.key, o.value, o.header_keys, o.header_values, o.event_id, o.created_at
FROM `+r.table+` o WHERE o.shard = $1 AND (o.xid, o.id) > ($2::text::xid8, $3) AND o.xid < $4::text::xid8 ORDER BY o.xid, o.id`,
			shard, from.xidText(), from.ID, x)
		if err != nil {
			return err
		}
		rows, err = scanRows(q)
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("read the outbox: %w", err)
	}
	to := position{Xid: xmin - 1, ID: math.MaxInt64}
	if !from.less(to) {
		to = from
	}

	// The rows in doubt, looked up in Kafka by event id.
	since := lastGenAt
	var topics []string
	for _, w := range rows {
		if !pos.less(w.pos) {
			rep.InDoubt++
			if since.IsZero() || w.created.Before(since) {
				since = w.created
			}
		}
		if !slices.Contains(topics, w.topic) {
			topics = append(topics, w.topic)
		}
	}
	var more []string
	if err := r.pool.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT topic), '{}') FROM `+r.table+` WHERE shard = $1`, shard).Scan(&more); err != nil {
		return rep, err
	}
	for _, t := range more {
		if !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	if !since.IsZero() {
		since = since.Add(-ResyncClockMargin)
	}
	inKafka, err := eventIDsSince(ctx, r.c.Kafka, topics, since) // as long as the topics take to read
	if err != nil {
		return rep, err
	}
	var send []row
	for _, w := range rows {
		if _, ok := inKafka[w.eventID]; ok && !pos.less(w.pos) {
			rep.InKafka++
			continue
		}
		send = append(send, w)
	}

	// Phantoms: this shard's ids in Kafka since the latest generation the database holds
	// that its outbox does not hold.
	var candidates []string
	for id, k := range inKafka {
		if !k.at.Before(lastGenAt.Add(-ResyncClockMargin)) && outbox.Shard(k.key, id, r.c.Shards) == shard {
			candidates = append(candidates, id)
		}
	}
	if len(candidates) > 0 {
		var held []string
		if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(event_id), '{}') FROM `+r.table+` WHERE shard = $1 AND event_id = ANY($2)`,
			shard, candidates).Scan(&held); err != nil {
			return rep, err
		}
		for _, id := range candidates {
			if !slices.Contains(held, id) {
				rep.Phantoms = append(rep.Phantoms, id)
			}
		}
		slices.Sort(rep.Phantoms)
	}

	gen, err := r.writeGeneration(ctx, conn, shard, to)
	if err != nil {
		return rep, err
	}
	if err := r.checkClaim(ctx, shard, epoch); err != nil {
		return rep, err
	}
	if _, err := r.publish(context.WithoutCancel(ctx), p, tid, shard, gen.name, send, to); err != nil {
		return rep, fmt.Errorf("publish %d rows and the position %s: %w", len(send), to, err)
	}
	rep.Published, rep.To = len(send), to.String()
	return rep, nil
}

// kafkaEvent is where an event id was seen in Kafka.
type kafkaEvent struct {
	key []byte
	at  time.Time
}

// eventIDsSince reads topics with read_committed from the offsets of since (the start when
// zero) to their high watermarks as they are now (highWatermarks: not the last stable
// offset, past which an open transaction of another producer hides committed events), and
// returns the event ids of the records that carry one.
func eventIDsSince(ctx context.Context, kcfg kafka.ConfigMap, topics []string, since time.Time) (map[string]kafkaEvent, error) {
	ids := map[string]kafkaEvent{}
	if len(topics) == 0 {
		return ids, nil
	}
	cc := clientConfig(kcfg)
	for k, v := range map[string]kafka.ConfigValue{"group.id": "eosink-relay-resync", "enable.auto.commit": false,
		"isolation.level": "read_committed", "enable.partition.eof": true, "auto.offset.reset": "earliest"} {
		(*cc)[k] = v
	}
	for _, k := range producerOnly {
		delete(*cc, k)
	}
	c, err := kafka.NewConsumer(cc)
	if err != nil {
		return nil, fmt.Errorf("resync reader: %w", err)
	}
	defer c.Close()
	ends := map[string]int64{}
	var want []kafka.TopicPartition
	for _, topic := range topics {
		md, err := c.GetMetadata(&topic, false, 10000)
		if err != nil {
			return nil, fmt.Errorf("topic %s metadata: %w", topic, err)
		}
		highs, err := highWatermarks(kcfg, topic, md.Topics[topic].Partitions)
		if err != nil {
			return nil, fmt.Errorf("topic %w", err)
		}
		for _, p := range md.Topics[topic].Partitions {
			if high := highs[p.ID]; high > 0 {
				ends[partitionKey(topic, p.ID)] = high
				want = append(want, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.Offset(since.UnixMilli())})
			}
		}
	}
	if len(want) == 0 {
		return ids, nil
	}
	if since.IsZero() {
		for i := range want {
			want[i].Offset = kafka.OffsetBeginning
		}
	} else if want, err = c.OffsetsForTimes(want, 10000); err != nil {
		return nil, fmt.Errorf("offsets for %s: %w", since, err)
	}
	left := map[string]int64{}
	var assign []kafka.TopicPartition
	for _, tp := range want {
		end := ends[partitionKey(*tp.Topic, tp.Partition)]
		if tp.Offset == kafka.OffsetEnd || (tp.Offset >= 0 && int64(tp.Offset) >= end) {
			continue // nothing at or after since
		}
		left[partitionKey(*tp.Topic, tp.Partition)] = end
		assign = append(assign, tp)
	}
	if len(assign) == 0 {
		return ids, nil
	}
	if err := c.Assign(assign); err != nil {
		return nil, fmt.Errorf("assign: %w", err)
	}
	for len(left) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading the events topics (a transaction still open on them holds read_committed back): %w", err)
		}
		switch e := c.Poll(200).(type) {
		case *kafka.Message:
			k := partitionKey(*e.TopicPartition.Topic, e.TopicPartition.Partition)
			for _, h := range e.Headers {
				if h.Key == outbox.EventIDHeader {
					ids[string(h.Value)] = kafkaEvent{key: e.Key, at: e.Timestamp}
				}
			}
			if end, ok := left[k]; ok && int64(e.TopicPartition.Offset) >= end-1 {
				delete(left, k)
			}
		case kafka.PartitionEOF:
			k := partitionKey(*e.Topic, e.Partition)
			if end, ok := left[k]; ok && int64(e.Offset) >= end {
				delete(left, k)
			}
		case kafka.Error:
			if e.IsFatal() {
				return nil, e
			}
		}
	}
	return ids, nil
}

func partitionKey(topic string, p int32) string { return topic + "\x00" + strconv.Itoa(int(p)) }
