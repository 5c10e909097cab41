package sink

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/internal/pgerr"
)

// Loud stops. Every partition that stops on this instance (refused at claim, fenced, a
// handler error, out of range, topic recreated, ...) shows at once in four places: one ERROR
// log line with the remedy, the gauge eosink_partition_stopped{topic,partition,reason}, the
// stopped_* columns of its offsets row (read by `eosink status`), and, with
// Config.UnhealthyOnStoppedPartition, Healthy. A new claim of the partition clears it.

// Stop reasons: short stable words, the reason label of eosink_partition_stopped and the
// stopped_reason column.
const (
	StopFenced         = "fenced"
	StopOutOfRange     = "out_of_range"
	StopTopicRecreated = "topic_recreated"
	StopNoPosition     = "no_position"
	StopNoRoute        = "no_route"
	StopPoison         = "poison"
	StopHandler        = "handler"
	StopSourceRewound  = "source_rewound"
	StopDecimal        = "decimal_ambiguous"
	StopOther          = "error"
)

// StopReason classifies why a partition stopped into one of the Stop* words.
func StopReason(err error) string {
	var herr *HandlerError
	switch {
	case errors.Is(err, ErrFenced):
		return StopFenced
	case errors.Is(err, ErrOffsetOutOfRange):
		return StopOutOfRange
	case errors.Is(err, ErrTopicRecreated):
		return StopTopicRecreated
	case errors.Is(err, ErrNoStoredPosition):
		return StopNoPosition
	case errors.Is(err, ErrNoRoute):
		return StopNoRoute
	case errors.Is(err, ErrPoison):
		return StopPoison
	case errors.Is(err, ErrSourceRewound):
		return StopSourceRewound
	case errors.Is(err, ErrDecimalAmbiguous):
		return StopDecimal
	case errors.As(err, &herr):
		return StopHandler
	}
	return StopOther
}

// stopRemedy tells an operator what to do about a partition stopped for reason.
func stopRemedy(reason string) string {
	switch reason {
	case StopFenced:
		return "another claim owns the partition; while Kafka still assigns it here, this instance claims it again after session.timeout.ms " +
			"(a stale claim); if it stays stopped, check its owner with eosink status and restart this instance"
	case StopOutOfRange:
		return "records not yet applied were deleted or the log was truncated; choose where to go on with " +
			"`eosink offsets set -pipeline P -topic T -partition N -to earliest|OFFSET -reason TEXT`"
	case StopTopicRecreated:
		return "the topic was deleted and created again; accept it with " +
			"`eosink offsets set -pipeline P -topic T -partition N -to earliest -accept-new-topic -reason TEXT`, then restart the sink"
	case StopNoPosition:
		return "no stored position and the initial position is error; set one with `eosink offsets set -to earliest|latest|OFFSET`"
	case StopNoRoute:
		return "the topic matches the subscription but the plugin has no route for it; nothing of it is written or skipped. " +
			"Add a route for the topic to the sink's config (or narrow kafka.topics), then restart the sink: it resumes at the stored offset"
	case StopPoison:
		return "a record cannot be applied; fix the data or the plugin, or use the dead-letter policy, then restart the instance"
	case StopSourceRewound:
		return "the source database went back in time (failover to a standby that lagged, restore from a backup): " +
			"its changes would be refused by positions of the old timeline. Resync the replica from the new source " +
			"(re-snapshot after resetting its positions), as docs/cdc.md \"A source that fails over\" says, then restart the sink"
	case StopDecimal:
		return "a decimal value reads as two numbers and the config does not say which encoding the connector uses; " +
			"set the cdc sink's decimal_handling to the connector's decimal.handling.mode (precise, string or double), " +
			"then restart the sink: it resumes at the stored offset, nothing was written or skipped"
	case StopHandler:
		return "the plugin failed on a batch; fix the cause shown, then restart the instance"
	}
	return "see the error; restart the instance once the cause is fixed"
}

// stopInfo is why a partition stopped on this instance.
type stopInfo struct {
	reason string
	err    error
	at     time.Time
}

