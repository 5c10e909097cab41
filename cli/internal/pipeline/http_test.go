package pipeline

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHTTPSection: http is a listen address, or a mapping with listen, tls and auth whose
// secrets come from ${file:...}; mistakes are reported at their paths, and secrets never.
func TestHTTPSection(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"cert.pem": "x", "key.pem": "x", "token": "t0ken-s3cret\n", "pw": "pw-s3cret\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	load := func(http string) (*Pipeline, error) {
		return Parse(filepath.Join(dir, "p.yaml"), []byte(minimal+http), Options{LogOutput: io.Discard})
	}
	p, err := load("http: 127.0.0.1:9464\n")
	if err != nil || p.HTTP != "127.0.0.1:9464" || p.HTTPOptions != (HTTPOptions{}) {
		t.Fatalf("string form: %+v %v", p, err)
	}
	p, err = load(`http:
  listen: :9464
  tls: {cert_file: ` + filepath.Join(dir, "cert.pem") + `, key_file: ` + filepath.Join(dir, "key.pem") + `}
  auth: {bearer_token: "${file:token}"}
`)
	if err != nil || p.HTTP != ":9464" || p.HTTPOptions.BearerToken != "t0ken-s3cret" || p.HTTPOptions.TLSKeyFile == "" {
		t.Fatalf("mapping form: %+v %v", p, err)
	}
	p, err = load("http: {listen: ':1', auth: {username: prom, password: '${file:pw}'}}\n")
	if err != nil || p.HTTPOptions.Username != "prom" || p.HTTPOptions.Password != "pw-s3cret" {
		t.Fatalf("basic auth: %+v %v", p, err)
	}
	p, err = load("http: {listen: ':1', limits: {read_header_timeout: 2s, read_timeout: 3s, write_timeout: 1m, idle_timeout: 90s, max_concurrent_requests: 4, max_header_bytes: 8KiB}}\n")
	if want := (HTTPOptions{ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: time.Minute, IdleTimeout: 90 * time.Second,
		MaxConcurrentRequests: 4, MaxHeaderBytes: 8 << 10}); err != nil || p.HTTPOptions != want {
		t.Fatalf("limits: %+v %v, want %+v", p.HTTPOptions, err, want)
	}
	for http, want := range map[string]string{
		"http: {listen: ':1', limits: {read_timeout: -1s}}\n":                                     "http.limits.read_timeout: ",
		"http: {listen: ':1', limits: {write_timeout: soon}}\n":                                   "http.limits.write_timeout: ",
		"http: {listen: ':1', limits: {max_concurrent_requests: 0}}\n":                            "http.limits.max_concurrent_requests: ",
		"http: {listen: ':1', limits: {max_header_bytes: lots}}\n":                                "http.limits.max_header_bytes: ",
		"http: {listen: ':1', limits: {idle: 1s}}\n":                                              "http.limits.idle: unknown key",
		"http: {listen: nope}\n":                                                                  "http.listen",
		"http: {tls: {cert_file: a}}\n":                                                           "http.listen: required",
		"http: {listen: ':1', tls: {cert_file: " + dir + "/cert.pem}}\n":                          "http.tls.key_file",
		"http: {listen: ':1', tls: {cert_file: /nonexistent, key_file: /x}}\n":                    "http.tls.cert_file",
		"http: {listen: ':1', auth: {username: u}}\n":                                             "http.auth.password: required",
		"http: {listen: ':1', auth: {password: '${file:pw}'}}\n":                                  "http.auth.password: a password needs a username",
		"http: {listen: ':1', auth: {username: u, password: p, bearer_token: '${file:token}'}}\n": "not both",
		"http: {listn: ':1'}\n":                                                                   "http.listn: unknown key (http has listen, tls, auth, limits, console); did you mean listen?",
		"http: {listen: ':1', tls: [a]}\n":                                                        "http.tls: must be a mapping",
		"http: {listen: ':1', auth: {token: x}}\n":                                                "http.auth.token: unknown key",
	} {
		_, err := load(http)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: err = %v, want %q", strings.TrimSpace(http), err, want)
		}
	}
}
