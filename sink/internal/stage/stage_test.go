package stage

import (
	"fmt"
	"slices"
	"testing"
)

type conn struct{ done chan struct{} }

func newConn() *conn                       { return &conn{done: make(chan struct{})} }
func (c *conn) CleanupDone() chan struct{} { return c.done }

// TestSessionsDropLeastRecentlyUsed: past MaxPerSession tables a session is told to drop
// the least recently used one; using a table again makes it the most recent; each
// session counts its own.
func TestSessionsDropLeastRecentlyUsed(t *testing.T) {
	var s Sessions
	a, b := newConn(), newConn()
	for i := range MaxPerSession {
		if drop, _, _ := s.Use(a, fmt.Sprint("t", i), 1); drop != nil {
			t.Fatalf("table %d of %d: drop %v", i+1, MaxPerSession, drop)
		}
	}
	if drop, _, _ := s.Use(a, "t0", 1); drop != nil { // t0 is now the most recent; t1 the least
		t.Fatalf("a table in use again: drop %v", drop)
	}
	if drop, _, _ := s.Use(a, "new", 1); !slices.Equal(drop, []string{"t1"}) {
		t.Fatalf("one table past the bound: drop %v, want [t1]", drop)
	}
	if drop, _, _ := s.Use(b, "t1", 1); drop != nil {
		t.Fatalf("another session: drop %v", drop)
	}
	if drop, _, _ := s.Use(a, "t1", 1); !slices.Equal(drop, []string{"t2"}) {
		t.Fatalf("a dropped table used again: drop %v, want [t2]", drop)
	}
	if n := s.Len(); n != 2 {
		t.Fatalf("%d sessions, want 2", n)
	}
	close(b.done)
	s.Use(newConn(), "t0", 1) // a new session forgets the closed ones
	if n := s.Len(); n != 2 {
		t.Fatalf("%d sessions after one closed and one opened, want 2", n)
	}
}

// TestSessionsTruncatePastTruncateBytes: a plain table is truncated before a copy that would
// take the bytes copied into it since it was made or last truncated past TruncateBytes,
// then counts again from that copy; a single larger copy is not refused; each table and
// each session counts its own.
func TestSessionsTruncatePastTruncateBytes(t *testing.T) {
	var s Sessions
	a, b := newConn(), newConn()
	const n = TruncateBytes / 8 // small: SmallBytes is larger
	use := func(c Conn, name string, n int) bool {
		t.Helper()
		drop, onCommit, truncate := s.Use(c, name, n)
		if drop != nil || onCommit {
			t.Fatalf("%d bytes into %s: drop %v, on commit %v", n, name, drop, onCommit)
		}
		return truncate
	}
	for i := range 8 { // 8 × n: exactly TruncateBytes
		if use(a, "t", n) {
			t.Fatalf("copy %d of %d bytes: truncate", i+1, n)
		}
	}
	if use(b, "t", n) {
		t.Fatal("another session's table: truncate")
	}
	if use(a, "u", n) {
		t.Fatal("a new table: truncate")
	}
	if !use(a, "t", 1) {
		t.Fatal("a copy past TruncateBytes: no truncate")
	}
	for i := range 8 { // 1 byte since the truncate, then n each: the eighth would pass it
		if got := use(a, "t", n); got != (i == 7) {
			t.Fatalf("copy %d after the truncate: truncate %v", i+1, got)
		}
	}
	if !use(a, "u", 2*TruncateBytes) { // u holds n: a copy larger than TruncateBytes goes in after a truncate
		t.Fatal("a copy larger than TruncateBytes into a plain table: no truncate")
	}
	if !use(a, "u", 1) {
		t.Fatal("a copy after one larger than TruncateBytes: no truncate")
	}
}

// TestSessionsKindBySize: a table is made ON COMMIT DELETE ROWS for a copy of SmallBytes or
// more, plain for less; it keeps its kind (and a table emptied at commit is never
// truncated) until Switch copies in a row of the other kind, and then is dropped and made
// the other way.
func TestSessionsKindBySize(t *testing.T) {
	var s Sessions
	a := newConn()
	if drop, onCommit, _ := s.Use(a, "big", SmallBytes); drop != nil || !onCommit {
		t.Fatalf("a new table for a big copy: drop %v, on commit %v", drop, onCommit)
	}
	if drop, onCommit, _ := s.Use(a, "small", SmallBytes-1); drop != nil || onCommit {
		t.Fatalf("a new table for a small copy: drop %v, on commit %v", drop, onCommit)
	}
	for i := range Switch - 1 {
		if drop, onCommit, truncate := s.Use(a, "big", 1); drop != nil || !onCommit || truncate {
			t.Fatalf("small copy %d into the big table: drop %v, on commit %v, truncate %v", i+1, drop, onCommit, truncate)
		}
	}
	if _, onCommit, _ := s.Use(a, "big", TruncateBytes*2); !onCommit { // resets the run
		t.Fatal("a big copy into the big table: not on commit")
	}
	for i := range Switch {
		drop, onCommit, _ := s.Use(a, "big", 1)
		if i < Switch-1 && (drop != nil || !onCommit) {
			t.Fatalf("small copy %d after a big one: drop %v, on commit %v", i+1, drop, onCommit)
		}
		if i == Switch-1 && (!slices.Equal(drop, []string{"big"}) || onCommit) {
			t.Fatalf("small copy %d in a row: drop %v, on commit %v; want [big], plain", i+1, drop, onCommit)
		}
	}
	for i := range SwitchBytes / SmallBytes { // a table believed emptied at commit is truncated past SwitchBytes
		if _, onCommit, truncate := s.Use(a, "many", SmallBytes); !onCommit || truncate {
			t.Fatalf("big copy %d of %d bytes: on commit %v, truncate %v", i+1, SmallBytes, onCommit, truncate)
		}
	}
	if _, onCommit, truncate := s.Use(a, "many", SmallBytes); !onCommit || !truncate {
		t.Fatalf("a big copy past SwitchBytes: on commit %v, truncate %v; want both", onCommit, truncate)
	}
	for i := range Switch {
		drop, onCommit, _ := s.Use(a, "small", SmallBytes)
		if want := i == Switch-1; want != slices.Equal(drop, []string{"small"}) || onCommit != want {
			t.Fatalf("big copy %d in a row into the plain table: drop %v, on commit %v", i+1, drop, onCommit)
		}
	}
}
