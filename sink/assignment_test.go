package sink

import (
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func tps(topic string, parts ...int32) []kafka.TopicPartition {
	out := make([]kafka.TopicPartition, len(parts))
	for i, p := range parts {
		out[i] = kafka.TopicPartition{Topic: &topic, Partition: p}
	}
	return out
}

// The count follows the rebalance events, incremental and eager alike, and the wrapper never
// asks the consumer (it is given none here: a call on it would panic). Consumer.Assignment
// from the final revocation inside Close once blocked a shutdown.
func TestAssignmentFollowsTheEventsWithoutTheConsumer(t *testing.T) {
	var a assignment
	t0 := time.Unix(1000, 0)
	a.joined(t0)
	if n, since := a.get(); n != 0 || !since.Equal(t0) {
		t.Fatalf("joined: %d partitions, empty since %v; want 0 since %v", n, since, t0)
	}
	calls := 0
	cb := a.onRebalance(func(c *kafka.Consumer, ev kafka.Event) error { calls++; return nil })
	step := func(ev kafka.Event, wantN int, wantEmptySince time.Time) {
		t.Helper()
		if err := cb(nil, ev); err != nil {
			t.Fatal(err)
		}
		if n, since := a.get(); n != wantN || !since.Equal(wantEmptySince) {
			t.Fatalf("after %v: %d partitions, empty since %v; want %d since %v", ev, n, since, wantN, wantEmptySince)
		}
	}
	// Incremental: partitions come and go a few at a time.
	step(kafka.AssignedPartitions{Partitions: tps("a", 0, 1, 2)}, 3, time.Time{})
	step(kafka.AssignedPartitions{Partitions: tps("b", 0)}, 4, time.Time{})
	step(kafka.RevokedPartitions{Partitions: tps("a", 1)}, 3, time.Time{})
	step(kafka.AssignedPartitions{Partitions: tps("a", 2)}, 3, time.Time{}) // again: no double count
	before := time.Now()
	if err := cb(nil, kafka.RevokedPartitions{Partitions: append(tps("a", 0, 2), tps("b", 0)...)}); err != nil {
		t.Fatal(err)
	}
	if n, since := a.get(); n != 0 || since.Before(before) {
		t.Fatalf("after the last revocation: %d partitions, empty since %v; want 0 since at least %v", n, since, before)
	}
	// Eager: all revoked, then all assigned.
	step(kafka.AssignedPartitions{Partitions: tps("a", 0, 1, 2, 3)}, 4, time.Time{})
	before = time.Now()
	if err := cb(nil, kafka.RevokedPartitions{Partitions: tps("a", 0, 1, 2, 3)}); err != nil {
		t.Fatal(err)
	}
	if n, since := a.get(); n != 0 || since.Before(before) {
		t.Fatalf("after the eager revocation: %d partitions, empty since %v; want 0 since at least %v", n, since, before)
	}
	// Other events leave the count alone.
	_, s := a.get()
	step(kafka.PartitionEOF{}, 0, s)
	if calls != 8 {
		t.Fatalf("the Balancer's callback ran %d times, want 8", calls)
	}
	a.left()
	if n, since := a.get(); n != 0 || !since.IsZero() {
		t.Fatalf("left: %d partitions, empty since %v; want 0 and zero", n, since)
	}
}
