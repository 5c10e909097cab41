package sink

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eosink/eosink/sink/sinkhttp"
)

// TestHealthzShowsOnlyTheStopReason: with UnhealthyOnStoppedPartition, /healthz (served
// without authentication) names the stopped partition and its reason, never the error's
// text, which can hold record values (a constraint violation's "Failing row contains ...").
func TestHealthzShowsOnlyTheStopReason(t *testing.T) {
	s := &Sink{cfg: Config{UnhealthyOnStoppedPartition: true}, stops: testStops()}
	s.running.Store(true)
	s.clock.touch()
	s.stops.stops[partitionKey{"orders", 3}] = stopInfo{reason: StopPoison,
		err: errors.New(`ERROR: null value in column "note" violates not-null constraint: Failing row contains (42, s3cret-card-4111)`)}
	srv := httptest.NewServer(sinkhttp.Handler(s, nil))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got := strings.TrimSpace(string(body))
	if resp.StatusCode != 503 || !strings.Contains(got, "orders[3]") || !strings.Contains(got, StopPoison) {
		t.Fatalf("/healthz: %d %q, want 503 naming orders[3] and %s", resp.StatusCode, got, StopPoison)
	}
	if strings.Contains(got, "s3cret") || strings.Contains(got, "Failing row") {
		t.Fatalf("/healthz shows the error's text: %q", got)
	}
}
