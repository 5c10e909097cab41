package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
)

// Report is what Verify found, computed from the log and the database only, never from the
// sink's counters.
type Report struct {
	Produced        int   // records in the log (read_committed), all partitions
	Applied         int   // distinct produced events found in the ledger
	Duplicates      int   // ledger rows beyond the first for an event
	Lost            int   // produced events missing from the ledger
	Unknown         int   // ledger rows whose event is not in the log
	BalanceMismatch int   // accounts whose balance differs from the log's sum
	Lag             int64 // sum over partitions of (log end - stored next offset)
}

// OK reports whether every event was applied exactly once and the sink caught up.
func (r Report) OK() bool {
	return r.Duplicates == 0 && r.Lost == 0 && r.Unknown == 0 && r.BalanceMismatch == 0 && r.Applied == r.Produced
}

// Print writes the report in the form make demo shows.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "produced: %d\napplied: %d\nduplicates: %d\nlost: %d\nunknown: %d\nbalance mismatches: %d\nlag: %d\n",
		r.Produced, r.Applied, r.Duplicates, r.Lost, r.Unknown, r.BalanceMismatch, r.Lag)
}

// VerifyOptions names what to compare.
type VerifyOptions struct {
	Brokers     string
	Topic       string
	DatabaseURL string
	Schema      string // the example's tables
	Pipeline    string // rows in OffsetsSchema.offsets
	// OffsetsSchema holds eosink's offsets table. Defaults to "eosink".
	OffsetsSchema string
}

// Verify reads every partition of the topic from the start to its end with read_committed,
// independently of the sink, and compares it with the ledger, the balances and the stored
// offsets.
func Verify(ctx context.Context, o VerifyOptions) (Report, error) {
	if o.OffsetsSchema == "" {
		o.OffsetsSchema = "eosink"
	}
	var rep Report
	logEvents, ends, err := readLog(ctx, o.Brokers, o.Topic)
	if err != nil {
		return rep, err
	}
	rep.Produced = len(logEvents)

	conn, err := pgx.Connect(ctx, o.DatabaseURL)
	if err != nil {
		return rep, fmt.Errorf("verify: connect: %w", err)
	}
	defer conn.Close(ctx)

	counts := map[string]int{}
	rows, err := conn.Query(ctx, "SELECT event_id, count(*) FROM "+pgx.Identifier{o.Schema, "ledger"}.Sanitize()+" GROUP BY event_id")
	if err != nil {
		return rep, fmt.Errorf("verify: read ledger: %w", err)
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return rep, err
		}
		counts[id] = n
	}
	if err := rows.Err(); err != nil {
		return rep, err
	}
	want := map[string]int64{}
	for id, e := range logEvents {
		want[e.AccountID] += e.Delta
		switch n := counts[id]; {
		case n == 0:
			rep.Lost++
		default:
			rep.Applied++
			rep.Duplicates += n - 1
		}
	}
	for id := range counts {
		if _, ok := logEvents[id]; !ok {
			rep.Unknown += counts[id]
		}
	}

	got := map[string]int64{}
	rows, err = conn.Query(ctx, "SELECT account_id, balance FROM "+pgx.Identifier{o.Schema, "balances"}.Sanitize())
	if err != nil {
		return rep, fmt.Errorf("verify: read balances: %w", err)
	}
	for rows.Next() {
		var id string
		var b int64
		if err := rows.Scan(&id, &b); err != nil {
			return rep, err
		}
		got[id] = b
	}
	if err := rows.Err(); err != nil {
		return rep, err
	}
	accounts := map[string]bool{}
	for a := range want {
		accounts[a] = true
	}
	for a := range got {
		accounts[a] = true
	}
	for a := range accounts {
		if want[a] != got[a] {
			rep.BalanceMismatch++
		}
	}

	for p, end := range ends {
		var next int64
		err := conn.QueryRow(ctx, "SELECT next_offset FROM "+pgx.Identifier{o.OffsetsSchema, "offsets"}.Sanitize()+
			" WHERE pipeline = $1 AND topic = $2 AND partition = $3", o.Pipeline, o.Topic, p).Scan(&next)
		if err == pgx.ErrNoRows {
			next = 0
		} else if err != nil {
			return rep, fmt.Errorf("verify: read offsets: %w", err)
		}
		if end > next {
			rep.Lag += end - next
		}
	}
	return rep, nil
}

// readLog reads all committed records of topic up to each partition's end at the time of the
// call. It returns events by id (the last one wins if an id repeats) and each partition's
// end offset (the last record's offset + 1, so that transaction markers do not count as lag).
func readLog(ctx context.Context, brokers, topic string) (map[string]Event, map[int32]int64, error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": brokers, "group.id": "eosink-verify", "enable.auto.commit": false,
		"isolation.level": "read_committed", "auto.offset.reset": "earliest", "enable.partition.eof": true,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("verify: consumer: %w", err)
	}
	defer c.Close()
	md, err := c.GetMetadata(&topic, false, 10000)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: metadata: %w", err)
	}
	var parts []kafka.TopicPartition
	ends := map[int32]int64{}
	highs := map[int32]int64{}
	for _, p := range md.Topics[topic].Partitions {
		low, high, err := c.QueryWatermarkOffsets(topic, p.ID, 10000)
		if err != nil {
			return nil, nil, fmt.Errorf("verify: watermarks: %w", err)
		}
		ends[p.ID] = low
		if high > low {
			highs[p.ID] = high
			parts = append(parts, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.Offset(low)})
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
	events := map[string]Event{}
	if len(parts) == 0 {
		return events, ends, nil
	}
	if err := c.Assign(parts); err != nil {
		return nil, nil, err
	}
	remaining := len(parts)
	deadline := time.Now().Add(2 * time.Minute)
	for remaining > 0 {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("verify: reading the log timed out with %d partitions unfinished", remaining)
		}
		switch e := c.Poll(200).(type) {
		case *kafka.Message:
			var ev Event
			if err := json.Unmarshal(e.Value, &ev); err == nil && ev.EventID != "" {
				events[ev.EventID] = ev
			}
			ends[e.TopicPartition.Partition] = int64(e.TopicPartition.Offset) + 1
		case kafka.PartitionEOF:
			if _, ok := highs[e.Partition]; ok {
				delete(highs, e.Partition)
				remaining--
			}
		case kafka.Error:
			if e.IsFatal() {
				return nil, nil, e
			}
		}
	}
	return events, ends, nil
}

// LogEnds returns each partition's last committed record offset + 1 (the log start for an
// empty partition), reading the topic with read_committed.
func LogEnds(ctx context.Context, brokers, topic string) (map[int32]int64, error) {
	_, ends, err := readLog(ctx, brokers, topic)
	return ends, err
}
