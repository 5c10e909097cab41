package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// position is the last outbox row a shard published: the relay publishes a shard in (xid,
// id) order, so the pair is its position. The zero position is before every row.
type position struct {
	Xid uint64 `json:"-"`
	ID  int64  `json:"id"`
}

// positionRecord is the value written to the position topic in each Kafka transaction.
type positionRecord struct {
	Xid    string    `json:"xid"` // decimal: a uint64 does not fit JSON numbers everywhere
	ID     int64     `json:"id"`
	Relay  string    `json:"relay"`
	Shard  int       `json:"shard"`
	Shards int       `json:"shards"`
	Owner  string    `json:"owner"`
	At     time.Time `json:"at"`
	// Generation names the outbox_generations row the relay committed in the database before
	// this transaction (see generation.go). Positions written before migration 3 have none.
	Generation string `json:"generation,omitempty"`
}

func (p position) less(q position) bool {
	return p.Xid < q.Xid || (p.Xid == q.Xid && p.ID < q.ID)
}

func (p position) String() string { return fmt.Sprintf("(xid %d, id %d)", p.Xid, p.ID) }

func (p position) xidText() string { return strconv.FormatUint(p.Xid, 10) }

func encodePosition(p position, gen, relay string, shard, shards int, owner string) ([]byte, error) {
	return json.Marshal(positionRecord{Xid: p.xidText(), ID: p.ID, Relay: relay, Shard: shard, Shards: shards, Owner: owner,
		At: time.Now().UTC(), Generation: gen})
}

// decodePosition returns a position record's position and generation ("" in a record an
// older relay wrote).
func decodePosition(b []byte) (position, string, error) {
	var r positionRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return position{}, "", err
	}
	x, err := strconv.ParseUint(r.Xid, 10, 64)
	if err != nil {
		return position{}, "", fmt.Errorf("xid %q: %w", r.Xid, err)
	}
	return position{Xid: x, ID: r.ID}, r.Generation, nil
}

// ensurePositionTopic creates the compacted position topic when it is missing.
func ensurePositionTopic(ctx context.Context, kcfg kafka.ConfigMap, topic string) error {
	a, err := kafka.NewAdminClient(clientConfig(kcfg))
	if err != nil {
		return fmt.Errorf("relay: admin client: %w", err)
	}
	defer a.Close()
	res, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: 1, ReplicationFactor: -1,
		Config: map[string]string{"cleanup.policy": "compact", "segment.ms": "600000", "min.cleanable.dirty.ratio": "0.1"}}})
	if err != nil {
		return fmt.Errorf("relay: create position topic %s: %w", topic, err)
	}
	if c := res[0].Error.Code(); c != kafka.ErrNoError && c != kafka.ErrTopicAlreadyExists {
		return fmt.Errorf("relay: create position topic %s: %w", topic, res[0].Error)
	}
	return nil
}

// clientConfig copies the connection properties of kcfg for an admin client or a consumer.
func clientConfig(kcfg kafka.ConfigMap) *kafka.ConfigMap {
	c := kafka.ConfigMap{}
	maps.Copy(c, kcfg)
	return &c
}

