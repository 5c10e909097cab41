package test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eosink/eosink/internal/testbed"
)

// TestMetricsAndProbes: the points example serves /metrics, /healthz and /readyz; the
// metrics count what was applied and show each partition's lag.
func TestMetricsAndProbes(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 2)
	p.Produce(t, 500, 81)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := startChild(t, "sink", p.Args("-http", addr))
	p.WaitCaughtUp(t, 60*time.Second)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testbed.Eventually(t, 30*time.Second, "the probes and metrics", func() (bool, string) {
		h, _ := get("/healthz")
		r, _ := get("/readyz")
		m, body := get("/metrics")
		ok := h == 200 && r == 200 && m == 200 &&
			strings.Contains(body, fmt.Sprintf("eosink_records_applied_total{pipeline=%q} 500", p.Group)) &&
			strings.Contains(body, "eosink_partition_lag{") && strings.Contains(body, "eosink_commit_seconds_bucket")
		return ok, fmt.Sprintf("healthz %d readyz %d metrics %d", h, r, m)
	})
	c.StopClean(60 * time.Second)
}
