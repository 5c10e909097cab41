package pipeline

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestTracingSection: the tracing section's keys, defaults and the OTEL_EXPORTER_OTLP_*
// fallback; its mistakes reported at their paths and lines; header values never shown.
func TestTracingSection(t *testing.T) {
	if p, err := parse(t, minimal, nil); err != nil || p.Tracing != nil {
		t.Fatalf("no section: %+v %v, want tracing off", p.Tracing, err)
	}
	if p, err := parse(t, minimal+"tracing:\n", nil); err != nil || p.Tracing != nil {
		t.Fatalf("null section: %+v %v, want tracing off", p.Tracing, err)
	}

	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := parse(t, minimal+`tracing:
  endpoint: https://otel.example:4318
  protocol: http/protobuf
  headers: {x-api-key: "${OTEL_KEY}", X-Tenant: shop}
  tls: {ca_file: `+ca+`}
  sampling: 0.25
  service_name: orders
  timeout: 3s
`, map[string]string{"OTEL_KEY": "k3y-never-shown"})
	want := &TracingOptions{Endpoint: "https://otel.example:4318/v1/traces", EndpointFrom: "tracing.endpoint",
		Headers: map[string]string{"x-api-key": "k3y-never-shown", "X-Tenant": "shop"}, CAFile: ca,
		Sampling: 0.25, ServiceName: "orders", Timeout: 3 * time.Second}
	if err != nil || !reflect.DeepEqual(p.Tracing, want) {
		t.Fatalf("every key: %+v %v, want %+v", p.Tracing, err, want)
	}
	var sum bytes.Buffer
	if err := p.Summary(&sum); err != nil {
		t.Fatal(err)
	}
	line := "tracing:   OTLP/HTTP to https://otel.example:4318/v1/traces, sampling 0.25, service orders, timeout 3s; headers X-Tenant, x-api-key (values not shown)\n"
	if !strings.Contains(sum.String(), line) || strings.Contains(sum.String(), "k3y-never-shown") {
		t.Fatalf("summary:\n%s\nwant the line %q and no header value", sum.String(), line)
	}

	// Defaults; an endpoint with a path is taken as it is.
	p, err = parse(t, minimal+"tracing: {endpoint: 'http://127.0.0.1:4318/otlp/traces'}\n", nil)
	want = &TracingOptions{Endpoint: "http://127.0.0.1:4318/otlp/traces", EndpointFrom: "tracing.endpoint", Sampling: 1,
		ServiceName: "eosink", Timeout: 10 * time.Second}
	if err != nil || !reflect.DeepEqual(p.Tracing, want) {
		t.Fatalf("defaults: %+v %v, want %+v", p.Tracing, err, want)
	}
	sum.Reset()
	_ = p.Summary(&sum)
	if !strings.Contains(sum.String(), "tracing:   OTLP/HTTP to http://127.0.0.1:4318/otlp/traces, sampling 1, service eosink, timeout 10s\n") {
		t.Fatalf("summary:\n%s", sum.String())
	}
	if p, _ := parse(t, minimal, nil); p != nil {
		sum.Reset()
		_ = p.Summary(&sum)
		if !strings.Contains(sum.String(), "tracing:   off\n") {
			t.Fatalf("summary without the section:\n%s", sum.String())
		}
	}

	// -validate without the environment: an unset endpoint is shown as such.
	p, err = Parse(filepath.Join(dir, "pipeline.yaml"), []byte(minimal+"tracing: {endpoint: '${OTLP_URL}'}\n"), Options{
		LogOutput: &sum, LookupEnv: func(string) (string, bool) { return "", false }, AllowUnset: true})
	if err != nil || len(p.Warnings) != 1 {
		t.Fatalf("unset endpoint with AllowUnset: %v, warnings %v", err, p.Warnings)
	}
	sum.Reset()
	_ = p.Summary(&sum)
	if !strings.Contains(sum.String(), "tracing:   OTLP/HTTP to ${OTLP_URL} (unset), sampling 1") {
		t.Fatalf("summary with an unset endpoint:\n%s", sum.String())
	}

	// Without an endpoint: the standard variables, the traces one first.
	for _, c := range []struct {
		env        map[string]string
		want, from string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}, "http://collector:4318/v1/traces", "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b:4318/t"}, "https://b:4318/t", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
	} {
		p, err := parse(t, minimal+"tracing: {sampling: 0}\n", c.env)
		if err != nil || p.Tracing.Endpoint != c.want || p.Tracing.EndpointFrom != c.from || p.Tracing.Sampling != 0 {
			t.Fatalf("env %v: %+v %v, want %s from %s", c.env, p.Tracing, err, c.want, c.from)
		}
	}

	for text, want := range map[string]string{
		"tracing: {endpoint: http://x:4318, sampling: 1.5}\n":                     "tracing.sampling: 1.5 is not between 0 and 1 (line 11)",
		"tracing:\n  endpoint: http://x:4318\n  sampling: -0.1\n":                 "tracing.sampling: -0.1 is not between 0 and 1 (line 13)",
		"tracing: {endpoint: http://x:4318, sampling: half}\n":                    `tracing.sampling: "half" is not a number between 0 and 1`,
		"tracing: {sampling: 1}\n":                                                "tracing.endpoint: required: the OTLP/HTTP receiver",
		"tracing: {endpoint: 'x:4318'}\n":                                         `tracing.endpoint: "x:4318" (from tracing.endpoint) is not an http:// or https:// URL`,
		"tracing: {endpoint: 'http://u:s3cret-pw@x:4318'}\n":                      "without credentials",
		"tracing: {endpoint: http://x:4318, protocol: grpc}\n":                    `tracing.protocol: "grpc" is not supported; eosink exports http/protobuf`,
		"tracing: {endpoint: http://x:4318, tls: {insecure_skip_verify: true}}\n": "tracing.tls: needs an https:// endpoint (tracing.endpoint is plain http) (line 11)",
		"tracing: {endpoint: https://x:4318, tls: {cert_file: " + ca + "}}\n":     "tracing.tls.key_file: tls.cert_file and tls.key_file go together",
		"tracing: {endpoint: https://x:4318, tls: {ca_file: /nonexistent}}\n":     `tracing.tls.ca_file: cannot read "/nonexistent"`,
		"tracing: {endpoint: https://x:4318, tls: {ca_fil: x}}\n":                 "tracing.tls.ca_fil: unknown key (tracing.tls has ca_file, cert_file, key_file, insecure_skip_verify); did you mean ca_file?",
		"tracing: {endpont: http://x:4318}\n":                                     "tracing.endpont: unknown key (tracing has endpoint, protocol, headers, tls, sampling, service_name, timeout); did you mean endpoint? (line 11)",
		"tracing: {endpoint: http://x:4318, headers: [a]}\n":                      "tracing.headers: must be a mapping of HTTP header names to values, not a list",
		"tracing: {endpoint: http://x:4318, headers: {'bad name': s3cret-v}}\n":   `tracing.headers: "bad name" is not an HTTP header name`,
		"tracing: {endpoint: http://x:4318, headers: {x-key: }}\n":                "tracing.headers[x-key]: needs a value",
		"tracing: {endpoint: http://x:4318, timeout: 0s}\n":                       "tracing.timeout: ",
		"tracing: {endpoint: http://x:4318, timeout: '${OTEL_KEY}'}\n":            `tracing.timeout: the value of "${OTEL_KEY}" is not a duration`,
		"tracing: [a]\n": "tracing: must be a mapping of keys (endpoint, protocol, headers, tls, sampling, service_name, timeout), not a list",
	} {
		got := parseErr(t, minimal+text, map[string]string{"OTEL_KEY": "k3y-never-shown"})
		if !strings.Contains(got, want) {
			t.Errorf("%s: errors:\n%s\nwant %q", text, got, want)
		}
		if strings.Contains(got, "k3y-never-shown") || strings.Contains(got, "s3cret") {
			t.Errorf("%s: a secret in the errors:\n%s", text, got)
		}
	}
}
