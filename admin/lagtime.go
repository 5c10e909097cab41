package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Lag in seconds: the age of the oldest record not yet applied, as PostgreSQL's replay_lag
// is the age of what a standby has not replayed. List reads one record per lagging
// partition, the first committed one at or after the stored next offset, with one consumer
// assigned to them all, within firstRecordTimeout.

// firstRecordTimeout bounds the reads of the first unapplied records of one pipeline.
const firstRecordTimeout = 30 * time.Second

// oldestUnapplied reads, for the partitions of ps at the given indexes (one pipeline's: one
// assignment cannot hold a partition twice), the first committed record between the stored
// next offset and the log end. A partition with none (only transaction markers or aborted
// records remain) has no lag: Lag is set to 0. One with a record gets its timestamp as
// OldestUnapplied and its age as LagSeconds. One not read within firstRecordTimeout keeps
// the offset distance as Lag and gets LagSeconds -1 (unknown).
func (c *Client) oldestUnapplied(ctx context.Context, ps []Position, idx []int) error {
	cfg := c.kafkaConfig()
	for k, v := range map[string]kafka.ConfigValue{"group.id": "eosink-ops", "enable.auto.commit": false,
		"isolation.level": "read_committed", "enable.partition.eof": true, "auto.offset.reset": "error"} {
		(*cfg)[k] = v
	}
	cons, err := kafka.NewConsumer(cfg)
	if err != nil {
		return fmt.Errorf("kafka consumer: %w", err)
	}
	defer cons.Close()
	var assign []kafka.TopicPartition
	at := map[key]int{}
	for _, i := range idx {
		assign = append(assign, kafka.TopicPartition{Topic: &ps[i].Topic, Partition: ps[i].Partition, Offset: kafka.Offset(ps[i].NextOffset)})
		at[key{ps[i].Topic, ps[i].Partition}] = i
		ps[i].LagSeconds = -1 // until its record is read
	}
	if err := cons.Assign(assign); err != nil {
		return err
	}
	done := map[key]bool{}
	deadline := time.Now().Add(firstRecordTimeout)
	for len(done) < len(assign) && ctx.Err() == nil && time.Now().Before(deadline) {
		switch e := cons.Poll(200).(type) {
		case *kafka.Message:
			k := key{*e.TopicPartition.Topic, e.TopicPartition.Partition}
			if done[k] {
				continue
			}
			done[k] = true
			if i, ok := at[k]; ok {
				setAge(&ps[i], e.Timestamp, e.TimestampType, time.Now())
			}
		case kafka.PartitionEOF:
			k := key{*e.Topic, e.Partition}
			if !done[k] {
				done[k] = true
				if i, ok := at[k]; ok {
					ps[i].Lag, ps[i].LagSeconds = 0, 0
				}
			}
		}
	}
	return nil
}

// setAge sets p's OldestUnapplied, TimestampType and LagSeconds from the first unapplied
// record's timestamp, as of now. A timestamp in the future (a producer's clock ahead, or an
// explicit CreateTime) counts as no age.
func setAge(p *Position, ts time.Time, typ kafka.TimestampType, now time.Time) {
	switch typ {
	case kafka.TimestampCreateTime:
		p.TimestampType = "create"
	case kafka.TimestampLogAppendTime:
		p.TimestampType = "log_append"
	default:
		return // no timestamp: LagSeconds stays -1
	}
	p.OldestUnapplied = ts
	p.LagSeconds = max(now.Sub(ts).Seconds(), 0)
}