// recordFailure is the one place a stopped partition is reported: PartitionErrors, the
// ERROR line (once per stop), the gauge, and the offsets row. Any goroutine.
func (s *Sink) recordFailure(topic string, partition int32, err error) {
	k := partitionKey{topic, partition}
	reason := StopReason(err)
	s.mu.Lock()
	s.failed[k] = err
	prev, again := s.stops[k]
	s.stops[k] = stopInfo{reason: reason, err: err, at: time.Now()}
	s.mu.Unlock()
	if again && prev.reason == reason {
		return
	}
	msg := "partition stopped"
	if reason == StopFenced {
		msg = "partition fenced: another instance or an operator moved it; stopped here"
	}
	s.log.Error(msg, "topic", topic, "partition", partition, "reason", reason, "err", err, "remedy", stopRemedy(reason))
	s.persistStop(k, &stopInfo{reason: reason, err: err}, 0)
}

// clearStop forgets a stop once the partition is claimed again under epoch (0: revoked,
// nothing to write).
func (s *Sink) clearStop(k partitionKey, epoch int64) {
	s.mu.Lock()
	delete(s.stops, k)
	s.mu.Unlock()
	if epoch > 0 {
		s.persistStop(k, nil, epoch)
	}
}

// stoppedPartitions returns the partitions stopped on this instance now.
func (s *Sink) stoppedPartitions() map[partitionKey]stopInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[partitionKey]stopInfo, len(s.stops))
	for k, v := range s.stops {
		out[k] = v
	}
	return out
}

// stopCollector exports eosink_partition_stopped.
type stopCollector struct {
	s    *Sink
	desc *prometheus.Desc
}

func (c *stopCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stopCollector) Collect(ch chan<- prometheus.Metric) {
	for k, st := range c.s.stoppedPartitions() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, k.topic, strconv.Itoa(int(k.partition)), st.reason)
	}
}

// pendingStop is a change of a row's stopped_* columns waiting to be written: a stop (by
// this instance, while it is the row's owner) or, with stop nil, a clear under epoch.
type pendingStop struct {
	stop  *stopInfo
	epoch int64
}

// heartbeatInterval is how often the sink writes its heartbeat and retries pending writes.
var heartbeatInterval = 3 * time.Second

func (s *Sink) persistStop(k partitionKey, st *stopInfo, epoch int64) {
	s.mu.Lock()
	s.pendingStops[k] = pendingStop{stop: st, epoch: epoch}
	s.mu.Unlock()
	select {
	case s.persistWake <- struct{}{}:
	default:
	}
}

// persister writes pending stops and the instance's heartbeat until ctx ends; then it
// writes what is pending once more and marks the instance stopped. Run starts it once the
// pool is open.
func (s *Sink) persister(ctx context.Context) {
	t := time.NewTicker(heartbeatInterval)
	defer t.Stop()
	for {
		s.flushStops(context.Background())
		s.heartbeat(context.Background(), false)
		s.checkEpochs(context.Background())
		select {
		case <-ctx.Done():
			s.flushStops(context.Background())
			s.heartbeat(context.Background(), true)
			return
		case <-t.C:
		case <-s.persistWake:
		}
	}
}

func (s *Sink) flushStops(ctx context.Context) {
	s.mu.Lock()
	pending := s.pendingStops
	s.pendingStops = map[partitionKey]pendingStop{}
	s.mu.Unlock()
	for k, p := range pending {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		if p.stop != nil {
			err = s.store.MarkStopped(ctx, k.topic, k.partition, p.stop.reason, pgerr.SafeText(ErrorText(p.stop.err, s.cfg.RedactErrorValues)))
		} else {
			err = s.store.ClearStopped(ctx, k.topic, k.partition, p.epoch)
		}
		cancel()
		if err != nil {
			s.log.Warn("could not record a partition's stop state on its offsets row; retrying", "topic", k.topic, "partition", k.partition, "err", err)
			s.mu.Lock()
			if _, newer := s.pendingStops[k]; !newer {
				s.pendingStops[k] = p
			}
			s.mu.Unlock()
		}
	}
}

// heartbeat writes this instance's row of the instances table (stopped at shutdown).
func (s *Sink) heartbeat(ctx context.Context, stopped bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := s.store.Heartbeat(ctx, stopped)
	if err != nil {
		s.log.Warn("heartbeat failed", "err", err)
	}
}
