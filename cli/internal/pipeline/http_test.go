package pipeline

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	for http, want := range map[string]string{
		"http: {listen: nope}\n":                                                                  "http.listen",
		"http: {tls: {cert_file: a}}\n":                                                           "http.listen: required",
		"http: {listen: ':1', tls: {cert_file: " + dir + "/cert.pem}}\n":                          "http.tls.key_file",
		"http: {listen: ':1', tls: {cert_file: /nonexistent, key_file: /x}}\n":                    "http.tls.cert_file",
		"http: {listen: ':1', auth: {username: u}}\n":                                             "http.auth.password: required",
		"http: {listen: ':1', auth: {password: '${file:pw}'}}\n":                                  "http.auth.password: a password needs a username",
		"http: {listen: ':1', auth: {username: u, password: p, bearer_token: '${file:token}'}}\n": "not both",
		"http: {listn: ':1'}\n":                                                                   "http.listn: unknown key (http has listen, tls, auth); did you mean listen?",
		"http: {listen: ':1', tls: [a]}\n":                                                        "http.tls: must be a mapping",
		"http: {listen: ':1', auth: {token: x}}\n":                                                "http.auth.token: unknown key",
	} {
		_, err := load(http)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: err = %v, want %q", strings.TrimSpace(http), err, want)
		}
	}
}
