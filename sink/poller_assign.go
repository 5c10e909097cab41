package sink

import (
	"log/slog"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/rebalance"
)

// setLive records the worker of k for metrics (nil: none). A new worker means a new claim:
// the partition is no longer stopped.
func (p *poller) setLive(k partitionKey, w *worker) {
	p.liveMu.Lock()
	if w == nil {
		delete(p.live, k)
	} else {
		p.live[k] = w
	}
	p.liveMu.Unlock()
	if w != nil {
		p.stops.clear(k, w.epoch)
	}
}

// liveWorkers returns the running workers (any goroutine).
func (p *poller) liveWorkers() []*worker {
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	ws := make([]*worker, 0, len(p.live))
	for _, w := range p.live {
		ws = append(ws, w)
	}
	return ws
}

// drain stops every worker, letting queued batches commit within ShutdownTimeout.
func (p *poller) drain() {
	var parts []kafka.TopicPartition
	for k := range p.workers {
		parts = append(parts, kafka.TopicPartition{Topic: &k.topic, Partition: k.partition})
	}
	if len(parts) > 0 {
		p.stopWorkers(parts, false, p.cfg.ShutdownTimeout)
	}
}

// stopWorkers stops the workers of parts and waits for them: a graceful stop commits what is
// queued; after timeout, or at once when abort is set, in-flight transactions roll back.
func (p *poller) stopWorkers(parts []kafka.TopicPartition, abort bool, timeout time.Duration) {
	var ws []*worker
	var paused []kafka.TopicPartition
	for _, tp := range parts {
		k := partitionKey{*tp.Topic, tp.Partition}
		if _, ok := p.paused[k]; ok {
			// librdkafka keeps an application's pause across unassign and assign: resume
			// while still assigned, or the partition stays silent if it comes back to us.
			paused = append(paused, kafka.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
			delete(p.paused, k)
		}
		delete(p.contested, k)
		w := p.workers[k]
		if w == nil {
			continue
		}
		delete(p.workers, k)
		p.setLive(k, nil)
		ws = append(ws, w)
		if abort {
			w.cancel()
		} else {
			close(w.stop)
		}
	}
	if len(paused) > 0 {
		if err := p.consumer.Resume(paused); err != nil {
			p.log.Warn("resume before unassign failed", "err", err)
		}
	}
	awaitWorkers(ws, abort, timeout, p.log, p.clock.touch)
}

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

// Start, Stop and Failed, with Contested (poller_contest.go), make the poller the Balancer's
// rebalance.Lifecycle. They run on the poll goroutine, from within Poll.
var _ rebalance.Lifecycle = (*poller)(nil)

// Start begins consuming a partition claimed as c: a new worker at c's next offset.
func (p *poller) Start(c rebalance.Claim) {
	p.clock.touch() // a long rebalance is progress, not a hang
	p.m.claims.add(1)
	p.m.rebalance("assigned", 1)
	w := newWorker(p.wcfg, c.Topic, c.Partition, c.Epoch, c.NextOffset)
	w.topicID = c.TopicID
	p.workers[partitionKey{c.Topic, c.Partition}] = w
	p.setLive(partitionKey{c.Topic, c.Partition}, w)
	if p.kcommit != nil {
		p.kcommit.forget(c.Topic, c.Partition)
	}
	go w.run()
}

// Stop stops the workers of parts, revoked (their queued batches commit within
// RevokeTimeout) or lost (aborted at once).
func (p *poller) Stop(parts []kafka.TopicPartition, lost bool) {
	if lost {
		p.m.rebalance("lost", len(parts))
	} else {
		p.m.rebalance("revoked", len(parts))
	}
	p.stopWorkers(parts, lost, p.cfg.RevokeTimeout)
	for _, tp := range parts {
		p.stops.clear(partitionKey{*tp.Topic, tp.Partition}, 0) // no longer ours
	}
}

// Failed reports a partition the Balancer claimed but could not assign.
func (p *poller) Failed(err *rebalance.PartitionError) {
	p.stops.record(err.Topic, err.Partition, err)
}
