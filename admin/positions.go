package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/internal/offsets"
)

// Position is one row of the offsets table with what the broker says of its partition. The
// JSON names are those of `eosink offsets list -json`.
type Position struct {
	Pipeline   string    `json:"pipeline"`
	Topic      string    `json:"topic"`
	Partition  int32     `json:"partition"`
	NextOffset int64     `json:"next_offset"` // the offset of the next record to apply
	Epoch      int64     `json:"epoch"`       // bumped by each claim and each move
	Owner      string    `json:"owner"`       // the sink instance that claimed it, or who moved it
	UpdatedAt  time.Time `json:"last_commit"` // the last commit or move
	LogStart   int64     `json:"log_start"`
	LogEnd     int64     `json:"log_end"`         // last stable offset (read_committed)
	Lag        int64     `json:"lag"`             // committed records at or after next_offset; 0 when only markers remain
	Error      string    `json:"error,omitempty"` // the broker's error for the partition; Lag is then 0
	// LagSeconds is the age of the oldest record not yet applied: now minus the Kafka
	// timestamp of the first committed record at or after NextOffset (OldestUnapplied); 0
	// when Lag is 0, -1 when that record could not be read in time or has no timestamp.
	// With the topic's message.timestamp.type=CreateTime (Kafka's default) the timestamp is
	// the producer's, with LogAppendTime the broker's.
	LagSeconds float64 `json:"lag_seconds"`
	// OldestUnapplied is the timestamp of that record and TimestampType its kind ("create"
	// or "log_append"); zero and empty when Lag is 0 or it is unknown.
	OldestUnapplied time.Time `json:"oldest_unapplied,omitzero"`
	TimestampType   string    `json:"timestamp_type,omitempty"`
	// KafkaCommitted is the offset the consumer group named like the pipeline has committed
	// in Kafka (advisory: written with CommitToKafka; the sink reads it only to create a
	// missing row under the kafka-committed policy); nil if none.
	KafkaCommitted *int64 `json:"kafka_committed"`
	// OwnerAlive says whether the owner is a sink instance running now: its heartbeat in the
	// instances table is recent (three heartbeats) and it has not shut down.
	OwnerAlive bool `json:"owner_alive"`
	// Stopped is set while the partition is stopped: why (a sink.Stop* word, the label of
	// eosink_partition_stopped), since when, by which instance, and what to do.
	Stopped *Stop `json:"stopped,omitempty"`
	// Unowned is set when no running sink instance holds the partition: its owner is gone
	// (or an operator moved it and the instance it names is gone), with why and what to do
	// (unowned.go).
	Unowned *Unowned `json:"unowned,omitempty"`
}

// Stop is why a partition stopped, as the sink that stopped it recorded.
type Stop struct {
	Reason string    `json:"reason"`
	Error  string    `json:"error"`
	At     time.Time `json:"at"`
	By     string    `json:"by"`
	Remedy string    `json:"remedy"`
}

// Diverged reports whether Kafka's committed offset for the group differs from the stored
// position. With CommitToKafka it catches up within the commit interval; a lasting
// divergence means Kafka's tools show a wrong lag.
func (p Position) Diverged() bool {
	return p.KafkaCommitted != nil && *p.KafkaCommitted != p.NextOffset
}

// List returns the stored positions of pipeline (all pipelines when empty), with the log's
// range and the lag of each partition.
func (c *Client) List(ctx context.Context, pipeline string) ([]Position, error) {
	rows, err := c.ops.List(ctx, pipeline)
	if err != nil {
		return nil, fmt.Errorf("read offsets: %w", err)
	}
	ps := make([]Position, len(rows))
	for i, r := range rows {
		ps[i] = Position{Pipeline: r.Pipeline, Topic: r.Topic, Partition: r.Partition, NextOffset: r.NextOffset, Epoch: r.Epoch,
			Owner: r.Owner, UpdatedAt: r.UpdatedAt, OwnerAlive: r.OwnerAlive}
		if st := r.Stopped; st != nil {
			ps[i].Stopped = &Stop{Reason: st.Reason, Error: st.Error, At: st.At, By: st.By, Remedy: engine.StopRemedy(st.Reason)}
		}
	}
	if len(ps) == 0 {
		return ps, nil
	}
	// Several pipelines may read the same partition: ask the broker once per partition.
	var tps []kafka.TopicPartition
	seen := map[key]bool{}
	for i := range ps {
		if k := (key{ps[i].Topic, ps[i].Partition}); !seen[k] {
			seen[k] = true
			tps = append(tps, kafka.TopicPartition{Topic: &ps[i].Topic, Partition: ps[i].Partition})
		}
	}
	ranges, err := c.logRanges(ctx, tps)
	if err != nil {
		return nil, err
	}
	behind := map[string][]int{} // by pipeline: one consumer assignment cannot hold a partition twice
	for i := range ps {
		rg := ranges[key{ps[i].Topic, ps[i].Partition}]
		ps[i].LogStart, ps[i].LogEnd = rg.start, rg.end
		if rg.err != "" {
			ps[i].Error = rg.err
			continue
		}
		if ps[i].NextOffset < rg.end {
			ps[i].Lag = rg.end - ps[i].NextOffset
			behind[ps[i].Pipeline] = append(behind[ps[i].Pipeline], i)
		}
	}
	if err := c.kafkaCommitted(ctx, ps); err != nil {
		return nil, err
	}
	// Offsets between next_offset and the log end may hold only transaction markers or
	// aborted records: that is no lag. Read the first committed record of each: none means
	// no lag, and its timestamp is the lag in seconds (lagtime.go).
	for _, idx := range behind {
		if err := c.oldestUnapplied(ctx, ps, idx); err != nil {
			return nil, err
		}
	}
	return ps, c.markUnowned(ctx, pipeline, ps)
}

