package sink

import (
	"errors"
	"testing"
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
