package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/offsets"
)

// Target is where Plan moves positions: Earliest, Latest, Offset or Time; ParseTarget reads
// one from text. The zero Target is invalid.
type Target struct {
	kind   string // earliest, latest, offset, time
	offset int64
	time   time.Time
}

// Earliest targets each partition's log start: the oldest record the broker still keeps.
func Earliest() Target { return Target{kind: "earliest"} }

// Latest targets each partition's log end (its last stable offset): what is not yet applied
// is skipped.
func Latest() Target { return Target{kind: "latest"} }

// Offset targets offset n in each partition; Plan refuses it where it is outside the log.
func Offset(n int64) Target { return Target{kind: "offset", offset: n} }

// Time targets, in each partition, the first record whose timestamp is at or after t (the
// log end when there is none), as the broker's offsets-for-times finds it.
func Time(t time.Time) Target { return Target{kind: "time", time: t} }

// ParseTarget parses earliest, latest, an offset, or an RFC 3339 time.
func ParseTarget(s string) (Target, error) {
	switch strings.ToLower(s) {
	case "earliest":
		return Earliest(), nil
	case "latest":
		return Latest(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return Target{}, fmt.Errorf("offset %d is negative", n)
		}
		return Offset(n), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return Time(t), nil
	}
	return Target{}, fmt.Errorf("%q is not earliest, latest, an offset or an RFC 3339 time (2026-11-30T06:00:00Z)", s)
}

// Selector names the partitions to move: a whole pipeline, one topic of it, or one partition
// of that topic.
type Selector struct {
	Pipeline  string // required
	Topic     string // empty: every topic the pipeline has rows for
	Partition *int32 // nil: every partition
	// AcceptNewTopic stores each selected topic's current id with the move: after a topic
	// was deleted and created again, the claim refuses the partition (ErrTopicRecreated)
	// until an operator accepts the new topic this way. The audit row keeps both ids.
	AcceptNewTopic bool
}