// kafkaCommitted fills KafkaCommitted from each pipeline's consumer group of the same name.
func (c *Client) kafkaCommitted(ctx context.Context, ps []Position) error {
	byPipeline := map[string][]int{}
	for i := range ps {
		byPipeline[ps[i].Pipeline] = append(byPipeline[ps[i].Pipeline], i)
	}
	a, err := kafka.NewAdminClient(c.kafkaConfig())
	if err != nil {
		return fmt.Errorf("kafka admin client: %w", err)
	}
	defer a.Close()
	for pipeline, idx := range byPipeline {
		req := kafka.ConsumerGroupTopicPartitions{Group: pipeline}
		for _, i := range idx {
			req.Partitions = append(req.Partitions, kafka.TopicPartition{Topic: &ps[i].Topic, Partition: ps[i].Partition})
		}
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := a.ListConsumerGroupOffsets(qctx, []kafka.ConsumerGroupTopicPartitions{req})
		cancel()
		if err != nil {
			return fmt.Errorf("committed offsets of group %q: %w", pipeline, err)
		}
		got := map[key]int64{}
		for _, g := range res.ConsumerGroupsTopicPartitions {
			for _, tp := range g.Partitions {
				if tp.Error == nil && tp.Offset >= 0 {
					got[key{*tp.Topic, tp.Partition}] = int64(tp.Offset)
				}
			}
		}
		for _, i := range idx {
			if off, ok := got[key{ps[i].Topic, ps[i].Partition}]; ok {
				ps[i].KafkaCommitted = &off
			}
		}
	}
	return nil
}

type key struct {
	topic     string
	partition int32
}

type logRange struct {
	start, end int64
	err        string
}

// logRanges asks the broker for each partition's log start and last stable offset.
func (c *Client) logRanges(ctx context.Context, tps []kafka.TopicPartition) (map[key]logRange, error) {
	a, err := kafka.NewAdminClient(c.kafkaConfig())
	if err != nil {
		return nil, fmt.Errorf("kafka admin client: %w", err)
	}
	defer a.Close()
	out := map[key]logRange{}
	for _, spec := range []kafka.OffsetSpec{kafka.EarliestOffsetSpec, kafka.LatestOffsetSpec} {
		req := map[kafka.TopicPartition]kafka.OffsetSpec{}
		for _, tp := range tps {
			req[tp] = spec
		}
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := a.ListOffsets(qctx, req, kafka.SetAdminIsolationLevel(kafka.IsolationLevelReadCommitted))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list offsets on %s: %w", c.brokers(), err)
		}
		for tp, info := range res.ResultInfos {
			k := key{*tp.Topic, tp.Partition}
			r := out[k]
			switch {
			case info.Error.Code() != kafka.ErrNoError:
				r.err = info.Error.String()
			case spec == kafka.EarliestOffsetSpec:
				r.start = int64(info.Offset)
			default:
				r.end = int64(info.Offset)
			}
			out[k] = r
		}
	}
	return out, nil
}

// Lease is a set's lease (a cdc replica in consistency: transaction): who holds it, under
// which epoch, and how long ago it was renewed. Holder is empty when it was released.
type Lease = offsets.Lease

// Leases returns the leases of pipeline (every pipeline's when empty).
func (c *Client) Leases(ctx context.Context, pipeline string) ([]Lease, error) {
	return c.ops.Leases(ctx, pipeline)
}
