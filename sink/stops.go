package sink

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/internal/pgerr"
)

// stopLedger is the stopped state of this instance's partitions (stopped.go says where a stop
// shows): why each one stopped, which are stopped now, and the changes of the offsets rows'
// stopped_* columns not yet written. Any goroutine records and reads it, under mu; its
// persistence goroutine (run) writes the pending changes.
type stopLedger struct {
	log               *slog.Logger
	redactErrorValues bool // for the stopped_error text

	mu      sync.Mutex
	failed  map[partitionKey]error       // why partitions stopped on this instance, latest per partition
	stops   map[partitionKey]stopInfo    // partitions stopped here now
	pending map[partitionKey]pendingStop // stop states to write on the offsets rows
	wake    chan struct{}                // a change is pending (capacity 1)
}

func newStopLedger(cfg *Config, log *slog.Logger) *stopLedger {
	return &stopLedger{
		log: log, redactErrorValues: cfg.RedactErrorValues,
		failed: map[partitionKey]error{}, stops: map[partitionKey]stopInfo{}, pending: map[partitionKey]pendingStop{},
		wake: make(chan struct{}, 1),
	}
}

// stopInfo is why a partition stopped on this instance.
type stopInfo struct {
	reason string
	err    error
	at     time.Time
}

// record is the one place a stopped partition is reported: PartitionErrors, the ERROR line
// (once per stop), the gauge, and the offsets row. Any goroutine.
func (l *stopLedger) record(topic string, partition int32, err error) {
	k := partitionKey{topic, partition}
	reason := StopReason(err)
	l.mu.Lock()
	l.failed[k] = err
	prev, again := l.stops[k]
	l.stops[k] = stopInfo{reason: reason, err: err, at: time.Now()}
	l.mu.Unlock()
	if again && prev.reason == reason {
		return
	}
	msg := "partition stopped"
	if reason == StopFenced {
		msg = "partition fenced: another instance or an operator moved it; stopped here"
	}
	l.log.Error(msg, "topic", topic, "partition", partition, "reason", reason, "err", err, "remedy", stopRemedy(reason))
	l.persist(k, &stopInfo{reason: reason, err: err}, 0)
}

// clear forgets a stop once the partition is claimed again under epoch (0: revoked, nothing
// to write).
func (l *stopLedger) clear(k partitionKey, epoch int64) {
	l.mu.Lock()
	delete(l.stops, k)
	l.mu.Unlock()
	if epoch > 0 {
		l.persist(k, nil, epoch)
	}
}

// forget drops the error of k from PartitionErrors: the partition was claimed again.
func (l *stopLedger) forget(k partitionKey) {
	l.mu.Lock()
	delete(l.failed, k)
	l.mu.Unlock()
}

// errors returns the latest error of each partition that stopped on this instance.
func (l *stopLedger) errors() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	errs := make([]error, 0, len(l.failed))
	for _, err := range l.failed {
		errs = append(errs, err)
	}
	return errs
}

// stoppedPartitions returns the partitions stopped on this instance now.
func (l *stopLedger) stoppedPartitions() map[partitionKey]stopInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[partitionKey]stopInfo, len(l.stops))
	for k, v := range l.stops {
		out[k] = v
	}
	return out
}

// pendingStop is a change of a row's stopped_* columns waiting to be written: a stop (by
// this instance, while it is the row's owner) or, with stop nil, a clear under epoch.
type pendingStop struct {
	stop  *stopInfo
	epoch int64
}

func (l *stopLedger) persist(k partitionKey, st *stopInfo, epoch int64) {
	l.mu.Lock()
	l.pending[k] = pendingStop{stop: st, epoch: epoch}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run is the persistence goroutine: it writes pending stops to db, then calls beat (the
// instance's heartbeat and what goes with it), every heartbeatInterval and whenever a change
// is pending, until ctx ends; then it writes what is pending once more and calls beat with
// final set. Run starts it once the pool is open.
func (l *stopLedger) run(ctx context.Context, db *offsets.Store, beat func(ctx context.Context, final bool)) {
	t := time.NewTicker(heartbeatInterval)
	defer t.Stop()
	for {
		l.flush(context.Background(), db)
		beat(context.Background(), false)
		select {
		case <-ctx.Done():
			l.flush(context.Background(), db)
			beat(context.Background(), true)
			return
		case <-t.C:
		case <-l.wake:
		}
	}
}

func (l *stopLedger) flush(ctx context.Context, db *offsets.Store) {
	l.mu.Lock()
	pending := l.pending
	l.pending = map[partitionKey]pendingStop{}
	l.mu.Unlock()
	for k, p := range pending {
		ctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
		var err error
		if p.stop != nil {
			err = db.MarkStopped(ctx, k.topic, k.partition, p.stop.reason, pgerr.SafeText(ErrorText(p.stop.err, l.redactErrorValues)))
		} else {
			err = db.ClearStopped(ctx, k.topic, k.partition, p.epoch)
		}
		cancel()
		if err != nil {
			l.log.Warn("could not record a partition's stop state on its offsets row; retrying", "topic", k.topic, "partition", k.partition, "err", err)
			l.mu.Lock()
			if _, newer := l.pending[k]; !newer {
				l.pending[k] = p
			}
			l.mu.Unlock()
		}
	}
}
