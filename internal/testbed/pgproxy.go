package testbed

import (
	"bytes"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CutMode says what the proxy does with the next client message that carries COMMIT.
type CutMode int32

const (
	CutOff          CutMode = iota
	CutAfterForward         // forward COMMIT to the server, then cut the connection before the reply
	CutBeforeSend           // cut the connection without forwarding COMMIT
	// CutHalfOpen cuts the client's side without forwarding COMMIT and keeps the server's
	// side open until the proxy stops: a half-open connection, whose session stays idle in
	// transaction, holding its locks, as long as the server has no timeout to end it.
	CutHalfOpen
)

// PGProxy is a TCP proxy in front of PostgreSQL that can cut a connection around a COMMIT,
// so that the client cannot know whether it happened.
type PGProxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	Fired  atomic.Int32
	wg     sync.WaitGroup

	mu   sync.Mutex
	held []net.Conn            // server sides kept open by CutHalfOpen
	live map[net.Conn]struct{} // every connection, both sides, for Down
	down atomic.Bool
}

// Down(true) closes every connection through the proxy and refuses new ones, as if the
// server were unreachable, until Down(false).
func (p *PGProxy) Down(down bool) {
	p.down.Store(down)
	if !down {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.live {
		c.Close()
	}
}

func (p *PGProxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live == nil {
		p.live = map[net.Conn]struct{}{}
	}
	for _, c := range cs {
		p.live[c] = struct{}{}
	}
}

// StartPGProxy starts a proxy to the server of databaseURL and returns it with the URL that
// goes through it.
func StartPGProxy(t testing.TB, databaseURL string) (*PGProxy, string) {
	t.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &PGProxy{ln: ln, target: u.Host}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
		p.mu.Lock()
		for _, s := range p.held {
			s.Close()
		}
		p.mu.Unlock()
	})
	u.Host = ln.Addr().String()
	return p, u.String()
}

// Arm makes the proxy cut the next connection that sends COMMIT, once.
func (p *PGProxy) Arm(m CutMode) { p.mode.Store(int32(m)) }

func (p *PGProxy) accept() {
	defer p.wg.Done()
	relay(p.ln, p.target, func(c net.Conn) bool {
		if p.down.Load() {
			c.Close()
			return true
		}
		return false
	}, func(c, s net.Conn) {
		p.track(c, s)
		var cut atomic.Bool // set when the COMMIT's reply must be lost
		go downstream(c, s, &cut)
		go p.upstream(c, s, &cut)
	})
}

// commitQuery is the simple-protocol Query message pgx sends for Tx.Commit: 'Q', the length
// (4 + len("commit\x00") = 11), the statement. Matching the whole message keeps statements
// that merely mention the word (BEGIN ISOLATION LEVEL READ COMMITTED) from being cut.
var commitQuery = []byte("Q\x00\x00\x00\x0bcommit\x00")

// downstream relays server replies to the client until the connection is cut.
func downstream(c, s net.Conn, cut *atomic.Bool) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 && !cut.Load() {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil || cut.Load() {
			return
		}
	}
}

func (p *PGProxy) upstream(c, s net.Conn, cut *atomic.Bool) {
	keep := false
	defer func() {
		if !keep {
			s.Close()
		}
	}()
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if m := CutMode(p.mode.Load()); m != CutOff && bytes.Contains(chunk, commitQuery) &&
				p.mode.CompareAndSwap(int32(m), int32(CutOff)) {
				cut.Store(true)
				// Count the cut before acting on it: with CutAfterForward the server's reply
				// already ends the client's side while this goroutine sleeps, and a caller
				// that finishes within the sleep must still see the cut.
				p.Fired.Add(1)
				switch m {
				case CutAfterForward:
					_, _ = s.Write(chunk)
					time.Sleep(300 * time.Millisecond) // let the server commit, then lose the reply
				case CutHalfOpen:
					keep = true
					p.mu.Lock()
					p.held = append(p.held, s)
					p.mu.Unlock()
				}
				return
			}
			if _, err := s.Write(chunk); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
