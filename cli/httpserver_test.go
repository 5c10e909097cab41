package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eosink/eosink/cli/internal/pipeline"
	"github.com/eosink/eosink/internal/testbed"
)

// endpoints stands for sinkhttp.Handler: /metrics, /healthz and /readyz; /metrics
// signals entered and blocks while block is open.
func endpoints(block, entered chan struct{}) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		if block != nil {
			entered <- struct{}{}
			<-block
		}
		io.WriteString(w, "eosink_up 1\n")
	})
	for _, p := range []string{"/healthz", "/readyz"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	}
	return mux
}

// startHTTP serves newHTTPServer on a free port and returns its address.
func startHTTP(t *testing.T, o pipeline.HTTPOptions, lim httpLimits, h http.Handler) string {
	t.Helper()
	srv, err := newHTTPServer(o, lim, h)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if srv.TLSConfig != nil {
			_ = srv.ServeTLS(ln, "", "")
		} else {
			_ = srv.Serve(ln)
		}
	}()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func request(t *testing.T, c *http.Client, url string, set func(*http.Request)) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if set != nil {
		set(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestHTTPEndpointAuthentication: with basic or bearer credentials, /metrics needs them and
// the probes do not.
func TestHTTPEndpointAuthentication(t *testing.T) {
	c := &http.Client{Timeout: 5 * time.Second}
	basic := startHTTP(t, pipeline.HTTPOptions{Username: "prom", Password: "s3cret"}, defaultHTTPLimits, endpoints(nil, nil))
	bearer := startHTTP(t, pipeline.HTTPOptions{BearerToken: "t0ken"}, defaultHTTPLimits, endpoints(nil, nil))
	steps := []struct {
		url  string
		set  func(*http.Request)
		want int
	}{
		{"http://" + basic + "/metrics", nil, 401},
		{"http://" + basic + "/metrics", func(r *http.Request) { r.SetBasicAuth("prom", "wrong") }, 401},
		{"http://" + basic + "/metrics", func(r *http.Request) { r.SetBasicAuth("other", "s3cret") }, 401},
		{"http://" + basic + "/metrics", func(r *http.Request) { r.SetBasicAuth("prom", "s3cret") }, 200},
		{"http://" + basic + "/healthz", nil, 200},
		{"http://" + basic + "/readyz", nil, 200},
		{"http://" + basic + "/metrics/../metrics", nil, 401},
		{"http://" + bearer + "/metrics", nil, 401},
		{"http://" + bearer + "/metrics", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 401},
		{"http://" + bearer + "/metrics", func(r *http.Request) { r.SetBasicAuth("prom", "t0ken") }, 401},
		{"http://" + bearer + "/metrics", func(r *http.Request) { r.Header.Set("Authorization", "Bearer t0ken") }, 200},
		{"http://" + bearer + "/healthz", nil, 200},
	}
	for _, s := range steps {
		if got := request(t, c, s.url, s.set); got != s.want {
			t.Errorf("GET %s: %d, want %d", s.url, got, s.want)
		}
	}
}

// TestHTTPEndpointTLS: with tls.cert_file and key_file the endpoint speaks HTTPS only.
func TestHTTPEndpointTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	addr := startHTTP(t, pipeline.HTTPOptions{TLSCertFile: certFile, TLSKeyFile: keyFile, BearerToken: "t0ken"}, defaultHTTPLimits, endpoints(nil, nil))
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if got := request(t, c, "https://"+addr+"/healthz", nil); got != 200 {
		t.Fatalf("https /healthz: %d", got)
	}
	if got := request(t, c, "https://"+addr+"/metrics", func(r *http.Request) { r.Header.Set("Authorization", "Bearer t0ken") }); got != 200 {
		t.Fatalf("https /metrics: %d", got)
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	resp, err := plain.Get("http://" + addr + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP served")
		}
	}
	if _, err := newHTTPServer(pipeline.HTTPOptions{TLSCertFile: keyFile, TLSKeyFile: keyFile}, defaultHTTPLimits, endpoints(nil, nil)); err == nil ||
		!strings.Contains(err.Error(), "http.tls") {
		t.Fatalf("bad certificate: %v", err)
	}
}

// TestHTTPEndpointLimits: a client that sends its headers too slowly, or holds a
// connection idle, is disconnected; requests beyond the concurrency bound get 503 at once,
// and probes still answer while /metrics is saturated.
// TestHTTPLimitsDefaults: the http section's limits replace the defaults they set, and only
// those.
func TestHTTPLimitsDefaults(t *testing.T) {
	if got := defaultHTTPLimits.with(pipeline.HTTPOptions{}); got != defaultHTTPLimits {
		t.Fatalf("no limits set: %+v, want the defaults %+v", got, defaultHTTPLimits)
	}
	want := defaultHTTPLimits
	want.write, want.maxConcurrent = time.Minute, 4
	if got := defaultHTTPLimits.with(pipeline.HTTPOptions{WriteTimeout: time.Minute, MaxConcurrentRequests: 4}); got != want {
		t.Fatalf("write_timeout and max_concurrent_requests set: %+v, want %+v", got, want)
	}
	if d := defaultHTTPLimits; d.readHeader != 5*time.Second || d.read != 10*time.Second || d.write != 30*time.Second ||
		d.idle != 60*time.Second || d.maxConcurrent != 16 || d.maxHeaderBytes != 16<<10 {
		t.Fatalf("the defaults differ from the documented ones: %+v", d)
	}
}

// TestHTTPEndpointLimits: the limits set in the http section (through HTTPOptions) hold.
func TestHTTPEndpointLimits(t *testing.T) {
	o := pipeline.HTTPOptions{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 2 * time.Second,
		IdleTimeout: 300 * time.Millisecond, MaxHeaderBytes: 4 << 10, MaxConcurrentRequests: 2}
	block, entered := make(chan struct{}), make(chan struct{}, 2)
	addr := startHTTP(t, o, defaultHTTPLimits.with(o), endpoints(block, entered))

	// Slow headers: the server closes the connection after readHeader.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // never finished
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	start := time.Now()
	_, err = io.ReadAll(conn)
	conn.Close()
	if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("slow headers: the connection was still open after %v", time.Since(start))
	}

	// Idle keep-alive: closed after idle.
	conn, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = io.ReadAll(conn) // the response, then EOF when the idle timeout closes it
	conn.Close()
	if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("idle connection: still open after 3s")
	}

	// Concurrency: two scrapes hold both slots; a third gets 503; probes still answer.
	c := &http.Client{Timeout: 5 * time.Second}
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get("http://" + addr + "/metrics")
			if err != nil {
				codes <- -1
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	<-entered
	<-entered
	if got := request(t, c, "http://"+addr+"/metrics", nil); got != 503 {
		t.Fatalf("third concurrent scrape: %d, want 503", got)
	}
	if got := request(t, c, "http://"+addr+"/readyz", nil); got != 200 {
		t.Fatalf("probe while /metrics is saturated: %d", got)
	}
	close(block)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Fatalf("blocked scrape: %d", code)
		}
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "eosink test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestRunServesTheHTTPSection: eosink run with http's mapping form serves /metrics only
// with the bearer token (read with ${file:...}) and the probes without it.
func TestRunServesTheHTTPSection(t *testing.T) {
	e := testbed.Require(t)
	topic := testbed.Topic(t, e, 1)
	schema := testbed.Schema(t, e)
	group := testbed.Name(t, "g")
	addr := freeAddr(t)
	file := writeFile(t, fmt.Sprintf(`
kafka: {brokers: %q, group: %s, topics: [%s]}
database: {url: %q, schema: %s}
sink: {type: clitest}
http:
  listen: %s
  auth: {bearer_token: "${file:token}"}
`, e.Brokers, group, topic, e.DatabaseURL, schema, addr))
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), "token"), []byte("t0ken-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if code, out, errs := runCLI("migrate", "up", "-config", file); code != 0 {
		t.Fatalf("migrate up: %d %s %s", code, out, errs)
	}
	var out, errb syncBuffer
	exit := make(chan int, 1)
	go func() { exit <- Run(ctx, []string{"run", "-config", file}, &out, &errb) }()
	c := &http.Client{Timeout: 5 * time.Second}
	testbed.Eventually(t, 30*time.Second, "/healthz without credentials", func() (bool, string) {
		resp, err := c.Get("http://" + addr + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	if got := request(t, c, "http://"+addr+"/metrics", nil); got != 401 {
		t.Fatalf("/metrics without the token: %d", got)
	}
	if got := request(t, c, "http://"+addr+"/metrics", func(r *http.Request) { r.Header.Set("Authorization", "Bearer t0ken-s3cret") }); got != 200 {
		t.Fatalf("/metrics with the token: %d", got)
	}
	cancel()
	if code := <-exit; code != 0 {
		t.Fatalf("run: exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String()+errb.String(), "t0ken-s3cret") || !strings.Contains(errb.String(), "metrics_auth=\"bearer token\"") {
		t.Fatalf("run's logs: %s", errb.String())
	}
}

// TestRunServesTheConsole: with http.console, eosink run serves the console's page and API
// beside /metrics on the http section's address, with the console section's tokens: the API
// needs a token (401 without), answers with the running pipeline's own position, the page is
// served with its Content-Security-Policy, /healthz stays open, and http.auth guards
// /metrics only.
func TestRunServesTheConsole(t *testing.T) {
	e := testbed.Require(t)
	topic := testbed.Topic(t, e, 1)
	schema := testbed.Schema(t, e)
	group := testbed.Name(t, "g")
	addr := freeAddr(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("run-console-token-0123 Run Operator\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, fmt.Sprintf(`
kafka: {brokers: %q, group: %s, topics: [%s]}
database: {url: %q, schema: %s}
sink: {type: clitest}
http:
  listen: %s
  console: true
  auth: {bearer_token: metrics-token-4567}
console:
  tokens_file: %s
`, e.Brokers, group, topic, e.DatabaseURL, schema, addr, tokens))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if code, out, errs := runCLI("migrate", "up", "-config", file); code != 0 {
		t.Fatalf("migrate up: %d %s %s", code, out, errs)
	}
	testbed.Produce(t, e, topic, []testbed.Msg{{Value: []byte(`{"id": 1}`)}, {Value: []byte(`{"id": 2}`)}})
	var out, errb syncBuffer
	exit := make(chan int, 1)
	go func() { exit <- Run(ctx, []string{"run", "-config", file}, &out, &errb) }()
	c := &http.Client{Timeout: 10 * time.Second}
	auth := func(r *http.Request) { r.Header.Set("Authorization", "Bearer run-console-token-0123") }
	testbed.Eventually(t, 60*time.Second, "the console's API with the pipeline's position", func() (bool, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/pipelines/"+group, nil)
		auth(req)
		resp, err := c.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		var d struct {
			Partitions []struct {
				NextOffset int64 `json:"next_offset"`
			} `json:"partitions"`
		}
		err = json.NewDecoder(resp.Body).Decode(&d)
		return resp.StatusCode == 200 && err == nil && len(d.Partitions) == 1 && d.Partitions[0].NextOffset == 2, fmt.Sprintf("%s %+v %v", resp.Status, d, err)
	})
	if got := request(t, c, "http://"+addr+"/api/v1/pipelines", nil); got != 401 {
		t.Fatalf("the API without a token: %d, want 401", got)
	}
	if got := request(t, c, "http://"+addr+"/healthz", nil); got != 200 {
		t.Fatalf("/healthz: %d", got)
	}
	// http.auth guards /metrics alone; the console's token is not the metrics token.
	if got := request(t, c, "http://"+addr+"/metrics", auth); got != 401 {
		t.Fatalf("/metrics with the console's token: %d, want 401", got)
	}
	if got := request(t, c, "http://"+addr+"/metrics", func(r *http.Request) { r.Header.Set("Authorization", "Bearer metrics-token-4567") }); got != 200 {
		t.Fatalf("/metrics with its token: %d", got)
	}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); resp.StatusCode != 200 || !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("the page: %s, CSP %q", resp.Status, csp)
	}
	cancel()
	if code := <-exit; code != 0 {
		t.Fatalf("run: exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String()+errb.String(), "run-console-token-0123") || !strings.Contains(errb.String(), "console=true") {
		t.Fatalf("run's logs: %s", errb.String())
	}
}
