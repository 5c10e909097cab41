package sink

import (
	"context"
	"errors"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eosink/eosink/rebalance"
)

// Operator resets while the sink runs (`eosink offsets set`).
//
// A reset moves a row's next_offset, bumps its epoch (fencing the current owner) and writes
// the owner "reset by OPERATOR (was INSTANCE)", then notifies rebalance.NotifyChannel. The
// sink learns of it in two ways: a worker whose commit is fenced, and a notification (for
// partitions with no traffic). Either way the poll goroutine reads the row; only when it
// names this sink's InstanceID as the fenced owner does it claim the partition again and
// seek to the new position. A fence by another instance (a zombie's case) leaves the
// partition stopped. Partitions stopped when they were claimed (out of range, topic
// recreated) were never assigned; they take a new position at their next assignment.

// requestRecheck asks the poll goroutine to look at a partition's row (any goroutine).
func (s *Sink) requestRecheck(k partitionKey) {
	select {
	case s.recheck <- k:
	default:
		s.recheckAll() // queue full: look at everything
	}
}

func (s *Sink) recheckAll() {
	select {
	case s.recheckEvery <- struct{}{}:
	default:
	}
}

// serveRechecks runs on the poll goroutine.
func (s *Sink) serveRechecks() {
	for {
		select {
		case k := <-s.recheck:
			s.reclaimIfReset(k)
		case <-s.recheckEvery:
			for k := range s.workers {
				s.reclaimIfReset(k)
			}
		default:
			return
		}
	}
}

// reclaimIfReset claims k again if an operator moved it since this instance claimed it.
func (s *Sink) reclaimIfReset(k partitionKey) {
	w := s.workers[k]
	if w == nil {
		return // revoked meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ClaimTimeout)
	defer cancel()
	pos, found, err := s.store.Peek(ctx, k.topic, k.partition) // the reset committed before its notice
	if err != nil || !found {
		if err != nil {
			s.log.Warn("could not read the offset row after a fence or a notice", "topic", k.topic, "partition", k.partition, "err", err)
		}
		return
	}
	if was, ok := rebalance.ResetFrom(pos.Owner); pos.Epoch == w.epoch || !ok || was != s.cfg.InstanceID {
		return // still ours, or taken by another instance: nothing to do here
	}
	// Abort the old worker: whatever it has in flight is fenced by the new epoch anyway. A
	// handler that ignores cancellation is left behind after a grace period.
	w.cancel()
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
		s.log.Error("a handler ignored cancellation; leaving it behind (its commits will be fenced)", "topic", k.topic, "partition", k.partition)
	}
	cl, err := s.store.Claim(ctx, k.topic, k.partition, "", func() (int64, error) {
		return 0, errors.New("offset row vanished")
	})
	if err != nil {
		s.log.Error("re-claim after an operator reset failed; partition stays stopped", "topic", k.topic, "partition", k.partition, "err", err)
		return
	}
	s.m.claims.add(1)
	nw := newWorker(s.wcfg, k.topic, k.partition, cl.Epoch, cl.NextOffset)
	s.workers[k] = nw
	s.setLive(k, nw)
	if _, ok := s.paused[k]; ok {
		delete(s.paused, k)
		_ = s.consumer.Resume([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition}})
	}
	s.mu.Lock()
	delete(s.failed, k)
	s.mu.Unlock()
	if s.kcommit != nil {
		s.kcommit.forget(k.topic, k.partition)
	}
	go nw.run()
	// With an infinite timeout, no record fetched for the old position reaches us afterwards.
	res, err := s.consumer.SeekPartitions([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition, Offset: kafka.Offset(cl.NextOffset)}})
	if err == nil && len(res) == 1 && res[0].Error != nil {
		err = res[0].Error
	}
	if err != nil {
		s.log.Error("seek after an operator reset failed; stopping the partition", "topic", k.topic, "partition", k.partition, "err", err)
		nw.cancel()
		<-nw.done
		s.recordFailure(k.topic, k.partition, err)
		return
	}
	s.log.Info("partition claimed again after an operator reset", "topic", k.topic, "partition", k.partition,
		"from_offset", w.next.Load(), "to_offset", cl.NextOffset, "epoch", cl.Epoch, "by", pos.Owner)
}

// listen waits for notifications of operator resets on a dedicated connection and asks the
// poll goroutine to look at every partition. It reconnects after errors until ctx ends.
func (s *Sink) listen(ctx context.Context) {
	backoff := s.cfg.RetryBackoff
	for ctx.Err() == nil {
		// A connection from the pool (its BeforeConnect hooks apply), taken out of it.
		var conn *pgx.Conn
		pc, err := s.pool.Acquire(ctx)
		if err == nil {
			conn = pc.Hijack()
		}
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{rebalance.NotifyChannel}.Sanitize())
		}
		if err == nil {
			backoff = s.cfg.RetryBackoff
			s.recheckAll() // anything missed while not listening
			for {
				var n *pgconn.Notification
				n, err = conn.WaitForNotification(ctx)
				if err != nil {
					break
				}
				if n.Payload == s.cfg.Pipeline {
					s.recheckAll()
				}
			}
		}
		if conn != nil {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(cctx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("listening for operator resets failed; retrying", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.cfg.MaxRetryBackoff)
	}
}
