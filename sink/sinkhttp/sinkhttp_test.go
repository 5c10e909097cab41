package sinkhttp_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/sinkhttp"
)

var _ sinkhttp.Probes = (*sink.Sink)(nil)

type probes struct {
	healthy error
	ready   bool
}

func (p *probes) Healthy() error { return p.healthy }
func (p *probes) Ready() bool    { return p.ready }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// TestHandlerServesProbesAndMetrics: /healthz and /readyz answer 200 "ok" or 503 with the
// reason; /metrics is served only with a gatherer.
func TestHandlerServesProbesAndMetrics(t *testing.T) {
	p := &probes{}
	srv := httptest.NewServer(sinkhttp.Handler(p, nil))
	defer srv.Close()
	if code, body := get(t, srv.URL+"/healthz"); code != 200 || body != "ok" {
		t.Fatalf("/healthz: %d %q, want 200 ok", code, body)
	}
	if code, body := get(t, srv.URL+"/readyz"); code != 503 || body != "not consuming" {
		t.Fatalf("/readyz before ready: %d %q, want 503 not consuming", code, body)
	}
	p.healthy, p.ready = errors.New("eosink: stuck"), true
	if code, body := get(t, srv.URL+"/healthz"); code != 503 || body != "eosink: stuck" {
		t.Fatalf("/healthz while unhealthy: %d %q, want 503 with the error", code, body)
	}
	if code, body := get(t, srv.URL+"/readyz"); code != 200 || body != "ok" {
		t.Fatalf("/readyz: %d %q, want 200 ok", code, body)
	}
	if code, _ := get(t, srv.URL+"/metrics"); code != 404 {
		t.Fatalf("/metrics without a gatherer: %d, want 404", code)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "eosink_test_total", Help: "test"}))
	msrv := httptest.NewServer(sinkhttp.Handler(p, reg))
	defer msrv.Close()
	if code, body := get(t, msrv.URL+"/metrics"); code != 200 || !strings.Contains(body, "eosink_test_total 0") {
		t.Fatalf("/metrics: %d %q, want the gatherer's metrics", code, body)
	}
}
