package txn

import (
	"fmt"
	"strings"
	"testing"
)

// runStream feeds steps to a like run, taking what a stream hands out after each step
// ("streamed xid [total orders]") before draining Next; a Tx that ends a stream reads
// "xid streamed positions". It checks that what is held never passes the bound.
func runStream(t *testing.T, a *Assembler, steps []step) []string {
	t.Helper()
	var out []string
	for i, s := range steps {
		apply(t, a, i, s)
		if chs := a.TakeStreamed(); len(chs) > 0 {
			xid, _ := a.Streaming()
			out = append(out, fmt.Sprintf("streamed %d %s", xid, totals(chs)))
		}
		for {
			tx, ok := a.Next()
			if !ok {
				break
			}
			if tx.Streamed {
				if len(tx.Changes) > 0 {
					t.Fatalf("step %d: the stream's end carries %d changes not taken", i, len(tx.Changes))
				}
				out = append(out, fmt.Sprintf("%d streamed %s", tx.XID, positions(tx.Positions)))
				continue
			}
			out = append(out, describe(tx))
		}
		if st := a.Stats(); st.HeldEvents+int64(len(a.ends)) > int64(a.cfg.MaxEvents) || st.HeldBytes > a.cfg.MaxBytes { // after Next
			t.Fatalf("step %d: %d events and %d ENDs, %d bytes held, past the bound of %d events, %d bytes",
				i, st.HeldEvents, len(a.ends), st.HeldBytes, a.cfg.MaxEvents, a.cfg.MaxBytes)
		}
	}
	return out
}

func totals(chs []Change) string {
	var s []string
	for _, c := range chs {
		s = append(s, fmt.Sprint(c.Meta.TotalOrder))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// T1 (xid 10) commits at 100, T2 (11) at 200, T3 (12) at 300.
func TestAssemblerStreams(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		steps   []step
		want    []string
		waiting string // Waiting() at the end, "" for none
		stats   *Stats
	}{{
		name: "the oldest END's transaction past the bound streams; a re-sent copy is skipped; the next one waits for it",
		cfg:  Config{MaxEvents: 4},
		steps: []step{
			end(0, 10, 100, "a", 3, "b", 2),
			chg("a", 0, 0, 10, 1, 1, 0),
			chg("b", 0, 0, 10, 2, 1, 0),
			chg("a", 0, 1, 10, 3, 2, 0),
			chg("b", 0, 1, 10, 4, 2, 0), // a fifth thing to hold: T1 streams
			chg("a", 0, 2, 10, 3, 2, 0), // re-sent
			end(1, 11, 200, "a", 1),
			chg("a", 0, 3, 11, 1, 1, 100), // T2's, held behind the stream
			chg("a", 0, 4, 10, 5, 3, 0),
		},
		want: []string{
			"streamed 10 [1 2 3 4]", "streamed 10 [5]",
			// a/0 stops at T2's change, the transaction topic at T2's END.
			"10 streamed a/0@3,b/0@2,dbz.transaction/0@1",
			"11 [1] a/0@5,dbz.transaction/0@2",
		},
		stats: &Stats{Emitted: 2, Duplicates: 1, Streamed: 1, StreamedChanges: 2},
	}, {
		name: "changes that follow the watermark stream before their END is read",
		cfg:  Config{MaxEvents: 2, Watermark: 100},
		steps: []step{
			chg("a", 0, 0, 11, 1, 1, 100),
			chg("a", 0, 1, 11, 2, 2, 100),
			chg("b", 0, 0, 11, 3, 1, 100), // T2 streams
			chg("b", 0, 1, 10, 1, 1, 50),  // T1's, sent again: below the watermark
			end(0, 11, 200, "a", 2, "b", 1),
			chg("a", 0, 2, 12, 1, 1, 200),
			end(1, 12, 300, "a", 1),
		},
		want: []string{
			"streamed 11 [1 2 3]",
			"11 streamed a/0@2,b/0@2,dbz.transaction/0@1",
			"12 [1] a/0@3,dbz.transaction/0@2",
		},
		stats: &Stats{Emitted: 2, Resent: 1, Streamed: 1, StreamedChanges: 1},
	}, {
		name: "a later transaction too large to hold waits, then streams when it commits next",
		cfg:  Config{MaxEvents: 4, Watermark: 100},
		steps: []step{
			chg("a", 0, 0, 12, 1, 1, 200),
			chg("a", 0, 1, 12, 2, 2, 200),
			chg("a", 0, 2, 12, 3, 3, 200).fails(ErrFull), // T3 does not commit next: past its share
			chg("b", 0, 0, 11, 1, 1, 100),                // T2 does: held (the bound has room)
			end(0, 11, 200, "b", 1),
			chg("a", 0, 2, 12, 3, 3, 200), // given again: T3 commits next now
			chg("a", 0, 3, 12, 4, 4, 200),
			chg("a", 0, 4, 12, 5, 5, 200), // past the whole bound: T3 streams
			end(1, 12, 300, "a", 5),
		},
		want: []string{
			"11 [1] a/0@0,b/0@1,dbz.transaction/0@1",
			"streamed 12 [1 2 3 4 5]",
			"12 streamed a/0@5,dbz.transaction/0@2",
		},
		stats: &Stats{Emitted: 2, Streamed: 1, StreamedChanges: 1},
	}, {
		name: "a stream waiting for its last change says so",
		cfg:  Config{MaxEvents: 1, Watermark: 100},
		steps: []step{
			chg("a", 0, 0, 11, 1, 1, 100),
			chg("a", 0, 1, 11, 2, 2, 100),
			end(0, 11, 200, "a", 3),
		},
		want:    []string{"streamed 11 [1 2]"},
		waiting: "11 200 2 [a 1] true",
	}, {
		name: "a stream's metadata is checked: another commit, an END below what was streamed, an unlisted collection",
		cfg:  Config{MaxEvents: 1, Watermark: 100},
		steps: []step{
			chg("a", 0, 0, 11, 1, 1, 100),
			chg("a", 0, 1, 11, 2, 2, 100),
			chg("a", 0, 2, 11, 3, 3, 150).fails(ErrInconsistent),
			end(0, 11, 200, "a", 1).fails(ErrInconsistent),
			end(0, 11, 200, "b", 2).fails(ErrInconsistent),
			end(0, 11, 200, "a", 2),
		},
		want:  []string{"streamed 11 [1 2]", "11 streamed a/0@2,dbz.transaction/0@1"},
		stats: &Stats{Emitted: 1, Streamed: 1, StreamedChanges: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(tc.cfg)
			want(t, runStream(t, a, tc.steps), tc.want)
			w, ok := a.Waiting()
			got := ""
			if ok {
				got = fmt.Sprint(w.XID, " ", w.Commit, " ", w.Have, " ", w.Missing, " ", w.Streaming)
				got = strings.NewReplacer("{", "", "}", "").Replace(got)
			}
			if got != tc.waiting {
				t.Errorf("Waiting() = %q, want %q", got, tc.waiting)
			}
			if tc.stats != nil {
				got := a.Stats()
				got.HeldEvents, got.HeldBytes, got.Passed = 0, 0, 0
				if got != *tc.stats {
					t.Errorf("stats %+v, want %+v", got, *tc.stats)
				}
			}
		})
	}
}
