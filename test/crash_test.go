package test

import (
	"testing"
	"time"

	"github.com/eosink/eosink/internal/testbed"
)

// TestExactlyOnceAcrossCrashes kills the sink with SIGKILL at each boundary of the commit
// protocol, restarts it, and checks from the log and the database that every event was
// applied exactly once.
func TestExactlyOnceAcrossCrashes(t *testing.T) {
	points := []string{"after-fetch", "after-offset-update", "mid-write", "in-handler", "before-commit", "after-commit"}
	for _, fp := range points {
		t.Run(fp, func(t *testing.T) {
			t.Parallel()
			const events = 3000
			p := newPipeline(t, 3)
			p.Produce(t, events, 7)

			// First run dies at the 4th time it reaches the failpoint.
			first := startChild(t, "sink-1", p.Args("-batch-records", "100"), "EOSINK_FAILPOINTS="+fp+"=kill@4")
			err := first.Wait(90 * time.Second)
			if !testbed.KilledBySIGKILL(err) {
				t.Fatalf("first run: want death by SIGKILL at %s, got %v", fp, err)
			}
			if !first.Contains("failpoint fired: " + fp + " kill") {
				t.Fatalf("first run died without the failpoint firing")
			}
			before := p.Verify(t)
			if before.Duplicates != 0 || before.Applied >= events {
				t.Fatalf("after the kill: want a partial, duplicate-free state, got %+v", before)
			}

			// The restart resumes from the stored offsets and finishes the stream.
			second := startChild(t, "sink-2", p.Args("-batch-records", "100"))
			rep := p.WaitCaughtUp(t, 90*time.Second)
			second.StopClean(45 * time.Second)
			if rep.Produced != events || rep.Applied != events {
				t.Fatalf("want %d produced and applied, got %+v", events, rep)
			}
			t.Logf("%s: applied before kill %d, after restart %d, duplicates %d, lost %d", fp, before.Applied, rep.Applied, rep.Duplicates, rep.Lost)
		})
	}
}
