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
		if drop := s.Use(a, fmt.Sprint("t", i)); drop != nil {
			t.Fatalf("table %d of %d: drop %v", i+1, MaxPerSession, drop)
		}
	}
	if drop := s.Use(a, "t0"); drop != nil { // t0 is now the most recent; t1 the least
		t.Fatalf("a table in use again: drop %v", drop)
	}
	if drop := s.Use(a, "new"); !slices.Equal(drop, []string{"t1"}) {
		t.Fatalf("one table past the bound: drop %v, want [t1]", drop)
	}
	if drop := s.Use(b, "t1"); drop != nil {
		t.Fatalf("another session: drop %v", drop)
	}
	if drop := s.Use(a, "t1"); !slices.Equal(drop, []string{"t2"}) {
		t.Fatalf("a dropped table used again: drop %v, want [t2]", drop)
	}
	if n := s.Len(); n != 2 {
		t.Fatalf("%d sessions, want 2", n)
	}
	close(b.done)
	s.Use(newConn(), "t0") // a new session forgets the closed ones
	if n := s.Len(); n != 2 {
		t.Fatalf("%d sessions after one closed and one opened, want 2", n)
	}
}
