package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
)

// verdict is what the independent verifier found. It uses neither the sink's code nor its
// counters: it reads the log with read_committed and the database tables directly.
type verdict struct {
	Records    int   // committed records in the log
	Below      int   // log records below the stored next offsets (should all be applied)
	Duplicates int   // C1: ledger rows beyond the first for a (partition, offset)
	Lost       int   // C1: log records below next_offset with no ledger row
	Mismatch   int   // C1: ledger rows whose event differs from the log's at that offset
	Beyond     int   // C2: ledger rows at or beyond the stored next offset
	SumErrors  int   // C3: accounts whose balance differs from the log's sum below next_offset
	Lag        int64 // sum over partitions of (last record + 1 - next_offset)

	// Dead letters (OnPoison dead-letter): a record that is not an event (see event) below
	// next_offset must have exactly one dead letter, failed once; without one it counts as
	// Lost. A dead letter at or beyond next_offset counts as Beyond.
	DeadLetters       int // poison records below next_offset with their dead letter
	BadDeadLetters    int // dead letters of records that are events (a valid record dead-lettered)
	DeadLetterRepeats int // dead letters that failed more than once
}

func (v verdict) exact() bool {
	return v.Duplicates == 0 && v.Lost == 0 && v.Mismatch == 0 && v.Beyond == 0 && v.SumErrors == 0 &&
		v.BadDeadLetters == 0 && v.DeadLetterRepeats == 0
}

type logRecord struct {
	EventID   string `json:"event_id"`
	AccountID string `json:"account_id"`
	Delta     int64  `json:"delta"`
}

// event reports whether the record is an event, as the example defines one: JSON with an
// event_id and an account_id. Anything else is poison.
func (r logRecord) event() bool { return r.EventID != "" && r.AccountID != "" }

// check reads everything and compares. topic's partitions are read up to their end at the
// time of the call.
func check(ctx context.Context, brokers, databaseURL, topic, group, schema, offsetsSchema string) (verdict, error) {
	var v verdict
	logs, starts, ends, err := readPartitions(ctx, brokers, topic)
	if err != nil {
		return v, err
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return v, err
	}
	defer conn.Close(ctx)

	next := map[int32]int64{}
	rows, err := conn.Query(ctx, "SELECT partition, next_offset FROM "+pgx.Identifier{offsetsSchema, "offsets"}.Sanitize()+
		" WHERE pipeline = $1 AND topic = $2", group, topic)
	if err != nil {
		return v, err
	}
	for rows.Next() {
		var p int32
		var n int64
		if err := rows.Scan(&p, &n); err != nil {
			return v, err
		}
		next[p] = n
	}
	if err := rows.Err(); err != nil {
		return v, err
	}

	type key struct {
		p int32
		o int64
	}
	dead := map[key]bool{}
	rows, err = conn.Query(ctx, `SELECT partition, "offset", failures FROM `+pgx.Identifier{offsetsSchema, "dead_letters"}.Sanitize()+
		" WHERE pipeline = $1 AND topic = $2", group, topic)
	if err != nil {
		return v, err
	}
	for rows.Next() {
		var k key
		var failures int
		if err := rows.Scan(&k.p, &k.o, &failures); err != nil {
			return v, err
		}
		dead[k] = true
		if failures != 1 {
			v.DeadLetterRepeats++
		}
		if k.o >= next[k.p] {
			v.Beyond++
		}
	}
	if err := rows.Err(); err != nil {
		return v, err
	}
	seen := map[key]int{}
	// Balances must equal the log's sums; for rows applied before their records were deleted
	// from the log, the ledger's own account and delta stand in.
	want := map[string]int64{}
	rows, err = conn.Query(ctx, `SELECT partition, "offset", event_id, account_id, delta FROM `+pgx.Identifier{schema, "ledger"}.Sanitize())
	if err != nil {
		return v, err
	}
	for rows.Next() {
		var k key
		var id, account string
		var delta int64
		if err := rows.Scan(&k.p, &k.o, &id, &account, &delta); err != nil {
			return v, err
		}
		if k.o < starts[k.p] {
			want[account] += delta
		}
		seen[k]++
		if seen[k] > 1 {
			v.Duplicates++
		}
		if k.o >= next[k.p] {
			v.Beyond++
		}
		if r, ok := logs[k.p][k.o]; (!ok && k.o >= starts[k.p]) || (ok && r.EventID != id) {
			v.Mismatch++ // rows below the log start were applied before their records were deleted
		}
	}
	if err := rows.Err(); err != nil {
		return v, err
	}

	for p, recs := range logs {
		for o, r := range recs {
			v.Records++
			k := key{p, o}
			switch {
			case dead[k] && r.event():
				v.BadDeadLetters++
			case dead[k]:
				v.DeadLetters++
			}
			if o < next[p] {
				v.Below++
				if r.event() {
					want[r.AccountID] += r.Delta
				}
				if seen[k] == 0 && !(dead[k] && !r.event()) {
					v.Lost++
				}
			}
		}
	}
	got := map[string]int64{}
	rows, err = conn.Query(ctx, "SELECT account_id, balance FROM "+pgx.Identifier{schema, "balances"}.Sanitize())
	if err != nil {
		return v, err
	}
	for rows.Next() {
		var a string
		var b int64
		if err := rows.Scan(&a, &b); err != nil {
			return v, err
		}
		got[a] = b
	}
	if err := rows.Err(); err != nil {
		return v, err
	}
	for a := range union(want, got) {
		if want[a] != got[a] {
			v.SumErrors++
		}
	}
	for p, end := range ends {
		if end > next[p] {
			v.Lag += end - next[p]
		}
	}
	return v, nil
}

