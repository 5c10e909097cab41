package testbed

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/eosink/eosink/internal/testbed/netproxy"
)

// TCPProxy forwards a local port to a server, and can be cut (listener closed, connections
// dropped: clients get connection refused) and restored on the same port. The tests put the
// sink's Schema Registry URL through it, to stop "the registry" without stopping the test
// bed's shared one. SetDelay adds a fixed delay each way and RoundTrips counts the
// clients' round trips (package netproxy, which the benchmark uses without a testing.T).
type TCPProxy struct {
	counter netproxy.Counter
	t       testing.TB
	addr    string // the local address, fixed across cuts
	target  string

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
	answer int // when set, answer every new connection with this HTTP status and a plain body
}

// StartTCPProxy proxies to the host of rawURL and returns the proxy and rawURL with its
// host replaced by the proxy's.
func StartTCPProxy(t testing.TB, rawURL string) (*TCPProxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{t: t, target: u.Host, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Cut)
	u.Host = p.addr
	return p, u.String()
}

func (p *TCPProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go relay(ln, p.target, func(c net.Conn) bool {
		p.mu.Lock()
		answer := p.answer
		p.mu.Unlock()
		if answer == 0 {
			return false
		}
		go func() {
			_, _ = c.Read(make([]byte, 4096))
			body := "<h1>" + http.StatusText(answer) + "</h1>"
			_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/html\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
				answer, http.StatusText(answer), len(body), body)
			c.Close()
		}()
		return true
	}, func(c, s net.Conn) {
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.mu.Unlock()
		p.counter.Pipe(c, s)
	})
}

// SetDelay adds d each way to every chunk relayed from now on (0: none).
func (p *TCPProxy) SetDelay(d time.Duration) { p.counter.SetDelay(d) }

// RoundTrips is the number of round trips the clients have made through the proxy: each
// time a client sends after the server has sent.
func (p *TCPProxy) RoundTrips() int64 { return p.counter.RoundTrips() }

// relay accepts connections on ln until it is closed. handled(c) may take a connection
// over (and return true); else relay dials target (closing c when that fails) and hands
// both ends to pipe.
func relay(ln net.Listener, target string, handled func(c net.Conn) bool, pipe func(c, s net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if handled(c) {
			continue
		}
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		pipe(c, s)
	}
}

// Cut closes the listener and every connection through it.
func (p *TCPProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// SetAnswer makes the proxy answer every new connection with an HTTP status and an HTML
// body, as a load balancer or an auth gateway in front of the registry would; 0 forwards
// again.
func (p *TCPProxy) SetAnswer(status int) {
	p.mu.Lock()
	p.answer = status
	p.mu.Unlock()
}

// Restore listens again on the same address.
func (p *TCPProxy) Restore() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}
