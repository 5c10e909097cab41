package sink

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
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
	// StopTooManyDeadLetters: the dead-letter circuit breaker tripped (ErrTooManyDeadLetters).
	StopTooManyDeadLetters = "too_many_dead_letters"
	StopHandler            = "handler"
	StopSourceRewound      = "source_rewound"
	StopDecimal            = "decimal_ambiguous"
	StopOther              = "error"
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
	case errors.Is(err, ErrTooManyDeadLetters): // before ErrPoison, which it unwraps to
		return StopTooManyDeadLetters
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
	case StopTooManyDeadLetters:
		return "more than dead_letter.max_ratio of the partition's last dead_letter.window records would be dead-lettered (a schema change or an upstream bug?); " +
			"the batch was rolled back. Fix the cause and restart the instance, or raise dead_letter.max_ratio, or replay or discard the dead letters (eosink dlq)"
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

// stopCollector exports eosink_partition_stopped.
type stopCollector struct {
	s    *Sink
	desc *prometheus.Desc
}

func (c *stopCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stopCollector) Collect(ch chan<- prometheus.Metric) {
	for k, st := range c.s.stops.stoppedPartitions() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, k.topic, strconv.Itoa(int(k.partition)), st.reason)
	}
}
