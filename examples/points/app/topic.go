package app

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// EnsureTopic creates topic with the given partitions (replication factor 1) unless it exists.
func EnsureTopic(ctx context.Context, brokers, topic string, partitions int) error {
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}})
	if err != nil {
		return fmt.Errorf("create topic %q: %w", topic, err)
	}
	for _, r := range res {
		if c := r.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrTopicAlreadyExists {
			return fmt.Errorf("create topic %q: %w", topic, r.Error)
		}
	}
	return nil
}
