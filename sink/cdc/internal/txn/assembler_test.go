package txn

import (
	"errors"
	"testing"
)

func errorIs(err, target error) bool { return errors.Is(err, target) }

// Source transactions of the tests: T1 (xid 10) commits at LSN 100, T2 (xid 11) at 200, T3
// (xid 12) at 300; each change's PrevCommit is the commit before its transaction's.
func TestAssembler(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		steps     []step
		want      []string
		positions string // Positions() at the end; "" to skip
		stats     *Stats
	}{{
		name: "one transaction over three topics, changes before and after its END",
		steps: []step{
			begin(0, 10, 50),
			chg("accounts", 0, 0, 10, 1, 1, 0),
			chg("lines", 1, 0, 10, 3, 1, 0),
			end(1, 10, 100, "accounts", 2, "lines", 1, "orders", 1),
			chg("orders", 0, 0, 10, 4, 1, 0),
			chg("accounts", 1, 0, 10, 2, 2, 0),
		},
		want: []string{"10 [1 2 3 4] accounts/0@1,accounts/1@1,dbz.transaction/0@2,lines/1@1,orders/0@1"},
	}, {
		name: "a later transaction's changes read first wait for the earlier one",
		steps: []step{
			begin(0, 10, 50), end(1, 10, 100, "a", 1), begin(2, 11, 100), end(3, 11, 200, "b", 1),
			chg("b", 0, 0, 11, 1, 1, 100),
			chg("a", 0, 0, 10, 1, 1, 0),
		},
		want: []string{"10 [1] a/0@1,b/0@0,dbz.transaction/0@3", "11 [1] b/0@1,dbz.transaction/0@4"},
	}, {
		name: "ENDs before any change: emitted in commit order as they complete",
		steps: []step{
			end(0, 10, 100, "a", 1), end(1, 11, 200, "a", 1), end(2, 12, 300, "a", 1),
			chg("a", 0, 0, 10, 1, 1, 0), chg("a", 0, 1, 11, 1, 1, 100), chg("a", 0, 2, 12, 1, 1, 200),
		},
		want: []string{"10 [1] a/0@1,dbz.transaction/0@1", "11 [1] a/0@2,dbz.transaction/0@2", "12 [1] a/0@3,dbz.transaction/0@3"},
	}, {
		name: "two transactions sharing a partition, the later one's change first: the position stops at it",
		steps: []step{
			end(0, 10, 100, "p", 1, "q", 1), end(1, 11, 200, "p", 1),
			chg("p", 0, 5, 11, 1, 1, 100), // T2's, before T1's on the same partition
			chg("p", 0, 6, 10, 1, 1, 0),
			chg("q", 0, 0, 10, 2, 1, 0),
		},
		// T1 emitted: p/0 may not pass offset 5 (T2's), which the first offset read needs.
		want: []string{"10 [1 2] dbz.transaction/0@1,p/0@5,q/0@1", "11 [1] dbz.transaction/0@2,p/0@7"},
	}, {
		name: "empty transactions: BEGIN and END with event_count 0",
		steps: []step{
			begin(0, 10, 50), end(1, 10, 100), begin(2, 11, 100), end(3, 11, 200),
		},
		want:  []string{"10 [] dbz.transaction/0@2", "11 [] dbz.transaction/0@4"},
		stats: &Stats{Emitted: 2, Passed: 2},
	}, {
		name: "an empty transaction waits behind an incomplete earlier one",
		steps: []step{
			end(0, 10, 100, "a", 1), end(1, 11, 200),
			chg("a", 0, 0, 10, 1, 1, 0),
		},
		want: []string{"10 [1] a/0@1,dbz.transaction/0@1", "11 [] dbz.transaction/0@2"},
	}, {
		name: "snapshot reads and tombstones pass; streamed changes after them",
		steps: []step{
			pass("a", 0, 0), pass("a", 0, 1),
			chg("a", 0, 2, 10, 1, 1, 0), pass("a", 0, 3), // a delete's tombstone
			end(0, 10, 100, "a", 1),
		},
		want:      []string{"10 [1] a/0@4,dbz.transaction/0@1"},
		positions: "a/0@4,dbz.transaction/0@1",
	}, {
		name: "re-sent changes and END of a pending transaction are duplicates",
		steps: []step{
			chg("a", 0, 0, 10, 1, 1, 0),
			chg("a", 0, 1, 10, 1, 1, 0), // re-sent
			end(0, 10, 100, "a", 2),
			end(1, 10, 100, "a", 2), // re-sent
			chg("a", 0, 2, 10, 2, 2, 0),
		},
		want:  []string{"10 [1 2] a/0@3,dbz.transaction/0@2"},
		stats: &Stats{Emitted: 1, Duplicates: 2},
	}, {
		name: "re-sent after emission: skipped by the watermark",
		steps: []step{
			end(0, 10, 100, "a", 1), chg("a", 0, 0, 10, 1, 1, 0),
			// the connector restarts and sends T1 again, then T2
			begin(1, 10, 50), chg("a", 0, 1, 10, 1, 1, 0), end(2, 10, 100, "a", 1),
			begin(3, 11, 100), chg("a", 0, 2, 11, 1, 1, 100), end(4, 11, 200, "a", 1),
		},
		want:  []string{"10 [1] a/0@1,dbz.transaction/0@1", "11 [1] a/0@3,dbz.transaction/0@5"},
		stats: &Stats{Emitted: 2, Resent: 2, Passed: 2},
	}, {
		name: "connector restart mid-transaction: the partial copy and the full one make one transaction",
		steps: []step{
			begin(0, 10, 50), chg("a", 0, 0, 10, 1, 1, 0), chg("b", 0, 0, 10, 2, 1, 0),
			// restart: BEGIN again, everything again, then the END
			begin(1, 10, 50), chg("a", 0, 1, 10, 1, 1, 0), chg("b", 0, 1, 10, 2, 1, 0), chg("a", 0, 2, 10, 3, 2, 0),
			end(2, 10, 100, "a", 2, "b", 1),
		},
		want:  []string{"10 [1 2 3] a/0@3,b/0@2,dbz.transaction/0@3"},
		stats: &Stats{Emitted: 1, Duplicates: 2, Passed: 2},
	}, {
		name: "restart mid-transaction, interrupted by the next transaction's BEGIN",
		steps: []step{
			begin(0, 10, 50), chg("a", 0, 0, 10, 1, 1, 0),
			begin(1, 10, 50), chg("a", 0, 1, 10, 1, 1, 0), chg("a", 0, 2, 10, 2, 2, 0), end(2, 10, 100, "a", 2),
			begin(3, 11, 100), chg("a", 0, 3, 11, 1, 1, 100),
			// restart again inside T2; it is sent whole
			begin(4, 11, 100), chg("a", 0, 4, 11, 1, 1, 100), chg("b", 0, 0, 11, 2, 1, 100), end(5, 11, 200, "a", 1, "b", 1),
		},
		want: []string{"10 [1 2] a/0@3,dbz.transaction/0@3", "11 [1 2] a/0@5,b/0@1,dbz.transaction/0@6"},
	}, {
		name: "a partial transaction whose END is behind the start: superseded when a later one is emitted",
		steps: []step{
			chg("a", 0, 7, 10, 1, 1, 0), // T1's, its END before the transaction topic's start
			begin(40, 11, 100), chg("a", 0, 8, 11, 1, 1, 100), end(41, 11, 200, "a", 1),
		},
		want:  []string{"11 [1] a/0@9,dbz.transaction/0@42"},
		stats: &Stats{Emitted: 1, Superseded: 1, Passed: 1},
	}, {
		name: "restart of the sink at the watermark: an applied transaction is skipped",
		cfg:  Config{Watermark: 100},
		steps: []step{
			chg("a", 0, 0, 10, 1, 1, 0), end(0, 10, 100, "a", 1),
			chg("a", 0, 1, 11, 1, 1, 100), end(1, 11, 200, "a", 1),
		},
		want:  []string{"11 [1] a/0@2,dbz.transaction/0@2"},
		stats: &Stats{Emitted: 1, Resent: 2},
	}, {
		name: "snapshot read given to Change",
		steps: []step{
			{c: &Change{At: Position{"a", 0, 0}, Meta: Meta{Op: "r", Collection: "public.a"}}, wantErr: ErrNotInTransaction},
			pass("a", 0, 0),
		},
		positions: "a/0@1",
	}, {
		name: "a record at an offset already read",
		steps: []step{
			chg("a", 0, 3, 10, 1, 1, 0),
			chg("a", 0, 3, 10, 2, 2, 0).fails(ErrOrder),
			pass("a", 0, 2).fails(ErrOrder),
			end(5, 10, 100, "a", 2), end(5, 11, 200).fails(ErrOrder),
		},
	}, {
		name: "inconsistent: orders out of the END's range, a collection it does not list, two ENDs",
		steps: []step{
			chg("a", 0, 0, 10, 3, 1, 0),
			end(0, 10, 100, "a", 2).fails(ErrInconsistent), // total_order 3 of 2
			end(0, 10, 100, "a", 1, "b", 2),
			chg("c", 0, 0, 10, 1, 1, 0).fails(ErrInconsistent), // c not listed
			chg("b", 0, 0, 10, 2, 3, 0).fails(ErrInconsistent), // b #3 of 2
			end(1, 10, 100, "a", 1, "b", 1, "c", 1).fails(ErrInconsistent),
			chg("a", 0, 1, 10, 3, 2, 0).fails(ErrInconsistent),                            // total_order 3 is a #1
			chg("b", 0, 1, 10, 1, 1, 50).fails(ErrInconsistent),                           // another PrevCommit
			end(2, 12, 100).fails(ErrInconsistent),                                        // another xid at the same commit LSN
			chg("d", 0, 0, 13, 1, 1, 500), end(2, 13, 400, "d", 1).fails(ErrInconsistent), // commits before its changes' previous commit
			chg("b", 0, 2, 10, 1, 1, 0), chg("b", 0, 3, 10, 2, 2, 0),
		},
		want: []string{"10 [1 2 3] a/0@1,b/0@4,d/0@0,dbz.transaction/0@1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(tc.cfg)
			want(t, run(t, a, tc.steps), tc.want)
			if tc.positions != "" {
				if got := positions(a.Positions()); got != tc.positions {
					t.Errorf("Positions() = %s, want %s", got, tc.positions)
				}
			}
			if tc.stats != nil {
				got := a.Stats()
				got.HeldEvents, got.HeldBytes = 0, 0
				if got != *tc.stats {
					t.Errorf("stats %+v, want %+v", got, *tc.stats)
				}
			}
			if s := a.Stats(); len(a.ends) == 0 && len(a.txs) == 0 && (s.HeldEvents != 0 || s.HeldBytes != 0) {
				t.Errorf("nothing pending, yet %d events, %d bytes held", s.HeldEvents, s.HeldBytes)
			}
		})
	}
}