// readPosition reads the position topic with read_committed from its start up to its end as
// it is now, and returns the last position stored under key, with its generation. Call it only after the shard's
// producer has initialised its transactions: that fences any earlier producer with the same
// transactional.id and ends its open transaction, so no older transaction of ours can
// commit after the read. found is false when the topic holds none.
//
// The end is the high watermark read after that (highWatermarks), not the last stable
// offset: every shard of every relay writes its positions into this one partition, so
// another shard's open transaction holds the last stable offset back, and a committed
// position of ours may lie past it. Reading only to the last stable offset would return an
// older position of ours and publish its events again. So the read waits, with
// read_committed, until every transaction with a record below the high watermark has
// ended (at most the transaction timeout of its producer); log gets one INFO line when it
// does.
func readPosition(ctx context.Context, log *slog.Logger, kcfg kafka.ConfigMap, topic, key string) (pos position, gen string, found bool, err error) {
	cc := clientConfig(kcfg)
	for k, v := range map[string]kafka.ConfigValue{"group.id": "eosink-relay-position-reader", "enable.auto.commit": false,
		"isolation.level": "read_committed", "enable.partition.eof": true, "auto.offset.reset": "earliest"} {
		(*cc)[k] = v
	}
	for _, k := range producerOnly {
		delete(*cc, k)
	}
	c, err := kafka.NewConsumer(cc)
	if err != nil {
		return pos, "", false, fmt.Errorf("relay: position reader: %w", err)
	}
	defer c.Close()
	md, err := c.GetMetadata(&topic, false, 10000)
	if err != nil {
		return pos, "", false, fmt.Errorf("relay: position topic %s metadata: %w", topic, err)
	}
	tm, ok := md.Topics[topic]
	if !ok || tm.Error.Code() != kafka.ErrNoError {
		return pos, "", false, fmt.Errorf("relay: position topic %s: %v", topic, tm.Error)
	}
	highs, err := highWatermarks(kcfg, topic, tm.Partitions)
	if err != nil {
		return pos, "", false, fmt.Errorf("relay: position topic %w", err)
	}
	ends := map[int32]int64{}
	var tps []kafka.TopicPartition
	for _, p := range tm.Partitions {
		if high := highs[p.ID]; high > 0 {
			ends[p.ID] = high
			tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.OffsetBeginning})
		}
	}
	if len(tps) == 0 {
		return pos, "", false, nil
	}
	if err := c.Assign(tps); err != nil {
		return pos, "", false, fmt.Errorf("relay: position topic %s: assign: %w", topic, err)
	}
	waiting := false
	for len(ends) > 0 {
		if err := ctx.Err(); err != nil {
			return pos, "", false, fmt.Errorf("relay: reading position topic %s (a transaction still open on it holds read_committed back): %w", topic, err)
		}
		switch e := c.Poll(200).(type) {
		case *kafka.Message:
			p := e.TopicPartition.Partition
			if string(e.Key) == key {
				if pos, gen, err = decodePosition(e.Value); err != nil {
					return pos, "", false, fmt.Errorf("relay: position topic %s[%d]@%d: %w", topic, p, e.TopicPartition.Offset, err)
				}
				found = true
			}
			if end, ok := ends[p]; ok && int64(e.TopicPartition.Offset) >= end-1 {
				delete(ends, p)
			}
		case kafka.PartitionEOF:
			end, ok := ends[e.Partition]
			switch {
			case ok && int64(e.Offset) >= end:
				delete(ends, e.Partition)
			case ok && !waiting:
				waiting = true
				log.Info("reading the position waits for a transaction still open on the position topic: committed positions may lie past it",
					"position_topic", topic, "partition", e.Partition, "last_stable_offset", int64(e.Offset), "high_watermark", end)
			}
		case kafka.Error:
			if e.IsFatal() {
				return pos, "", false, fmt.Errorf("relay: position topic %s: %w", topic, e)
			}
		}
	}
	return pos, gen, found, nil
}

// highWatermarks returns the high watermark of each of topic's partitions: the offset after
// the last record written, whether its transaction committed, aborted or is still open.
//
// It asks through a client of its own with isolation.level=read_uncommitted: librdkafka's
// QueryWatermarkOffsets sends the client's isolation level in its ListOffsets request, and
// for a read_committed client the broker answers with the last stable offset instead (the
// first offset of the oldest open transaction). A reader that stops there misses the
// records committed after an open transaction began.
func highWatermarks(kcfg kafka.ConfigMap, topic string, partitions []kafka.PartitionMetadata) (map[int32]int64, error) {
	cc := clientConfig(kcfg)
	for k, v := range map[string]kafka.ConfigValue{"group.id": "eosink-relay-watermarks", "enable.auto.commit": false,
		"isolation.level": "read_uncommitted"} {
		(*cc)[k] = v
	}
	for _, k := range producerOnly {
		delete(*cc, k)
	}
	c, err := kafka.NewConsumer(cc)
	if err != nil {
		return nil, fmt.Errorf("%s: watermark reader: %w", topic, err)
	}
	defer c.Close()
	highs := make(map[int32]int64, len(partitions))
	for _, p := range partitions {
		_, high, err := c.QueryWatermarkOffsets(topic, p.ID, 10000)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] watermarks: %w", topic, p.ID, err)
		}
		highs[p.ID] = high
	}
	return highs, nil
}

// producerOnly are the producer properties deleted from the relay's Kafka settings before
// they configure a consumer (librdkafka would warn about them).
var producerOnly = []string{"linger.ms", "acks", "compression.type", "transaction.timeout.ms", "batch.size", "message.timeout.ms"}

// isFenced reports whether err says a newer producer took our transactional.id.
func isFenced(err error) bool {
	var ke kafka.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke.Code() {
	case kafka.ErrFenced, kafka.ErrProducerFenced, kafka.ErrInvalidProducerEpoch:
		return true
	}
	return false
}
