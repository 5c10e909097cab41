package sink

import (
	"errors"
	"log/slog"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/rebalance"
)

// setLive records the worker of k for metrics (nil: none). A new worker means a new claim:
// the partition is no longer stopped.
func (s *Sink) setLive(k partitionKey, w *worker) {
	s.mu.Lock()
	if w == nil {
		delete(s.live, k)
	} else {
		s.live[k] = w
	}
	s.mu.Unlock()
	if w != nil {
		s.clearStop(k, w.epoch)
	}
}

func (s *Sink) liveWorkers() []*worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := make([]*worker, 0, len(s.live))
	for _, w := range s.live {
		ws = append(ws, w)
	}
	return ws
}

// drain stops every worker, letting queued batches commit within ShutdownTimeout.
func (s *Sink) drain() {
	var parts []kafka.TopicPartition
	for k := range s.workers {
		parts = append(parts, kafka.TopicPartition{Topic: &k.topic, Partition: k.partition})
	}
	if len(parts) > 0 {
		s.stopWorkers(parts, false, s.cfg.ShutdownTimeout)
	}
}

// stopWorkers stops the workers of parts and waits for them: a graceful stop commits what is
// queued; after timeout, or at once when abort is set, in-flight transactions roll back.
func (s *Sink) stopWorkers(parts []kafka.TopicPartition, abort bool, timeout time.Duration) {
	var ws []*worker
	var paused []kafka.TopicPartition
	for _, p := range parts {
		k := partitionKey{*p.Topic, p.Partition}
		if _, ok := s.paused[k]; ok {
			// librdkafka keeps an application's pause across unassign and assign: resume
			// while still assigned, or the partition stays silent if it comes back to us.
			paused = append(paused, kafka.TopicPartition{Topic: p.Topic, Partition: p.Partition})
			delete(s.paused, k)
		}
		delete(s.contested, k)
		w := s.workers[k]
		if w == nil {
			continue
		}
		delete(s.workers, k)
		s.setLive(k, nil)
		ws = append(ws, w)
		if abort {
			w.cancel()
		} else {
			close(w.stop)
		}
	}
	if len(paused) > 0 {
		if err := s.consumer.Resume(paused); err != nil {
			s.log.Warn("resume before unassign failed", "err", err)
		}
	}
	awaitWorkers(ws, abort, timeout, s.log, func() { s.touch() })
}

// stopGrace is how long a worker aborted after the timeout still gets before it is left
// behind.
var stopGrace = 5 * time.Second

// awaitWorkers waits for stopping workers; aborted says they were cancelled already. Past
// timeout it aborts what is still running: its transaction rolls back and the next owner
// resumes from the stored offset. A handler that ignores its context gets stopGrace more; then
// it is left behind, and the epoch fences whatever it does later. progress is called as each
// worker is done (a long drain is not a hang).
func awaitWorkers(ws []*worker, aborted bool, timeout time.Duration, log *slog.Logger, progress func()) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, w := range ws {
		for waiting := true; waiting; {
			select {
			case <-w.done:
				waiting = false
			case <-deadline.C:
				if aborted {
					log.Error("a handler ignored cancellation; leaving it behind (its commits will be fenced)",
						"topic", w.topic, "partition", w.partition)
					waiting = false
					continue
				}
				log.Warn("in-flight batches did not finish in time; aborting them", "timeout", timeout)
				for _, w := range ws {
					w.cancel()
				}
				aborted = true
				deadline.Reset(stopGrace)
			}
		}
		w.cancel() // releases the context
		progress()
	}
}

func (s *Sink) partitionFailed(w *worker, err error) {
	if errors.Is(err, ErrFenced) && w.stopping() {
		// Told to stop on revoke while committing what was queued, and the next owner came
		// first: the partition is no longer ours, so this is no error of ours.
		s.log.Info("queued batch fenced after the partition was revoked; the new owner applies it", "topic", w.topic,
			"partition", w.partition, "epoch", w.epoch)
		return
	}
	s.recordFailure(w.topic, w.partition, err) // logs it, with the remedy
	if errors.Is(err, ErrFenced) {
		s.requestRecheck(partitionKey{w.topic, w.partition}) // an operator's reset is claimed again
	}
}

// stopping reports whether the worker was told to stop (revoke, shutdown).
func (w *worker) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// lifecycle is the Sink seen by the rebalance.Balancer. Its methods run on the poll goroutine.
type lifecycle Sink

func (l *lifecycle) Start(c rebalance.Claim) {
	s := (*Sink)(l)
	s.touch() // a long rebalance is progress, not a hang
	s.m.claims.add(1)
	s.m.rebalance("assigned", 1)
	w := newWorker(s.wcfg, c.Topic, c.Partition, c.Epoch, c.NextOffset)
	w.topicID = c.TopicID
	s.workers[partitionKey{c.Topic, c.Partition}] = w
	s.setLive(partitionKey{c.Topic, c.Partition}, w)
	if s.kcommit != nil {
		s.kcommit.forget(c.Topic, c.Partition)
	}
	go w.run()
}

func (l *lifecycle) Stop(parts []kafka.TopicPartition, lost bool) {
	s := (*Sink)(l)
	if lost {
		s.m.rebalance("lost", len(parts))
	} else {
		s.m.rebalance("revoked", len(parts))
	}
	s.stopWorkers(parts, lost, s.cfg.RevokeTimeout)
	for _, p := range parts {
		s.clearStop(partitionKey{*p.Topic, p.Partition}, 0) // no longer ours
	}
}

func (l *lifecycle) Failed(err *rebalance.PartitionError) {
	(*Sink)(l).recordFailure(err.Topic, err.Partition, err)
}
