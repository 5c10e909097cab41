package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// partitions prints each topic's partition count, and fails when a topic is missing or when
// the -one topic has more than one partition (the transaction topic keeps commit order only
// in one partition).
func partitions(topics []string, one string) error {
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": os.Getenv("KAFKA_BOOTSTRAP_SERVERS")})
	if err != nil {
		return err
	}
	defer a.Close()
	md, err := a.GetMetadata(nil, true, 10000)
	if err != nil {
		return err
	}
	var s []string
	for _, t := range topics {
		m, ok := md.Topics[t]
		if !ok || m.Error.Code() != kafka.ErrNoError {
			return fmt.Errorf("no topic %s", t)
		}
		if t == one && len(m.Partitions) != 1 {
			return fmt.Errorf("topic %s has %d partitions; the transaction topic needs one (topic.creation.* settings of the connector, or create it first)", t, len(m.Partitions))
		}
		s = append(s, fmt.Sprintf("%s: %d", t, len(m.Partitions)))
	}
	fmt.Printf("partitions: %s\n", strings.Join(s, ", "))
	return nil
}
