package sink

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/eosink/eosink/rebalance"
)

// Contested partitions: assigned here in Kafka, but the offsets row names another claim.
//
// A claim is made on the condition that the row is as it was when the assignment began
// (offsets.Store.ClaimAt), so a rebalance callback that outlasted the group's timeouts
// gives way to the partition's next owner instead of fencing it. That condition cannot
// settle every race: the stale callback may claim first, before the rightful owner, whose
// claim is then abandoned; or the stale callback may have begun only after the next owner's
// claim. Either way the rightful owner is left with a partition assigned in Kafka whose row
// belongs to a claim that goes nowhere: its instance learns at its next poll that it lost
// the assignment, and stops.
//
// So a partition whose claim was abandoned (poller.Contested), or whose worker was fenced
// by another instance's claim (at a commit, or, for an idle partition, seen by checkEpochs
// with the heartbeat), is contested: it stays assigned here, paused, consuming
// nothing. After contestGrace, if it is still assigned here (no revoke or loss came) and the
// row's epoch has not moved since, this instance claims it again on the condition that the
// epoch is still the one read (offsets.Store.ClaimIf) and consumes it from the stored
// offset. Any claim, stale or not, fences every earlier one, so two owners can never commit
// under one epoch and an instance that lost the assignment cannot commit once the next claim
// is made: the grace only keeps two members from taking a partition from each other in turn.
// It is at least the group's session timeout, by which time librdkafka tells a member that
// was expelled from the group, however it was cut off, that it lost its assignment.

// contest is a contested partition waiting for contestGrace (poll goroutine only).
type contest struct {
	w     *worker // the stopped worker (or the placeholder of an abandoned claim) in p.workers
	epoch int64   // the other claim's epoch, as read at since
	since time.Time
}

// Contested is told of a claim the Balancer abandoned: c is the row of another instance's
// claim. The partition is assigned in Kafka; a worker that has already stopped stands for
// it, so that its records are paused and dropped, until contestGrace tells whether the other
// claim is real.
func (p *poller) Contested(c rebalance.Claim) {
	p.clock.touch()
	k := partitionKey{c.Topic, c.Partition}
	w := newWorker(p.wcfg, c.Topic, c.Partition, 0, c.NextOffset) // epoch 0: never this instance's
	w.dead.Store(true)
	w.drop()
	close(w.done)
	p.workers[k] = w
	p.contested[k] = contest{w: w, epoch: c.Epoch, since: time.Now()}
	p.scheduleContest(k)
}

// contest is called when a stopped worker w of k finds pos, another instance's claim, in the
// row: it starts the grace period, or, once that has passed with the row unchanged, claims
// the partition again (poll goroutine).
func (p *poller) contest(ctx context.Context, k partitionKey, w *worker, pos rebalance.Position) {
	c, ok := p.contested[k]
	if !ok || c.w != w || c.epoch != pos.Epoch {
		if ok && c.w == w {
			p.log.Info("contested partition claimed again by another instance; waiting again", "topic", k.topic,
				"partition", k.partition, "owner", pos.Owner, "epoch", pos.Epoch)
		} else {
			p.log.Warn("partition assigned here is claimed by another instance; claiming it again if it is still assigned here after the grace period",
				"topic", k.topic, "partition", k.partition, "owner", pos.Owner, "epoch", pos.Epoch, "grace", p.contestGrace())
		}
		p.contested[k] = contest{w: w, epoch: pos.Epoch, since: time.Now()}
		p.scheduleContest(k)
		return
	}
	if time.Since(c.since) < p.contestGrace() {
		return // a look is scheduled for the end of the grace period
	}
	cl, err := p.store.ClaimIf(ctx, k.topic, k.partition, pos.Epoch)
	if err != nil {
		if errors.Is(err, rebalance.ErrClaimTaken) {
			c.since = time.Now() // claimed again meanwhile: a live owner, or another stale one
			p.contested[k] = c
			p.scheduleContest(k)
			return
		}
		p.log.Warn("claiming a contested partition failed; trying again later", "topic", k.topic, "partition", k.partition,
			"retry_in", p.cfg.MaxRetryBackoff, "err", err)
		time.AfterFunc(p.cfg.MaxRetryBackoff, func() { p.rechecks.request(k) })
		return
	}
	if p.restartWorker(k, cl) {
		p.log.Info("partition claimed again: the claim that took it went nowhere while it stayed assigned here",
			"topic", k.topic, "partition", k.partition, "epoch", cl.Epoch, "next_offset", cl.NextOffset, "was_owner", pos.Owner)
	}
}

// checkEpochs compares the epochs of the running workers' rows with their own, and asks the
// poll goroutine to look at each row another claim took (reclaimIfReset, then contest): an
// idle partition has no commit to be fenced by, so a stale claim of it would otherwise go
// unseen until its next record. The stop ledger's persistence goroutine calls it with every heartbeat (heartbeat.go); a failed read
// is left to the next one.
func (p *poller) checkEpochs(ctx context.Context) {
	ws := p.liveWorkers()
	if len(ws) == 0 || p.store == nil {
		return
	}
	topics := make([]string, len(ws))
	partitions := make([]int32, len(ws))
	for i, w := range ws {
		topics[i], partitions[i] = w.topic, w.partition
	}
	ctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
	defer cancel()
	epochs, err := p.store.Epochs(ctx, topics, partitions)
	if err != nil {
		return
	}
	for _, w := range ws {
		if e, ok := epochs[w.topic][w.partition]; ok && e != w.epoch {
			p.rechecks.request(partitionKey{w.topic, w.partition})
		}
	}
}

// scheduleContest asks for a look at k once its grace period has passed.
func (p *poller) scheduleContest(k partitionKey) {
	time.AfterFunc(p.contestGrace()+contestLookDelay, func() { p.rechecks.request(k) })
}

// contestGrace is how long a contested partition waits: the consumer's session.timeout.ms,
// librdkafka's default (defaultSessionTimeoutMs) when not set, and that default for
// group.protocol=consumer, whose session timeout the broker sets.
func (p *poller) contestGrace() time.Duration {
	ms := defaultSessionTimeoutMs
	if v, ok := p.cfg.Kafka["session.timeout.ms"]; ok {
		switch v := v.(type) {
		case int:
			ms = v
		case string:
			if n, err := strconv.Atoi(v); err == nil {
				ms = n
			}
		}
	}
	if p, _ := p.cfg.Kafka["group.protocol"].(string); p == "consumer" {
		ms = defaultSessionTimeoutMs
	}
	return time.Duration(ms) * time.Millisecond
}