func TestAssemblerLimits(t *testing.T) {
	a := New(Config{MaxEvents: 3, MaxBytes: 1000})
	// An END over the bound is taken: its transaction streams (TestAssemblerStreams).
	if err := a.Marker(*end(0, 10, 100, "a", 4).m, Position{txTopic, 0, 0}); err != nil {
		t.Fatalf("END of 4 events past a bound of 3: %v", err)
	}
	var le *LimitError
	var err error
	// Transactions not known to commit next (no END, no watermark) share half the bound:
	// past it, a change is refused (the caller gives it again later).
	b := New(Config{MaxEvents: 4, MaxBytes: 1000})
	run(t, b, []step{chg("a", 0, 0, 10, 1, 1, 0), chg("a", 0, 1, 10, 2, 2, 0)})
	if err := b.Change(*chg("a", 0, 2, 10, 3, 3, 0).c); !errors.Is(err, ErrFull) || !errors.As(err, &le) || le.XID != 10 || le.Events != 3 {
		t.Fatalf("third change of one transaction, bound 4: %v", err)
	}
	c := New(Config{MaxEvents: 4, MaxBytes: 1000})
	run(t, c, []step{chg("a", 0, 0, 10, 1, 1, 0), chg("a", 0, 1, 11, 1, 1, 100)})
	err = c.Change(*chg("a", 0, 2, 12, 1, 1, 200).c)
	if !errors.Is(err, ErrFull) || errors.Is(err, ErrTooLarge) {
		t.Fatalf("a third transaction's change, bound 4: %v", err)
	}
	// Not taken: the same record can be given again once there is room.
	run(t, c, []step{end(0, 10, 100, "a", 1)})
	if err := c.Change(*chg("a", 0, 2, 12, 1, 1, 200).c); err != nil {
		t.Fatalf("after T1 was emitted: %v", err)
	}
	// ENDs count too: ENDs whose changes never come cannot grow without bound.
	e := New(Config{MaxEvents: 4})
	run(t, e, []step{end(0, 10, 100, "a", 1), end(1, 11, 200, "a", 1)})
	if err := e.Marker(*end(2, 12, 300, "a", 1).m, Position{txTopic, 0, 2}); !errors.Is(err, ErrFull) {
		t.Fatalf("a third END, bound 4: %v", err)
	}
	// The changes of the transaction Next waits for are taken past the others' share (held,
	// the bound has room for them).
	run(t, e, []step{chg("a", 0, 0, 10, 1, 1, 0), chg("a", 0, 1, 11, 1, 1, 100)})
	if s := e.Stats(); s.Emitted != 2 || s.Streamed != 0 {
		t.Fatalf("the changes of the oldest ENDs, bound full of ENDs: %+v", s)
	}
	// Bytes.
	d := New(Config{MaxEvents: 10, MaxBytes: 300})
	run(t, d, []step{chg("a", 0, 0, 10, 1, 1, 0)})
	if err := d.Change(*chg("a", 0, 1, 10, 2, 2, 0).c); !errors.Is(err, ErrFull) {
		t.Fatalf("200 bytes of a later transaction, bound 300: %v", err)
	}
	// A transaction alone past the whole bound is too large (it streams once it commits next).
	f := New(Config{MaxEvents: 1})
	run(t, f, []step{chg("a", 0, 0, 10, 1, 1, 0)})
	if err := f.Change(*chg("a", 0, 1, 10, 2, 2, 0).c); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("two changes of one transaction, bound 1: %v", err)
	}
}
