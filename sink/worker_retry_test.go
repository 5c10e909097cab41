package sink

import (
	"errors"
	"testing"
)

// Poison leads to isolation only under DeadLetter, once for the write and once more for a
// COMMIT that raises it (a deferred constraint); any other error never does.
func TestTriesIsolateEachWayOnce(t *testing.T) {
	poison := Poison(&Record{Topic: "t", Offset: 3}, errors.New("bad amount"))
	other := errors.New("boom")
	for _, c := range []struct {
		name                   string
		policy                 PoisonPolicy
		err                    error
		atCommit               bool
		isolate, checkDeferred bool
		want                   bool
	}{
		{"write, first", DeadLetter, poison, false, false, false, true},
		{"write, isolating already", DeadLetter, poison, false, true, false, false},
		{"commit, not isolating", DeadLetter, poison, true, false, false, true},
		{"commit, isolating", DeadLetter, poison, true, true, false, true},
		{"commit, checking deferred already", DeadLetter, poison, true, true, true, false},
		{"stop on poison", StopOnPoison, poison, false, false, false, false},
		{"not poison", DeadLetter, other, false, false, false, false},
	} {
		tr := tries{isolate: c.isolate, checkDeferred: c.checkDeferred}
		if got := tr.isolates(c.policy, c.err, c.atCommit); got != c.want {
			t.Errorf("%s: isolates %v, want %v", c.name, got, c.want)
		}
	}
}
