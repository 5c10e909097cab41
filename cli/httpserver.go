package cli

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/eosink/eosink/cli/internal/pipeline"
)

// httpLimits bound what a client of the metrics and probes endpoint can hold.
type httpLimits struct {
	readHeader, read, write, idle time.Duration
	maxHeaderBytes                int
	// maxConcurrent bounds the requests being served at once, separately for /metrics (and
	// anything else) and for the probes, so that a flood of scrapes cannot fail a probe;
	// a request over the bound gets 503 at once.
	maxConcurrent int
}

// defaultHTTPLimits are eosink run's, unless the http section's limits set them: a request's
// headers within 5 s and its whole body within 10 s, the response written within 30 s (a
// scrape gathers every metric), idle keep-alive connections closed after 60 s, headers of at
// most 16 KiB, 16 requests at once per kind (pipeline.HTTPOptions documents them too).
var defaultHTTPLimits = httpLimits{
	readHeader: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second, idle: 60 * time.Second,
	maxHeaderBytes: 16 << 10, maxConcurrent: 16,
}

// isProbe reports whether a path is a probe: /healthz and /readyz are never authenticated,
// so that an orchestrator's probes need no credentials; they show no data beyond ok or not.
func isProbe(path string) bool { return path == "/healthz" || path == "/readyz" }

// with returns lim with the limits o sets.
func (lim httpLimits) with(o pipeline.HTTPOptions) httpLimits {
	for _, d := range []struct{ dst, v *time.Duration }{
		{&lim.readHeader, &o.ReadHeaderTimeout}, {&lim.read, &o.ReadTimeout}, {&lim.write, &o.WriteTimeout}, {&lim.idle, &o.IdleTimeout},
	} {
		if *d.v > 0 {
			*d.dst = *d.v
		}
	}
	if o.MaxConcurrentRequests > 0 {
		lim.maxConcurrent = o.MaxConcurrentRequests
	}
	if o.MaxHeaderBytes > 0 {
		lim.maxHeaderBytes = o.MaxHeaderBytes
	}
	return lim
}

// newHTTPServer wraps h (sinkhttp.Handler) with lim's timeouts and concurrency bound, o's
// authentication on every path but the probes, and o's TLS. Serve it with serveHTTP.
func newHTTPServer(o pipeline.HTTPOptions, lim httpLimits, h http.Handler) (*http.Server, error) {
	srv := &http.Server{
		Handler:           limitConcurrency(lim.maxConcurrent, authenticate(o, h)),
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    lim.maxHeaderBytes,
	}
	if o.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("http.tls: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return srv, nil
}

// limitConcurrency serves at most n requests at once of each kind (probes, the rest), and
// answers 503 to one more.
func limitConcurrency(n int, h http.Handler) http.Handler {
	if n <= 0 {
		return h
	}
	probes, others := make(chan struct{}, n), make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sem := others
		if isProbe(r.URL.Path) {
			sem = probes
		}
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
			h.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many concurrent requests", http.StatusServiceUnavailable)
		}
	})
}

// authenticate requires o's credentials on every path but the probes; without credentials
// it returns h. Credentials are compared in constant time.
func authenticate(o pipeline.HTTPOptions, h http.Handler) http.Handler {
	if o.Username == "" && o.BearerToken == "" {
		return h
	}
	sum := func(s string) []byte { b := sha256.Sum256([]byte(s)); return b[:] }
	wantUser, wantPassword, wantToken := sum(o.Username), sum(o.Password), sum(o.BearerToken)
	challenge := `Basic realm="eosink", charset="UTF-8"`
	if o.BearerToken != "" {
		challenge = `Bearer realm="eosink"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The probes are never authenticated; with http.console, the console's paths are
		// the console's to authenticate (its tokens), and these credentials guard /metrics.
		if isProbe(r.URL.Path) || (o.Console && r.URL.Path != "/metrics") {
			h.ServeHTTP(w, r)
			return
		}
		ok := false
		if o.BearerToken != "" {
			token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			ok = found && subtle.ConstantTimeCompare(sum(token), wantToken) == 1
		} else if user, password, found := r.BasicAuth(); found {
			ok = subtle.ConstantTimeCompare(sum(user), wantUser)&subtle.ConstantTimeCompare(sum(password), wantPassword) == 1
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
