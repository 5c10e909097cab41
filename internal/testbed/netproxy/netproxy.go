// Package netproxy is the core of the test bed's TCP proxies: it relays a pair of
// connections, optionally adding a fixed one-way delay in each direction (a server on
// another machine, on one machine), and counts the round trips the client makes. It needs
// no testing.T, so that the benchmark (test/bench) uses it as the tests do
// (internal/testbed's TCPProxy).
//
// The delay is applied per chunk read, without reordering and without serializing: a chunk
// read from one side at time t is written to the other at t+d, whatever the chunks before
// it, so a stream of chunks keeps its rate and only arrives d later, as over a link with
// latency d and ample bandwidth.
//
// A round trip is counted when the client sends after the server has sent (or has ended an
// answer, with Counter.Answered), or sends first on a connection: a client "turn". A request and its response, then the next request,
// are two turns; requests pipelined in one write without waiting are one.
package netproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Counter holds a proxy's delay and counts: shared by every connection it relays.
type Counter struct {
	delay      atomic.Int64 // nanoseconds, each way
	roundTrips atomic.Int64
	toServer   atomic.Int64 // bytes client -> server
	toClient   atomic.Int64 // bytes server -> client

	// Classify, when set before any connection is relayed, names the first chunk of each
	// client turn (for the PostgreSQL protocol: the statement it carries); Turns counts
	// the turns by name.
	Classify func(chunk []byte) string
	// Answered, when set before any connection is relayed, says whether a chunk from the
	// server ends an answer the client waits for (for PostgreSQL: ReadyForQuery, see
	// PGAnswered); only such chunks end a turn. Unset, any server data does. It keeps a
	// client that streams without waiting (COPY data after the server's CopyInResponse)
	// from being counted as making round trips.
	Answered func(chunk []byte) bool
	mu       sync.Mutex
	turns    map[string]int64
}

// SetDelay sets the one-way delay (each direction) for the chunks read from now on.
func (c *Counter) SetDelay(d time.Duration) { c.delay.Store(int64(d)) }

// Delay is the one-way delay.
func (c *Counter) Delay() time.Duration { return time.Duration(c.delay.Load()) }

// RoundTrips is the number of client turns so far, over every connection.
func (c *Counter) RoundTrips() int64 { return c.roundTrips.Load() }

// Bytes returns the bytes relayed so far, client to server and server to client.
func (c *Counter) Bytes() (toServer, toClient int64) { return c.toServer.Load(), c.toClient.Load() }

// Turns returns the client turns so far by the name Classify gave them.
func (c *Counter) Turns() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.turns))
	for k, v := range c.turns {
		out[k] = v
	}
	return out
}

func (c *Counter) turn(chunk []byte) {
	c.roundTrips.Add(1)
	if c.Classify == nil {
		return
	}
	name := c.Classify(chunk)
	c.mu.Lock()
	if c.turns == nil {
		c.turns = map[string]int64{}
	}
	c.turns[name]++
	c.mu.Unlock()
}

// conn is one relayed pair's turn state.
type conn struct {
	mu          sync.Mutex
	serverSpoke bool // the server has sent since the client's last chunk
	started     bool
}

// Pipe relays client and server until either side ends, then closes both. It returns at
// once; the relay runs on goroutines of its own.
func (c *Counter) Pipe(client, server net.Conn) {
	st := &conn{}
	closeBoth := sync.OnceFunc(func() { client.Close(); server.Close() })
	go c.relay(client, server, func(chunk []byte) {
		c.toServer.Add(int64(len(chunk)))
		st.mu.Lock()
		newTurn := st.serverSpoke || !st.started
		st.started, st.serverSpoke = true, false
		st.mu.Unlock()
		if newTurn {
			c.turn(chunk)
		}
	}, closeBoth)
	go c.relay(server, client, func(chunk []byte) {
		c.toClient.Add(int64(len(chunk)))
		if c.Answered != nil && !c.Answered(chunk) {
			return
		}
		st.mu.Lock()
		st.serverSpoke = true
		st.mu.Unlock()
	}, closeBoth)
}

// chunk is data read at a time, due at another.
type chunk struct {
	data []byte
	due  time.Time
}

// relay copies src to dst, each chunk delayed by the counter's delay at the time it was
// read. A reader goroutine stamps the chunks and queues them; this one writes each when due.
// The queue is bounded, so a slow destination slows the source down as TCP would.
func (c *Counter) relay(src, dst net.Conn, seen func([]byte), closeBoth func()) {
	defer closeBoth()
	q := make(chan chunk, 256)
	go func() {
		defer close(q)
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				data := append([]byte(nil), buf[:n]...)
				seen(data)
				q <- chunk{data: data, due: time.Now().Add(c.Delay())}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range q {
		if wait := time.Until(ch.due); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := dst.Write(ch.data); err != nil {
			closeBoth()
			for range q { // let the reader end
			}
			return
		}
	}
}

// Proxy listens on a loopback port and relays each connection to a target through a
// Counter.
type Proxy struct {
	*Counter
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// Listen starts a proxy on 127.0.0.1 (a free port) to target (host:port) with a one-way
// delay of delay each way.
func Listen(target string, delay time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Counter: &Counter{}, ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.SetDelay(delay)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
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
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.Pipe(c, s)
	}
}

// Close stops listening and closes every relayed connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.mu.Unlock()
	p.wg.Wait()
	return err
}
