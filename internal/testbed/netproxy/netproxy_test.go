package netproxy

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer is a real loopback TCP echo server.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exchange writes msg and reads its echo, returning how long that took.
func exchange(t *testing.T, c net.Conn, msg []byte) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo %q, want %q", got, msg)
	}
	return time.Since(start)
}

func TestDelayEachWay(t *testing.T) {
	const d = 20 * time.Millisecond
	p, err := Listen(echoServer(t), d)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p)
	const n = 5
	for i := range n {
		rtt := exchange(t, c, []byte{byte('a' + i), 'x'})
		// Each way d: a round trip takes at least 2d, and on loopback not much more.
		if rtt < 2*d || rtt > 2*d+150*time.Millisecond {
			t.Fatalf("round trip %d took %s, want about %s", i, rtt, 2*d)
		}
	}
	if got := p.RoundTrips(); got != n {
		t.Fatalf("counted %d round trips, want %d", got, n)
	}
	p.SetDelay(0)
	if rtt := exchange(t, c, []byte("fast")); rtt >= d {
		t.Fatalf("without delay a round trip took %s", rtt)
	}
	if got := p.RoundTrips(); got != n+1 {
		t.Fatalf("counted %d round trips, want %d", got, n+1)
	}
}

// TestDelayNotSerialized: chunks written back to back, without waiting for the echo, all
// arrive after about one round trip, not one delay per chunk, and in order.
func TestDelayNotSerialized(t *testing.T) {
	const d = 30 * time.Millisecond
	p, err := Listen(echoServer(t), d)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p)
	const chunks = 50
	var want bytes.Buffer
	start := time.Now()
	go func() {
		for i := range chunks {
			msg := []byte{byte(i), byte(i >> 8), 'z'}
			_, _ = c.Write(msg)
			time.Sleep(time.Millisecond) // separate chunks
		}
	}()
	for i := range chunks {
		want.Write([]byte{byte(i), byte(i >> 8), 'z'})
	}
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("reordered or corrupted: %v", got)
	}
	// Serialized delays would take chunks*2d = 3 s; one round trip plus the writer's ~50 ms.
	if took < 2*d || took > 2*d+500*time.Millisecond {
		t.Fatalf("%d pipelined chunks took %s, want about %s plus the writes", chunks, took, 2*d)
	}
	// The client never waited for the server between its writes, but the echo of its
	// early chunks may arrive while it still writes: a turn is counted for each write
	// after server data; at least the first.
	if rt := p.RoundTrips(); rt < 1 {
		t.Fatalf("counted %d round trips", rt)
	}
}

// TestThroughputUnderDelay: a bulk transfer through a delayed proxy keeps a loopback rate.
func TestThroughputUnderDelay(t *testing.T) {
	const d = 10 * time.Millisecond
	p, err := Listen(echoServer(t), d)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	start := time.Now()
	go func() { _, _ = c.Write(data) }()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("bulk data corrupted")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("1 MiB through a %s proxy took %s: the delay is serialized", d, took)
	}
	if up, down := p.Bytes(); up != int64(len(data)) || down != int64(len(data)) {
		t.Fatalf("bytes %d up, %d down, want %d each", up, down, len(data))
	}
}

func pgMsg(typ byte, body ...[]byte) []byte {
	b := bytes.Join(body, nil)
	out := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(out[1:], uint32(4+len(b)))
	return append(out, b...)
}

func cstr(s string) []byte { return append([]byte(s), 0) }

func TestPGStatements(t *testing.T) {
	classify := PGStatements()
	q := pgMsg('Q', cstr("begin   isolation level read committed"))
	if got := classify(q); got != "begin isolation level read committed" {
		t.Fatalf("query: %q", got)
	}
	parse := pgMsg('P', cstr("stmt_1"), cstr("UPDATE x SET a = $1"), []byte{0, 0})
	bind := pgMsg('B', cstr(""), cstr("stmt_1"), []byte{0, 0, 0, 0, 0, 0})
	exec := pgMsg('E', cstr(""), []byte{0, 0, 0, 0})
	sync := pgMsg('S')
	if got := classify(bytes.Join([][]byte{parse, pgMsg('D', []byte("S"), cstr("stmt_1")), sync}, nil)); got != "other" {
		t.Fatalf("prepare alone: %q", got)
	}
	batch := bytes.Join([][]byte{pgMsg('B', cstr(""), cstr("stmt_0"), []byte{0, 0, 0, 0, 0, 0}), exec, bind, exec, sync}, nil)
	if got := classify(batch); got != "bind stmt_0 + UPDATE x SET a = $1" {
		t.Fatalf("batch: %q", got)
	}
	if got := classify(pgMsg('d', []byte("rows"))); got != "COPY data" {
		t.Fatalf("copy: %q", got)
	}
	if got := classify([]byte{0, 0, 0, 8, 4, 210, 22, 47}); got != "other" {
		t.Fatalf("startup: %q", got)
	}
}

// TestAnsweredEndsTurns: with Answered, server data that does not end an answer does not
// end the client's turn.
func TestAnsweredEndsTurns(t *testing.T) {
	p, err := Listen(echoServer(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Answered = func(chunk []byte) bool { return bytes.HasSuffix(chunk, []byte("!")) }
	c := dial(t, p)
	exchange(t, c, []byte("a"))  // turn 1; the echo is no answer
	exchange(t, c, []byte("b!")) // the same turn; the echo answers
	exchange(t, c, []byte("c"))  // turn 2
	if got := p.RoundTrips(); got != 2 {
		t.Fatalf("counted %d round trips, want 2", got)
	}
	if !PGAnswered([]byte{'C', 0, 0, 0, 4, 'Z', 0, 0, 0, 5, 'T'}) || PGAnswered([]byte{'G', 0, 0, 0, 5, 'T'}) {
		t.Fatal("PGAnswered")
	}
}
