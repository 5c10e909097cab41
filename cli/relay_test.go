package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eosink/eosink/internal/testbed"
)

// TestRelayConfigFile: the relay's file expands ${VAR} and ${VAR:-default}, refuses unknown
// keys and bad values naming them, and -validate checks it without connecting.
func TestRelayConfigFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RELAY_TEST_URL", "postgres://u:secretpw@127.0.0.1:1/db")
	write := func(text string) string {
		p := filepath.Join(dir, "relay.yaml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Run(context.Background(), args, &out, &errb)
		return code, out.String() + errb.String()
	}
	good := write("database:\n  url: ${RELAY_TEST_URL}\n  schema: shop\nkafka:\n  brokers: 127.0.0.1:1\nrelay:\n  shards: ${RELAY_TEST_SHARDS:-4}\n  own: [1, 3]\n  retention: 0s\n")
	c, _, _, err := loadRelay(good, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Shards != 4 || len(c.Own) != 2 || c.Schema != "shop" || c.Retention == nil || *c.Retention != 0 || c.Kafka["bootstrap.servers"] != "127.0.0.1:1" {
		t.Errorf("loaded %+v", c)
	}
	if code, out := run("relay", "-validate", "-config", good); code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("-validate: exit %d\n%s", code, out)
	}
	for _, tc := range []struct{ text, want string }{
		{"database:\n  url: x\nrelay:\n  shard: 2\n", "field shard not found"},
		{"database:\n  url: ${RELAY_TEST_UNSET}\n", "RELAY_TEST_UNSET is not set"},
		{"database:\n  url: ${RELAY_TEST_URL}\nkafka:\n  brokers: b:1\nrelay:\n  shards: 2\n  own: [2]\n", "Own: shard 2 is not between 0 and 1"},
		{"database:\n  url: ${RELAY_TEST_URL}\nrelay:\n  shards: 2\n", "bootstrap.servers is required"},
		// The log section is read as a pipeline file's: its key and line named, references expanded.
		{"database:\n  url: ${RELAY_TEST_URL}\nlog:\n  level: loud\n", "log.level: \"loud\" is not debug, info, warn or error (line 4)"},
		{"database:\n  url: ${RELAY_TEST_URL}\nlog: {format: \"${RELAY_TEST_FORMAT:-xml}\"}\n", "log.format: the value of \"${RELAY_TEST_FORMAT:-xml}\" is not text or json"},
		{"log: {colour: red}\n", "log.colour: unknown key (log has format, level)"},
	} {
		code, out := run("relay", "-validate", "-config", write(tc.text))
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d, want an error with %q:\n%s", tc.text, code, tc.want, out)
		}
		if strings.Contains(out, "secretpw") {
			t.Errorf("%q: the password is shown:\n%s", tc.text, out)
		}
	}
}

// TestRelayServesTheHTTPSection: the relay's http section takes eosink run's mapping form:
// HTTPS with tls.cert_file and tls.key_file, /metrics only with the bearer token (read with
// ${file:...}), /healthz without it; the token never shows in the output.
func TestRelayServesTheHTTPSection(t *testing.T) {
	e := testbed.Require(t)
	schema := testbed.Schema(t, e)
	cert, key, pool := selfSigned(t)
	addr := freeAddr(t)
	file := writeFile(t, fmt.Sprintf(`database: {url: %q, schema: %s}
kafka: {brokers: %q}
relay: {name: %s, shards: 1, position_topic: %s, poll_interval: 50ms}
http:
  listen: %s
  tls: {cert_file: %s, key_file: %s}
  auth: {bearer_token: "${file:token}"}
`, e.DatabaseURL, schema, e.Brokers, testbed.Name(t, "relay"), testbed.Topic(t, e, 1), addr, cert, key))
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), "token"), []byte("relay-t0ken-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	exit := make(chan int, 1)
	go func() { exit <- Run(ctx, []string{"relay", "-migrate", "-config", file}, &out, &errb) }()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	testbed.Eventually(t, 60*time.Second, "https /healthz without credentials", func() (bool, string) {
		resp, err := c.Get("https://" + addr + "/healthz")
		if err != nil {
			return false, err.Error() + " " + errb.String()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	if got := request(t, c, "https://"+addr+"/metrics", nil); got != 401 {
		t.Fatalf("/metrics without the token: %d", got)
	}
	if got := request(t, c, "https://"+addr+"/metrics", func(r *http.Request) { r.Header.Set("Authorization", "Bearer relay-t0ken-s3cret") }); got != 200 {
		t.Fatalf("/metrics with the token: %d", got)
	}
	if got := request(t, &http.Client{Timeout: 5 * time.Second}, "http://"+addr+"/healthz", nil); got == 200 {
		t.Fatalf("plain http served on the TLS listener")
	}
	cancel()
	if code := <-exit; code != 0 {
		t.Fatalf("relay: exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String()+errb.String(), "relay-t0ken-s3cret") {
		t.Fatalf("the token shows in the relay's output: %s", errb.String())
	}
}

// TestRelayHTTPSectionErrors: the relay's http section is checked as eosink run's is.
func TestRelayHTTPSectionErrors(t *testing.T) {
	for _, tc := range []struct{ http, want string }{
		{"http: 127.0.0.1:notaport\n", "http: \"127.0.0.1:notaport\" is not a listen address"},
		{"http: {listen: 127.0.0.1:0, tls: {cert_file: /nonexistent.pem}}\n", "tls.cert_file and tls.key_file go together"},
		{"http: {listen: 127.0.0.1:0, auth: {username: u}}\n", "http.auth.password: required with username"},
		{"http: {listen: 127.0.0.1:0, bogus: 1}\n", "http.bogus: unknown key"},
	} {
		file := writeFile(t, "database: {url: \"postgres://u@127.0.0.1:1/x\"}\nkafka: {brokers: 127.0.0.1:1}\nrelay: {shards: 1}\n"+tc.http)
		code, out, errs := runCLI("relay", "-validate", "-config", file)
		if code == 0 || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%q: exit %d, want an error with %q:\n%s", tc.http, code, tc.want, out+errs)
		}
	}
}
