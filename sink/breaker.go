package sink

import (
	"errors"
	"fmt"
	"math"
)

// This file is the dead-letter circuit breaker. Data errors (SQLSTATE classes 22 and 23) are
// poison, so a schema drift (a new NOT NULL column, a parent that another topic no longer
// delivers) would make every record poison and, under the DeadLetter policy, empty the stream
// into the dead-letter table. The breaker stops the partition instead once more than
// Config.MaxDeadLetterRatio of its last Config.DeadLetterWindow records would be
// dead-lettered.

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
	first, last := batch[0].Offset, batch[len(batch)-1].Offset
	return nil, &TooManyDeadLettersError{Topic: w.topic, Partition: w.partition, FirstOffset: first, LastOffset: last,
		DeadLetters: peak, Window: len(w.deadLetters.ring), MaxRatio: w.cfg.deadLetterRatio, Err: dead[len(dead)-1].Err}
}
