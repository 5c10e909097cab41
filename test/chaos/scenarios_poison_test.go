package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
)

// producePoison writes, until ctx ends, chunks of 20 records: 18 events and 2 records that
// are not events (bad JSON, a missing account), every one with header keys that are not
// UTF-8. It returns a func that waits for the producer and returns how many poison records it
// wrote.
func (r *run) producePoison(ctx context.Context, pause time.Duration) (wait func() int) {
	done := make(chan int, 1)
	go func() {
		poison := 0
		defer func() { done <- poison }()
		p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": r.p.Env.Brokers, "enable.idempotence": true,
			"acks": "all", "linger.ms": 5, "go.logs.channel.enable": false})
		if err != nil {
			r.t.Errorf("producer: %v", err)
			return
		}
		defer p.Close()
		dr := make(chan kafka.Event, 100)
		for chunk := 0; ctx.Err() == nil; chunk++ {
			for i := range 20 {
				hs := []kafka.Header{{Key: fmt.Sprintf("\xff\xfe-trace-%d", i), Value: []byte{0xc3, 0x28}}, {Key: "caf\xe9", Value: []byte("v")}}
				e := app.Event{EventID: fmt.Sprintf("h-%d-%d-%d", r.seed, chunk, i), AccountID: fmt.Sprintf("acct-%03d", i), Delta: int64(i + 1)}
				v, _ := json.Marshal(e)
				switch i {
				case 7:
					v = []byte(`{"event_id": "broken`)
				case 15:
					v = []byte(fmt.Sprintf(`{"event_id": "p-%d-%d", "delta": 1}`, r.seed, chunk))
				}
				if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &r.p.Topic, Partition: kafka.PartitionAny},
					Key: []byte(e.AccountID), Value: v, Headers: hs}, dr); err != nil {
					r.t.Errorf("produce: %v", err)
					return
				}
			}
			for range 20 {
				if m := (<-dr).(*kafka.Message); m.TopicPartition.Error != nil {
					r.t.Errorf("produce: %v", m.TopicPartition.Error)
					return
				}
			}
			poison += 2
			r.produced.Add(20)
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}()
	return func() int { return <-done }
}

// 12. Records with header keys that are not UTF-8, some of them poison, under the dead-letter
// policy, while sinks are killed at every commit boundary: every event applied once, every
// poison record dead-lettered once with its header keys intact, no valid record dead-lettered.
func scenarioNonUTF8HeaderDeadLetter(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 4)
	ctx, stop := context.WithCancel(context.Background())
	waitEvents := r.produce(ctx, 300, 300*time.Millisecond)
	waitPoison := r.producePoison(ctx, 200*time.Millisecond)
	args := base("-on-poison", "dead-letter")
	steady := r.sink(args)
	for end := time.Now().Add(phase); time.Now().Before(end); {
		fp := boundaries[r.rng.IntN(len(boundaries))]
		victim := r.sink(args, fmt.Sprintf("EOSINK_FAILPOINTS=%s=kill@%d", fp, 1+r.rng.IntN(4)))
		err, exited := victim.WaitFor(20 * time.Second)
		switch {
		case exited && testbed.KilledBySIGKILL(err) && victim.Contains("failpoint fired: "+fp+" kill"):
			r.fault("failpoint kill at " + fp)
		case !exited:
			victim.Signal(syscall.SIGKILL)
			if err, _ := victim.WaitFor(10 * time.Second); testbed.KilledBySIGKILL(err) {
				r.fault("random SIGKILL")
			}
		default:
			t.Fatalf("victim exited without the failpoint: %v", err)
		}
	}
	poison := 0
	r.endFaults(stop, func() { waitEvents(); poison = waitPoison() })
	r.finish(120*time.Second, func(v verdict) string {
		if v.DeadLetters != poison {
			return fmt.Sprintf("%d poison records dead-lettered, want all %d produced", v.DeadLetters, poison)
		}
		return checkDeadLetterHeaders(r, poison)
	})
	steady.StopClean(60 * time.Second)
}

// checkDeadLetterHeaders checks that every dead letter kept its two header keys, the first
// not UTF-8, byte for byte.
func checkDeadLetterHeaders(r *run, want int) string {
	conn, err := pgx.Connect(context.Background(), r.p.Env.DatabaseURL)
	if err != nil {
		return err.Error()
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), "SELECT header_keys FROM "+pgx.Identifier{r.p.OffsetsSchema, "dead_letters"}.Sanitize()+
		" WHERE pipeline = $1", r.p.Group)
	if err != nil {
		return err.Error()
	}
	n := 0
	keys, err := pgx.CollectRows(rows, pgx.RowTo[[][]byte])
	if err != nil {
		return err.Error()
	}
	for _, k := range keys {
		if len(k) == 2 && !utf8.Valid(k[0]) && string(k[1]) == "caf\xe9" {
			n++
		}
	}
	if n != want {
		return fmt.Sprintf("%d dead letters with their header keys intact, want %d", n, want)
	}
	return ""
}
