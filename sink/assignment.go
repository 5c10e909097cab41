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
type assignment struct {
	mu         sync.Mutex
	n          int
	emptySince time.Time // zero while not a member, or while holding partitions
}

// joined records the subscription: a member holding nothing yet.
func (a *assignment) joined(now time.Time) {
	a.mu.Lock()
	a.n, a.emptySince = 0, now
	a.mu.Unlock()
}

// left records the end of the membership (Run returning).
func (a *assignment) left() {
	a.mu.Lock()
	a.n, a.emptySince = 0, time.Time{}
	a.mu.Unlock()
}

// rebalanced records the consumer's assignment after a rebalance callback (poll goroutine,
// within Poll: the consumer is open).
func (a *assignment) rebalanced(c *kafka.Consumer, now time.Time) {
	parts, err := c.Assignment()
	if err != nil {
		return // keep what was known
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case len(parts) > 0:
		a.emptySince = time.Time{}
	case a.n > 0 || a.emptySince.IsZero():
		a.emptySince = now // the last partition went
	}
	a.n = len(parts)
}

// get returns the partitions assigned now and since when none have been.
func (a *assignment) get() (int, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n, a.emptySince
}

// onRebalance wraps the Balancer's callback so that each rebalance updates a.
func (a *assignment) onRebalance(cb kafka.RebalanceCb) kafka.RebalanceCb {
	return func(c *kafka.Consumer, ev kafka.Event) error {
		err := cb(c, ev)
		a.rebalanced(c, time.Now())
		return err
	}
}
