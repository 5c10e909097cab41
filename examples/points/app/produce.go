package app

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// ProduceOptions configures Produce.
type ProduceOptions struct {
	Brokers  string
	Topic    string
	Events   int    // how many events. Defaults to 10000.
	Accounts int    // spread over this many accounts (the record key). Defaults to 100.
	Seed     uint64 // for the deltas and event ids. Defaults to 1.
	// Progress, when set, is called every 10% with the number of events delivered so far.
	Progress func(delivered int)
}

// Produce writes events with an idempotent producer and waits until every one is acknowledged.
// Event ids are unique per (seed, index).
func Produce(ctx context.Context, o ProduceOptions) (int, error) {
	if o.Events == 0 {
		o.Events = 10000
	}
	if o.Accounts == 0 {
		o.Accounts = 100
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":  o.Brokers,
		"enable.idempotence": true,
		"acks":               "all",
		"linger.ms":          5,
	})
	if err != nil {
		return 0, fmt.Errorf("producer: %w", err)
	}
	defer p.Close()
	rng := rand.New(rand.NewPCG(o.Seed, 42))
	dr := make(chan kafka.Event, 10000)
	delivered, failed := 0, 0
	step := max(o.Events/10, 1)
	wait := func(all bool) error {
		for (all && delivered+failed < o.Events) || len(dr) > 0 {
			select {
			case ev := <-dr:
				m := ev.(*kafka.Message)
				if m.TopicPartition.Error != nil {
					failed++
					return fmt.Errorf("delivery failed: %w", m.TopicPartition.Error)
				}
				delivered++
				if o.Progress != nil && delivered%step == 0 {
					o.Progress(delivered)
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	for i := 0; i < o.Events; i++ {
		e := Event{
			EventID:   fmt.Sprintf("e-%d-%d", o.Seed, i),
			AccountID: fmt.Sprintf("acct-%03d", rng.IntN(o.Accounts)),
			Delta:     int64(rng.IntN(100) + 1),
		}
		v, _ := json.Marshal(e)
		for {
			err := p.Produce(&kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: &o.Topic, Partition: kafka.PartitionAny},
				Key:            []byte(e.AccountID), Value: v,
			}, dr)
			if err == nil {
				break
			}
			if kerr, ok := err.(kafka.Error); ok && kerr.Code() == kafka.ErrQueueFull {
				p.Flush(100)
				if err := wait(false); err != nil {
					return delivered, err
				}
				continue
			}
			return delivered, fmt.Errorf("produce: %w", err)
		}
		if len(dr) > 5000 {
			if err := wait(false); err != nil {
				return delivered, err
			}
		}
	}
	if err := wait(true); err != nil {
		return delivered, err
	}
	return delivered, nil
}
