package test

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/sink"
)

// cutMode says what the proxy does with the next client message that carries COMMIT.
type cutMode int32

const (
	cutOff          cutMode = iota
	cutAfterForward         // forward COMMIT to the server, then cut the connection before the reply
	cutBeforeSend           // cut the connection without forwarding COMMIT
)

// pgProxy is a TCP proxy in front of PostgreSQL that can cut a connection around a COMMIT,
// so that the client cannot know whether it happened.
type pgProxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	fired  atomic.Int32
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, databaseURL string) (*pgProxy, string) {
	t.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: u.Host}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *pgProxy) arm(m cutMode) { p.mode.Store(int32(m)) }

func (p *pgProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		var cut atomic.Bool // set when the COMMIT's reply must be lost
		go downstream(c, s, &cut)
		go p.upstream(c, s, &cut)
	}
}

var commitBytes = []byte("commit")

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

func (p *pgProxy) upstream(c, s net.Conn, cut *atomic.Bool) {
	defer s.Close()
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if m := cutMode(p.mode.Load()); m != cutOff && bytes.Contains(bytes.ToLower(chunk), commitBytes) &&
				p.mode.CompareAndSwap(int32(m), int32(cutOff)) {
				cut.Store(true)
				if m == cutAfterForward {
					_, _ = s.Write(chunk)
					time.Sleep(300 * time.Millisecond) // let the server commit, then lose the reply
				}
				p.fired.Add(1)
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

// TestUnknownCommitOutcomeIsSettled cuts the database connection around a COMMIT, once after
// the server received it and once before. The sink cannot tell from the error whether the
// batch committed; it reads the offset row back, resumes from what is stored, and every
// event is applied exactly once either way.
func TestUnknownCommitOutcomeIsSettled(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode cutMode
	}{{"server committed", cutAfterForward}, {"server never saw commit", cutBeforeSend}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPipeline(t, 1)
			p.Produce(t, 600, 61)
			proxy, proxied := startProxy(t, p.Env.DatabaseURL)
			base := app.Handler(p.Schema)
			var calls atomic.Int64
			h := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
				if err := base(ctx, tx, b); err != nil {
					return err
				}
				if calls.Add(1) == 3 {
					proxy.arm(tc.mode) // the next COMMIT on the wire is this batch's
				}
				return nil
			}
			cfg := p.config(t, h)
			cfg.DatabaseURL = proxied
			r := startSink(t, cfg)
			p.WaitCaughtUp(t, 60*time.Second)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if proxy.fired.Load() != 1 {
				t.Fatalf("the proxy cut %d connections, want 1", proxy.fired.Load())
			}
			if st := r.s.Stats(); st.UnknownCommits != 1 {
				t.Fatalf("unknown commits = %d, want 1 (stats %+v)", st.UnknownCommits, st)
			}
		})
	}
}
