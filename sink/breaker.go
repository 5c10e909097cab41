package sink

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
)

// This file is the dead-letter circuit breaker. Data errors (SQLSTATE classes 22 and 23) are
// poison, so a schema drift (a new NOT NULL column, a parent that another topic no longer
// delivers) would make every record poison and, under the DeadLetter policy, empty the stream
// into the dead-letter table. The breaker stops the partition instead once more than
// Config.MaxDeadLetterRatio of its last Config.DeadLetterWindow records would be
// dead-lettered.
//
// The window outlives the worker: when a partition is claimed (a start, a restart, a
// rebalance), restoreDeadLetters rebuilds it from the dead_letters rows among the partition's
// last Config.DeadLetterWindow offsets below the claimed next offset, in one range read of the
// table's (pipeline, topic, partition, offset) unique index. Offsets that held no record (a
// transaction marker, a compacted record) count as records that were not dead-lettered, and
// resolved dead letters (replayed or discarded by an operator, eosink dlq, or applied by a
// later batch) do not count either: only open ones do.

// ErrTooManyDeadLetters matches every *TooManyDeadLettersError.
var ErrTooManyDeadLetters = errors.New("eosink: too many dead letters")

// TooManyDeadLettersError stops a partition whose batch would have put more dead letters
// among its last Window records than MaxRatio allows. The batch was rolled back: nothing of it
// was written or dead-lettered, and the stored offset did not move. It matches
// ErrTooManyDeadLetters and unwraps to the batch's last poison error (so errors.Is(err,
// ErrPoison) holds for a *PoisonError).
type TooManyDeadLettersError struct {
	Topic       string
	Partition   int32
	FirstOffset int64 // the refused batch
	LastOffset  int64
	DeadLetters int     // among the last Window records, counting the refused batch
	Window      int     // Config.DeadLetterWindow
	MaxRatio    float64 // Config.MaxDeadLetterRatio
	Err         error   // the last poison error of the refused batch
}

func (e *TooManyDeadLettersError) Error() string {
	return fmt.Sprintf("eosink: %s[%d] offsets %d..%d: %d of the last %d records would be dead-lettered, more than max dead-letter ratio %g allows; "+
		"the batch was rolled back and the partition stops (a schema change or an upstream bug? fix the cause and restart, or raise the ratio): last poison: %v",
		e.Topic, e.Partition, e.FirstOffset, e.LastOffset, e.DeadLetters, e.Window, e.MaxRatio, e.Err)
}

func (e *TooManyDeadLettersError) Unwrap() error { return e.Err }

// Is reports whether target is ErrTooManyDeadLetters.
func (e *TooManyDeadLettersError) Is(target error) bool { return target == ErrTooManyDeadLetters }

// deadLetterWindow holds whether each of a partition's last records was dead-lettered. The
// worker goroutine alone uses it. A nil window is the breaker turned off.
type deadLetterWindow struct {
	ring  []bool // the last len(ring) records, oldest at pos once full; true: dead-lettered
	pos   int
	dead  int // true entries in ring
	limit int // more dead letters than this in the window trip the breaker
}

// newDeadLetterWindow returns the window for size records and ratio, or nil (no breaker)
// when ratio is 1 or more.
func newDeadLetterWindow(size int, ratio float64) *deadLetterWindow {
	if ratio >= 1 || size <= 0 {
		return nil
	}
	return &deadLetterWindow{ring: make([]bool, size), limit: int(math.Floor(ratio * float64(size)))}
}

// add records the outcomes of consecutive records and returns the most dead letters the
// window held meanwhile.
func (w *deadLetterWindow) add(dead []bool) (peak int) {
	if w == nil {
		return 0
	}
	peak = w.dead
	for _, d := range dead {
		if w.ring[w.pos] {
			w.dead--
		}
		w.ring[w.pos] = d
		if d {
			w.dead++
		}
		w.pos = (w.pos + 1) % len(w.ring)
		peak = max(peak, w.dead)
	}
	return peak
}

