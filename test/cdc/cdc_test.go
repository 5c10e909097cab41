package cdc

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/internal/testbed"
)

func waitTopics(t *testing.T, brokers string, topics []string) {
	t.Helper()
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	testbed.Eventually(t, 90*time.Second, "Debezium's topics", func() (bool, string) {
		md, err := a.GetMetadata(nil, true, 5000)
		if err != nil {
			return false, err.Error()
		}
		for _, tp := range topics {
			if m, ok := md.Topics[tp]; !ok || m.Error.Code() != kafka.ErrNoError {
				return false, "no topic " + tp
			}
		}
		return true, ""
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = a.DeleteTopics(ctx, topics)
	})
}

func cli(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(eosinkBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("eosink %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// earliest reads up to n records from the start of each partition of topic, as they are
// (key and value bytes), to be republished.
func earliest(t *testing.T, brokers, topic string, partitions, n int) []testbed.Msg {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": brokers, "group.id": "republish-" + topic,
		"enable.auto.commit": false, "go.logs.channel.enable": false})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var tps []kafka.TopicPartition
	for p := range partitions {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: int32(p), Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(tps); err != nil {
		t.Fatal(err)
	}
	var out []testbed.Msg
	got := map[int32]int{}
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < partitions*n && time.Now().Before(deadline) {
		ev := c.Poll(200)
		m, ok := ev.(*kafka.Message)
		if !ok || m.Value == nil || got[m.TopicPartition.Partition] >= n {
			continue
		}
		got[m.TopicPartition.Partition]++
		out = append(out, testbed.Msg{Partition: m.TopicPartition.Partition, Key: m.Key, Value: m.Value})
	}
	if len(out) == 0 {
		t.Fatalf("no record read from %s", topic)
	}
	return out
}

// caughtUp waits until the pipeline has no lag on any partition (eosink lag -json).
func caughtUp(t *testing.T, databaseURL, brokers, schema, pipeline string) {
	t.Helper()
	testbed.Eventually(t, 90*time.Second, "lag 0", func() (bool, string) {
		out := cli(t, "lag", "-database-url", databaseURL, "-brokers", brokers, "-schema", schema, "-pipeline", pipeline, "-json")
		var ps []struct {
			Lag   int64  `json:"lag"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(out), &ps); err != nil || len(ps) == 0 {
			return false, fmt.Sprint(err, out)
		}
		for _, p := range ps {
			if p.Lag != 0 || p.Error != "" {
				return false, out
			}
		}
		return true, ""
	})
}