// Change is one move of a partition's position, as planned by Plan or made by Apply.
type Change struct {
	Pipeline  string `json:"pipeline"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      *int64 `json:"from"` // nil: no row yet
	To        int64  `json:"to"`
	LogStart  int64  `json:"log_start"`
	LogEnd    int64  `json:"log_end"`
	TopicID   string `json:"topic_id,omitempty"` // with Selector.AcceptNewTopic: the id stored with the move
}

// ErrMoved means a row vanished between planning and applying, or appeared while Apply was
// creating it (a sink claimed the partition for the first time at that moment); plan again.
var ErrMoved = errors.New("a position moved while it was being changed")

// Plan computes the changes for sel and target without writing anything. A target outside
// a partition's log is refused.
func (c *Client) Plan(ctx context.Context, sel Selector, target Target) ([]Change, error) {
	if sel.Pipeline == "" {
		return nil, &InputError{Field: "pipeline", Msg: "a pipeline is required"}
	}
	partition := int32(-1) // every partition
	if sel.Partition != nil {
		partition = *sel.Partition
	}
	current := map[key]int64{}
	rows, err := c.ops.NextOffsets(ctx, sel.Pipeline, sel.Topic, partition)
	if err != nil {
		return nil, fmt.Errorf("read offsets: %w", err)
	}
	for _, r := range rows {
		current[key{r.Topic, r.Partition}] = r.NextOffset
	}
	var tps []kafka.TopicPartition
	if sel.Topic != "" {
		parts, err := c.partitions(sel.Topic)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			if partition < 0 || p == partition {
				tps = append(tps, kafka.TopicPartition{Topic: &sel.Topic, Partition: p})
			}
		}
		if len(tps) == 0 {
			return nil, &InputError{Field: "partition", Msg: fmt.Sprintf("topic %q has no partition %d", sel.Topic, partition)}
		}
	} else {
		for k := range current {
			topic := k.topic
			tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: k.partition})
		}
		if len(tps) == 0 {
			return nil, &InputError{Field: "topic", Msg: fmt.Sprintf("pipeline %q has no stored positions; name a -topic to create them", sel.Pipeline)}
		}
	}
	ranges, err := c.logRanges(ctx, tps)
	if err != nil {
		return nil, err
	}
	var times map[key]int64
	if target.kind == "time" {
		if times, err = c.offsetsForTime(ctx, tps, target.time); err != nil {
			return nil, err
		}
	}
	var ids map[string]string
	if sel.AcceptNewTopic {
		if ids, err = c.topicIDs(ctx, tps); err != nil {
			return nil, err
		}
	}
	var out []Change
	for _, tp := range tps {
		k := key{*tp.Topic, tp.Partition}
		rg := ranges[k]
		if rg.err != "" {
			return nil, fmt.Errorf("%s[%d]: %s", k.topic, k.partition, rg.err)
		}
		ch := Change{Pipeline: sel.Pipeline, Topic: k.topic, Partition: k.partition, LogStart: rg.start, LogEnd: rg.end, TopicID: ids[k.topic]}
		if n, ok := current[k]; ok {
			ch.From = &n
		}
		switch target.kind {
		case "earliest":
			ch.To = rg.start
		case "latest":
			ch.To = rg.end
		case "offset":
			ch.To = target.offset
		case "time":
			ch.To = times[k]
		default:
			return nil, fmt.Errorf("unknown target %q", target.kind)
		}
		if ch.To < rg.start || ch.To > rg.end {
			return nil, &InputError{Field: "to", Msg: fmt.Sprintf("refusing to move %s[%d] to %d: outside the log, which holds %d..%d", k.topic, k.partition, ch.To, rg.start, rg.end)}
		}
		out = append(out, ch)
	}
	sortChanges(out)
	return out, nil
}

// Apply writes the changes in one transaction and returns them with From set to the
// position each partition really had: it locks each row (waiting for a running sink's batch
// in flight, at most 10s) and moves it from wherever it is then. Each epoch is bumped so
// that the current owner is fenced; a change with a TopicID stores it as the topic's id; a
// recorded stop (stopped_*) is cleared; rebalance.NotifyChannel is notified. The audit row of
// each change is written by the offsets table's trigger (migration 7), with operator and
// reason as this transaction declares them and the session's role and address as the server
// knows them; Apply refuses a schema older than that migration. A row created by a sink
// between Plan and Apply is moved like any other (From is where the sink created it). Apply
// returns ErrMoved when a row that Plan saw was deleted, or when a row Plan did not see is
// created by a sink between Apply's read and its insert.
func (c *Client) Apply(ctx context.Context, changes []Change, operator, reason string) ([]Change, error) {
	if strings.TrimSpace(operator) == "" || strings.TrimSpace(reason) == "" {
		field := "reason"
		if strings.TrimSpace(operator) == "" {
			field = "operator"
		}
		return nil, &InputError{Field: field, Msg: "an operator and a reason are required: they go to the audit table"}
	}
	out := make([]Change, len(changes))
	copy(out, changes)
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '10s'"); err != nil {
			return err
		}
		if err := c.ops.DeclareAudit(ctx, tx, operator, reason); err != nil {
			return err
		}
		pipelines := map[string]bool{}
		for i := range out {
			ch := &out[i]
			m := offsets.Move{Pipeline: ch.Pipeline, Topic: ch.Topic, Partition: ch.Partition, To: ch.To, TopicID: ch.TopicID}
			from, owner, found, err := c.ops.Lock(ctx, tx, ch.Pipeline, ch.Topic, ch.Partition)
			switch {
			case err != nil:
				return fmt.Errorf("%s[%d]: lock the offset row: %w", ch.Topic, ch.Partition, err)
			case !found:
				if ch.From != nil {
					return fmt.Errorf("%s[%d]: the row was deleted: %w", ch.Topic, ch.Partition, ErrMoved)
				}
				created, err := c.ops.Create(ctx, tx, m, operator)
				if err != nil {
					return err
				}
				if !created {
					return fmt.Errorf("%s[%d]: %w", ch.Topic, ch.Partition, ErrMoved)
				}
			default:
				ch.From = &from
				if err := c.ops.Set(ctx, tx, m, operator, owner); err != nil {
					return err
				}
			}
			pipelines[ch.Pipeline] = true
		}
		for p := range pipelines {
			if err := offsets.Notify(ctx, tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *Client) partitions(topic string) ([]int32, error) {
	a, err := kafka.NewAdminClient(c.kafkaConfig())
	if err != nil {
		return nil, err
	}
	defer a.Close()
	md, err := a.GetMetadata(&topic, false, 10000)
	if err != nil {
		return nil, fmt.Errorf("metadata of %q: %w", topic, err)
	}
	tm, ok := md.Topics[topic]
	if !ok || tm.Error.Code() != kafka.ErrNoError {
		return nil, &InputError{Field: "topic", Msg: fmt.Sprintf("topic %q does not exist on %s", topic, c.brokers())}
	}
	var out []int32
	for _, p := range tm.Partitions {
		out = append(out, p.ID)
	}
	return out, nil
}

// offsetsForTime resolves, for each partition, the first offset whose timestamp is at or
// after t (the log end when there is none), with the broker's offsets-for-times.
func (c *Client) offsetsForTime(ctx context.Context, tps []kafka.TopicPartition, t time.Time) (map[key]int64, error) {
	a, err := kafka.NewAdminClient(c.kafkaConfig())
	if err != nil {
		return nil, err
	}
	defer a.Close()
	req := map[kafka.TopicPartition]kafka.OffsetSpec{}
	for _, tp := range tps {
		req[tp] = kafka.NewOffsetSpecForTimestamp(t.UnixMilli())
	}
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := a.ListOffsets(qctx, req, kafka.SetAdminIsolationLevel(kafka.IsolationLevelReadCommitted))
	if err != nil {
		return nil, fmt.Errorf("offsets for time %s: %w", t.Format(time.RFC3339), err)
	}
	ends, err := c.logRanges(ctx, tps)
	if err != nil {
		return nil, err
	}
	out := map[key]int64{}
	for tp, info := range res.ResultInfos {
		k := key{*tp.Topic, tp.Partition}
		if info.Error.Code() != kafka.ErrNoError {
			return nil, fmt.Errorf("%s[%d]: %s", k.topic, k.partition, info.Error)
		}
		if info.Offset < 0 { // no record at or after t
			out[k] = ends[k].end
		} else {
			out[k] = int64(info.Offset)
		}
	}
	return out, nil
}

// topicIDs returns the current id of each topic in tps.
func (c *Client) topicIDs(ctx context.Context, tps []kafka.TopicPartition) (map[string]string, error) {
	a, err := kafka.NewAdminClient(c.kafkaConfig())
	if err != nil {
		return nil, err
	}
	defer a.Close()
	names := make([]string, 0, len(tps))
	for _, tp := range tps {
		names = append(names, *tp.Topic)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	ids := make(map[string]string, len(names))
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := a.DescribeTopics(qctx, kafka.NewTopicCollectionOfTopicNames(names))
	if err != nil {
		return nil, fmt.Errorf("describe topics %v: %w", names, err)
	}
	for _, d := range res.TopicDescriptions {
		if d.Error.Code() != kafka.ErrNoError {
			return nil, fmt.Errorf("describe topic %q: %s", d.Name, d.Error)
		}
		ids[d.Name] = d.TopicID.String()
	}
	return ids, nil
}

func sortChanges(cs []Change) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Topic != cs[j].Topic {
			return cs[i].Topic < cs[j].Topic
		}
		return cs[i].Partition < cs[j].Partition
	})
}

// Reset plans and applies, planning again on ErrMoved, up to attempts times. It returns the
// changes made, with the positions they moved from.
func (c *Client) Reset(ctx context.Context, sel Selector, target Target, operator, reason string, attempts int) ([]Change, error) {
	for i := 1; ; i++ {
		changes, err := c.Plan(ctx, sel, target)
		if err != nil {
			return nil, err
		}
		changes, err = c.Apply(ctx, changes, operator, reason)
		if errors.Is(err, ErrMoved) && i < attempts {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		return changes, nil
	}
}