// check returns the outcomes of batch (true: dead-lettered, as dead names) and the most dead
// letters the window would hold while they are added; ok is false when that exceeds the
// limit. It changes nothing: add the outcomes once the batch has committed.
func (w *deadLetterWindow) check(batch []Record, dead []Poisoned) (outcomes []bool, peak int, ok bool) {
	outcomes = make([]bool, len(batch))
	if w == nil {
		return outcomes, 0, true
	}
	if len(dead) == 0 { // the count can only fall
		return outcomes, w.dead, true
	}
	at := make(map[int64]bool, len(dead))
	for _, d := range dead {
		at[d.Record.Offset] = true
	}
	for i := range batch {
		outcomes[i] = at[batch[i].Offset]
	}
	trial := &deadLetterWindow{ring: append([]bool(nil), w.ring...), pos: w.pos, dead: w.dead, limit: w.limit}
	peak = trial.add(outcomes)
	return outcomes, peak, peak <= w.limit
}

// admitDeadLetters checks a written batch against the breaker before its COMMIT. It returns
// the batch's outcomes, to add to the window once it commits, or a *TooManyDeadLettersError
// when the breaker trips.
func (w *worker) admitDeadLetters(batch []Record, dead []Poisoned) ([]bool, error) {
	outcomes, peak, ok := w.deadLetters.check(batch, dead)
	if ok {
		return outcomes, nil
	}
	w.cfg.m.breakerTrips.add(1)
	first, last := batch[0].Offset, batch[len(batch)-1].Offset
	return nil, &TooManyDeadLettersError{Topic: w.topic, Partition: w.partition, FirstOffset: first, LastOffset: last,
		DeadLetters: peak, Window: len(w.deadLetters.ring), MaxRatio: w.cfg.maxDeadLetterRatio, Err: dead[len(dead)-1].Err}
}

// restore fills the window as if the records at offsets next-len(ring) .. next-1 had just been
// added, those in dead (offsets of dead letters) dead-lettered; offsets outside that range are
// ignored.
func (w *deadLetterWindow) restore(next int64, dead []int64) {
	if w == nil {
		return
	}
	clear(w.ring)
	w.pos, w.dead = 0, 0 // full: the oldest record is at 0
	first := next - int64(len(w.ring))
	for _, o := range dead {
		if o >= first && o < next && !w.ring[o-first] {
			w.ring[o-first] = true
			w.dead++
		}
	}
}

// restoreDeadLetters rebuilds the breaker's window of the claimed partition from the
// dead_letters table (see the top of this file), retrying transient errors with backoff. It
// runs on the worker goroutine before the first batch.
func (w *worker) restoreDeadLetters() error {
	if w.deadLetters == nil {
		return nil
	}
	next := w.next.Load()
	backoff := w.cfg.retryBackoff
	for {
		dead, err := w.loadDeadLetterOffsets(next)
		if err == nil {
			w.deadLetters.restore(next, dead)
			if len(dead) > 0 {
				w.cfg.log.Info("dead-letter breaker window restored", "topic", w.topic, "partition", w.partition,
					"next_offset", next, "dead_letters", w.deadLetters.dead, "window", len(w.deadLetters.ring))
			}
			return nil
		}
		if !isRetryable(err) || w.ctx.Err() != nil {
			return fmt.Errorf("restore the dead-letter breaker window: %w", err)
		}
		w.cfg.log.Warn("reading the dead letters for the breaker failed, retrying", "topic", w.topic,
			"partition", w.partition, "backoff", backoff, "err", err)
		if err := w.backoff(&backoff); err != nil {
			return err
		}
	}
}

// loadDeadLetterOffsets returns the offsets of the partition's open dead letters in
// [next-DeadLetterWindow, next).
func (w *worker) loadDeadLetterOffsets(next int64) ([]int64, error) {
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.claimTimeout)
	defer cancel()
	tx, err := w.cfg.db.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	rows, err := tx.Query(ctx, `SELECT "offset" FROM `+pgx.Identifier{w.cfg.schema, "dead_letters"}.Sanitize()+
		` WHERE pipeline = $1 AND topic = $2 AND partition = $3 AND "offset" >= $4 AND "offset" < $5 AND resolved_at IS NULL`,
		w.cfg.pipeline, w.topic, w.partition, next-int64(len(w.deadLetters.ring)), next)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