func union(a, b map[string]int64) map[string]bool {
	u := map[string]bool{}
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

// readPartitions reads every committed record of topic, by partition and offset, and each
// partition's end (last record + 1, or the log start when empty).
// It also returns each partition's log start.
func readPartitions(ctx context.Context, brokers, topic string) (logs map[int32]map[int64]logRecord, starts, ends map[int32]int64, err error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": brokers, "group.id": "eosink-chaos-verifier",
		"enable.auto.commit": false, "isolation.level": "read_committed", "enable.partition.eof": true})
	if err != nil {
		return nil, nil, nil, err
	}
	defer c.Close()
	md, err := c.GetMetadata(&topic, false, 10000)
	if err != nil {
		return nil, nil, nil, err
	}
	logs, starts, ends = map[int32]map[int64]logRecord{}, map[int32]int64{}, map[int32]int64{}
	var assign []kafka.TopicPartition
	for _, p := range md.Topics[topic].Partitions {
		low, high, err := c.QueryWatermarkOffsets(topic, p.ID, 10000)
		if err != nil {
			return nil, nil, nil, err
		}
		logs[p.ID] = map[int64]logRecord{}
		ends[p.ID] = low
		starts[p.ID] = low
		if high > low {
			assign = append(assign, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.Offset(low)})
		}
	}
	if len(assign) == 0 {
		return logs, starts, ends, nil
	}
	if err := c.Assign(assign); err != nil {
		return nil, nil, nil, err
	}
	left := len(assign)
	finished := map[int32]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for left > 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, nil, nil, fmt.Errorf("reading %s: %d partitions unfinished", topic, left)
		}
		switch e := c.Poll(200).(type) {
		case *kafka.Message:
			var r logRecord
			_ = json.Unmarshal(e.Value, &r)
			logs[e.TopicPartition.Partition][int64(e.TopicPartition.Offset)] = r
			ends[e.TopicPartition.Partition] = int64(e.TopicPartition.Offset) + 1
		case kafka.PartitionEOF:
			if !finished[e.Partition] {
				finished[e.Partition] = true
				left--
			}
		case kafka.Error:
			if e.IsFatal() {
				return nil, nil, nil, e
			}
		}
	}
	return logs, starts, ends, nil
}
