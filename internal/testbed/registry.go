package testbed

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// RequireRegistry returns EOSINK_REGISTRY_URL, the test bed's Schema Registry (Apicurio, its
// Confluent-compatible API: http://127.0.0.1:<port>/apis/ccompat/v7), checking that it
// answers. It fails the test, never skips it, when the variable is unset or the registry is
// down.
func RequireRegistry(t testing.TB) string {
	t.Helper()
	u := strings.TrimRight(os.Getenv("EOSINK_REGISTRY_URL"), "/")
	if u == "" {
		t.Fatalf("testbed: EOSINK_REGISTRY_URL must name the Schema Registry's Confluent-compatible API " +
			"(http://127.0.0.1:18080/apis/ccompat/v7): run `make services` then `. .services/env`, or use `make test`, which does both")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/subjects", nil)
	if err != nil {
		t.Fatalf("testbed: EOSINK_REGISTRY_URL=%s: %v", u, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("testbed: Schema Registry at EOSINK_REGISTRY_URL=%s does not answer: %v (is `make services` running?)", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("testbed: GET %s/subjects: %s %s (EOSINK_REGISTRY_URL must end in /apis/ccompat/v7)", u, resp.Status, strings.TrimSpace(string(body)))
	}
	return u
}
