package cdc

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosink/eosink/internal/testbed"
)

// registryOutage holds the sink's registry away (proxy cut) until the running sink has
// retried a few batches for it, checks that no partition stopped, and restores the proxy.
func registryOutage(t *testing.T, sink *testbed.Process, httpAddr string, proxy *testbed.TCPProxy) {
	t.Helper()
	start := time.Now()
	testbed.Eventually(t, 60*time.Second, "transient retries while the registry is away", func() (bool, string) {
		if sink.Exited() {
			t.Fatalf("the sink exited while the registry was away:\n%s", sink.Output())
		}
		m := scrape(t, httpAddr)
		if m.stopped != 0 {
			t.Fatalf("%d partitions stopped while the registry was away:\n%s", m.stopped, sink.Output())
		}
		return m.transient >= 5 && time.Since(start) > 3*time.Second, strconv.Itoa(m.transient) + " transient retries"
	})
	m := scrape(t, httpAddr)
	if m.stopped != 0 || m.deadLetters != 0 {
		t.Fatalf("while the registry was away: %d partitions stopped, %d dead letters", m.stopped, m.deadLetters)
	}
	proxy.Restore()
	t.Logf("registry away for %s: %d transient retries, no partition stopped, nothing dead-lettered",
		time.Since(start).Round(100*time.Millisecond), m.transient)
}

// metrics are the sink's counters this test reads from /metrics.
type metrics struct{ transient, stopped, deadLetters int }

func scrape(t *testing.T, addr string) metrics {
	t.Helper()
	var m metrics
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return m // not serving yet
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		i, j := strings.LastIndexByte(line, ' '), strings.IndexAny(line, "{ ")
		if strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		name, rest := line[:j], line[j:i]
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case name == "eosink_batch_retries_by_cause_total" && strings.Contains(rest, `cause="transient"`):
			m.transient += int(v)
		case name == "eosink_partition_stopped":
			m.stopped += int(v)
		case name == "eosink_dead_letters_total":
			m.deadLetters += int(v)
		}
	}
	return m
}

// freeAddr returns a local address no one listens on, for the sink's http endpoint.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
