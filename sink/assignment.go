package sink

import (
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// assignment is what the consumer group gives this instance, for Stats: how many partitions
// it assigns here now, and since when it has assigned none while Run is a member. A member
// that joined (or restarted after a kill -9) holds nothing until the group rebalances; after
// a kill that is up to session.timeout.ms from the dead member's last heartbeat, and the
// progress line says so (Stats.UnassignedSince).
//
// The count follows the rebalance events alone: an assignment adds its partitions, a
// revocation removes its partitions. That holds for eager rebalances (each revocation takes
// all, each assignment gives all) and incremental ones alike, and never asks the consumer:
// Consumer.Assignment during Close's final revocation can block until the close is done.
type assignment struct {
	mu         sync.Mutex
	parts      map[partitionKey]struct{}
	emptySince time.Time // zero while not a member, or while holding partitions
}

// joined records the subscription: a member holding nothing yet.
func (a *assignment) joined(now time.Time) {
	a.mu.Lock()
	a.parts, a.emptySince = nil, now
	a.mu.Unlock()
}

// left records the end of the membership (Run returning).
func (a *assignment) left() {
	a.mu.Lock()
	a.parts, a.emptySince = nil, time.Time{}
	a.mu.Unlock()
}

// event applies a rebalance event to the count.
func (a *assignment) event(ev kafka.Event, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	before := len(a.parts)
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		if a.parts == nil {
			a.parts = make(map[partitionKey]struct{}, len(e.Partitions))
		}
		for _, p := range e.Partitions {
			if p.Topic != nil {
				a.parts[partitionKey{*p.Topic, p.Partition}] = struct{}{}
			}
		}
	case kafka.RevokedPartitions:
		for _, p := range e.Partitions {
			if p.Topic != nil {
				delete(a.parts, partitionKey{*p.Topic, p.Partition})
			}
		}
	default:
		return
	}
	switch {
	case len(a.parts) > 0:
		a.emptySince = time.Time{}
	case before > 0 || a.emptySince.IsZero():
		a.emptySince = now // the last partition went
	}
}

// get returns the partitions assigned now and since when none have been.
func (a *assignment) get() (int, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.parts), a.emptySince
}

// onRebalance wraps the Balancer's callback so that each rebalance updates a.
func (a *assignment) onRebalance(cb kafka.RebalanceCb) kafka.RebalanceCb {
	return func(c *kafka.Consumer, ev kafka.Event) error {
		err := cb(c, ev)
		a.event(ev, time.Now())
		return err
	}
}
