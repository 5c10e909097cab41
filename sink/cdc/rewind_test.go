package cdc

import (
	"math/rand/v2"
	"testing"

	"github.com/eosink/eosink/sink"
)

// TestRewoundResentNeverStops: a partition's stream, applied in order, then sent again from
// any earlier point (a Debezium restart), any number of times: no event counts as rewound,
// whatever the commit times do (out of LSN order, a clock stepping back).
func TestRewoundResentNeverStops(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var stream []seen
		commit, lsn, ts := int64(0), int64(1000), int64(1_700_000_000_000)
		for i := range 50 {
			s := seen{op: "r", lsn: lsn, ts: ts}
			if i > 5 {
				commit += rng.Int64N(100) + 1
				lsn = commit + rng.Int64N(50)
				ts += rng.Int64N(20_000) - 5_000 // the source's clock steps back now and then
				s = seen{op: "u", commit: commit, lsn: lsn, ts: ts}
			}
			stream = append(stream, s)
		}
		var m mark
		for _, s := range stream {
			if rewound(m, s) {
				t.Fatalf("first delivery counted as rewound: %+v after %+v", s, m)
			}
			m.advance(s)
		}
		for range 3 {
			from := rng.IntN(len(stream))
			for _, s := range stream[from:] {
				if rewound(m, s) {
					t.Fatalf("re-sent event counted as rewound: %+v after %+v", s, m)
				}
				m.advance(s)
			}
		}
	}
}

func TestRewound(t *testing.T) {
	m := mark{commit: 5000, lsn: 5100, ts: 100_000, set: true}
	for _, c := range []struct {
		name string
		s    seen
		want bool
	}{
		{"later position", seen{op: "u", commit: 5200, lsn: 5300, ts: 200_000}, false},
		{"older position, later commit time", seen{op: "u", commit: 4000, lsn: 4100, ts: 200_000}, true},
		{"older position, same commit time (re-sent)", seen{op: "u", commit: 4000, lsn: 4100, ts: 100_000}, false},
		{"older position, within the slack", seen{op: "u", commit: 4000, lsn: 4100, ts: 100_000 + rewindSlack}, false},
		{"same commit, lower lsn, later", seen{op: "d", commit: 5000, lsn: 5050, ts: 200_000}, true},
		{"truncate below", seen{op: "t", commit: 10, lsn: 20, ts: 200_000}, true},
		{"no source.ts_ms", seen{op: "u", commit: 10, lsn: 20}, false},
		{"snapshot of a healthy source", seen{op: "r", lsn: 6000, ts: 200_000}, false},
		{"snapshot of a rewound source", seen{op: "r", lsn: 4500, ts: 200_000}, true},
		{"snapshot re-sent", seen{op: "r", lsn: 100, ts: 90_000}, false},
	} {
		if got := rewound(m, c.s); got != c.want {
			t.Errorf("%s: rewound = %v, want %v", c.name, got, c.want)
		}
	}
	if rewound(mark{}, seen{op: "u", commit: 1, lsn: 1, ts: 1 << 50}) {
		t.Error("a partition without a mark counted a change as rewound")
	}
}

// TestMarkAdvance: a mark is the largest position applied and the latest commit time seen,
// whatever the order of the changes (the mark once kept the smallest position of a batch,
// so that a source rewound into the middle of the last batch went unnoticed).
func TestMarkAdvance(t *testing.T) {
	var m mark
	for _, s := range []seen{
		{op: "r", lsn: 900, ts: 10},
		{op: "u", commit: 1000, lsn: 1010, ts: 30},
		{op: "u", commit: 1000, lsn: 1020, ts: 20},
		{op: "u", commit: 1100, lsn: 1105, ts: 25},
		{op: "u", commit: 1000, lsn: 1500, ts: 5}, // re-sent: below (1100, 1105)
	} {
		m.advance(s)
	}
	if want := (mark{commit: 1100, lsn: 1105, ts: 30, set: true}); m != want {
		t.Fatalf("mark = %+v, want %+v", m, want)
	}
	var w watch
	for i, s := range []seen{{op: "u", commit: 50376896, lsn: 50377160}, {op: "c", commit: 50388288, lsn: 50389744}, {op: "c", commit: 50388288, lsn: 50388300}} {
		w.see(&sink.Record{Offset: int64(i)}, &event{op: s.op, commit: s.commit, lsn: s.lsn, ts: 1})
	}
	if w.max.commit != 50388288 || w.max.lsn != 50389744 {
		t.Fatalf("batch mark = %+v, want (50388288, 50389744)", w.max)
	}
	// The promoted standby's snapshot, read at an LSN inside the last batch's range.
	if !rewound(w.max, seen{op: "r", lsn: 50388336, ts: 5000}) {
		t.Fatal("a snapshot below the batch's largest position, read later, is not counted rewound")
	}
}
