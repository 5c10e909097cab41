package sink

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func recs(n int) []Record {
	out := make([]Record, n)
	for i := range out {
		out[i].Offset = int64(i)
	}
	return out
}

func deadAt(batch []Record, idx ...int) []Poisoned {
	var out []Poisoned
	for _, i := range idx {
		out = append(out, Poisoned{Record: batch[i], Err: errors.New("bad")})
	}
	return out
}

func TestDeadLetterWindowTripsPastTheShareOfTheWindow(t *testing.T) {
	w := newDeadLetterWindow(10, 0.2) // at most 2 dead letters among the last 10 records
	b := recs(5)
	out, peak, ok := w.check(b, deadAt(b, 1, 3))
	if !ok || peak != 2 {
		t.Fatalf("2 of 5: peak %d ok %t, want 2 true", peak, ok)
	}
	w.add(out)
	if _, peak, ok := w.check(b, deadAt(b, 0)); ok || peak != 3 {
		t.Fatalf("a third dead letter within the window: peak %d ok %t, want 3 false", peak, ok)
	}
	if w.dead != 2 {
		t.Fatalf("a refused check changed the window: %d dead, want 2", w.dead)
	}
	// Ten good records push the two out: room for two again.
	for range 2 {
		o, _, _ := w.check(b, nil)
		w.add(o)
	}
	if _, peak, ok := w.check(b, deadAt(b, 0, 4)); !ok || peak != 2 {
		t.Fatalf("after ten good records: peak %d ok %t, want 2 true", peak, ok)
	}
}

func TestDeadLetterWindowSparsePoisonNeverTrips(t *testing.T) {
	w := newDeadLetterWindow(100, 0.2)
	for range 200 { // one poison in 7, in batches of 7
		b := recs(7)
		out, _, ok := w.check(b, deadAt(b, 3))
		if !ok {
			t.Fatalf("sparse poison tripped the breaker at %d dead letters", w.dead)
		}
		w.add(out)
	}
}

func TestDeadLetterWindowPeakWithinALargeBatch(t *testing.T) {
	// A batch longer than the window: 3 dead letters at its start, which later records of
	// the same batch push out, still trip it.
	w := newDeadLetterWindow(4, 0.5)
	b := recs(12)
	if _, peak, ok := w.check(b, deadAt(b, 0, 1, 2)); ok || peak != 3 {
		t.Fatalf("peak %d ok %t, want 3 false", peak, ok)
	}
}

func TestDeadLetterWindowOff(t *testing.T) {
	if w := newDeadLetterWindow(1000, 1); w != nil {
		t.Fatal("a ratio of 1 must turn the breaker off")
	}
	var w *deadLetterWindow
	b := recs(3)
	if _, _, ok := w.check(b, deadAt(b, 0, 1, 2)); !ok {
		t.Fatal("no breaker refused a batch")
	}
	w.add([]bool{true})
}

func TestTooManyDeadLettersErrorMatches(t *testing.T) {
	poison := Poison(&Record{Topic: "t", Offset: 7}, errors.New("no amount"))
	var err error = &TooManyDeadLettersError{Topic: "t", Window: 10, MaxRatio: 0.2, DeadLetters: 3, Err: poison}
	if !errors.Is(err, ErrTooManyDeadLetters) || !errors.Is(err, ErrPoison) || isRetryable(err) {
		t.Fatalf("%v: want ErrTooManyDeadLetters and ErrPoison, not retryable", err)
	}
}

func TestDeadLetterWindowRestoreCountsTheLastWindowBelowNext(t *testing.T) {
	w := newDeadLetterWindow(10, 0.2) // limit 2
	// Offsets 90..99 are the window below next 100: 89 and 100 are outside it, 95 is listed twice.
	w.restore(100, []int64{89, 91, 95, 95, 100})
	if w.dead != 2 {
		t.Fatalf("restored %d dead letters, want 2 (offsets 91 and 95)", w.dead)
	}
	b := recs(1)
	// Offset 100 dead-lettered: the window 91..100 would hold 3.
	if _, peak, ok := w.check(b, deadAt(b, 0)); ok || peak != 3 {
		t.Fatalf("a third dead letter after the restore: peak %d ok %t, want 3 false", peak, ok)
	}
	// Offset 100 good (the window 91..100 holds 2), then 101 dead-lettered: 91 has left.
	o, _, _ := w.check(b, nil)
	w.add(o)
	if _, peak, ok := w.check(b, deadAt(b, 0)); !ok || peak != 2 {
		t.Fatalf("after offset 91 left the window: peak %d ok %t, want 2 true", peak, ok)
	}
}

func TestDeadLetterWindowRestoreNearTheStartAndAgain(t *testing.T) {
	w := newDeadLetterWindow(10, 0.5)
	w.restore(3, []int64{0, 2}) // fewer records than the window: the rest count as good
	if w.dead != 2 {
		t.Fatalf("restored %d, want 2", w.dead)
	}
	w.restore(50, nil) // a second claim replaces the window
	if w.dead != 0 {
		t.Fatalf("restored %d after a claim with no dead letters, want 0", w.dead)
	}
	for _, d := range w.ring {
		if d {
			t.Fatal("a dead letter of the earlier claim is left in the ring")
		}
	}
	var off *deadLetterWindow
	off.restore(10, []int64{1}) // no breaker: nothing to restore
}

// TestBreakerTripStopsWithItsOwnReasonAndCounts: a batch the breaker refuses counts in
// eosink_dead_letter_breaker_trips_total, and its error stops the partition with reason
// too_many_dead_letters, not poison (which the error unwraps to), so that the gauge
// eosink_partition_stopped tells a tripped breaker from a poison record under on_poison stop.
func TestBreakerTripStopsWithItsOwnReasonAndCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := validConfig()
	c.Registerer = reg
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	m := s.m
	w := &worker{cfg: &workerConfig{m: m, maxDeadLetterRatio: 0.2}, topic: "t", partition: 2, deadLetters: newDeadLetterWindow(10, 0.2)}
	b := recs(5)
	if _, err := w.admitDeadLetters(b, deadAt(b, 1)); err != nil {
		t.Fatalf("one dead letter in ten: %v", err)
	}
	_, err = w.admitDeadLetters(b, deadAt(b, 0, 1, 2))
	if !errors.Is(err, ErrTooManyDeadLetters) {
		t.Fatalf("three dead letters in ten: %v, want ErrTooManyDeadLetters", err)
	}
	if r := StopReason(err); r != StopTooManyDeadLetters {
		t.Errorf("StopReason = %q, want %q", r, StopTooManyDeadLetters)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "eosink_dead_letter_breaker_trips_total" {
			got = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if got != 1 || m.breakerTrips.load() != 1 {
		t.Errorf("eosink_dead_letter_breaker_trips_total = %g (-1: not registered), count %d; want 1", got, m.breakerTrips.load())
	}
}
