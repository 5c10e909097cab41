package schemaformat

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
)

// Config says how to reach the Schema Registry.
type Config struct {
	// URL is the registry's Confluent-compatible API, such as
	// http://127.0.0.1:8081 or, for Apicurio, http://host:8080/apis/ccompat/v7.
	URL string
	// Username and Password, when Username is set, are sent with HTTP basic auth.
	Username, Password string
	// BearerToken, when set, is sent as "Authorization: Bearer <token>". It excludes
	// Username.
	BearerToken string
	// TLS applies to https URLs.
	TLS TLSConfig
	// Timeout bounds each request to the registry, connecting included; 0 means 10s.
	Timeout time.Duration
}

// TLSConfig holds the TLS settings for an https registry URL.
type TLSConfig struct {
	// CAFile is a PEM file of the certificate authorities to trust instead of the
	// system's.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for mutual TLS.
	CertFile, KeyFile string
	// InsecureSkipVerify turns off the verification of the registry's certificate. Off
	// by default; for tests only.
	InsecureSkipVerify bool
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	if c.URL == "" {
		return errors.New("schemaformat: registry URL is empty")
	}
	if c.BearerToken != "" && c.Username != "" {
		return errors.New("schemaformat: registry basic auth and bearer token are exclusive")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return errors.New("schemaformat: registry TLS client certificate and key go together")
	}
	if c.Timeout < 0 {
		return errors.New("schemaformat: negative registry timeout")
	}
	return nil
}

// clientConfig turns c into the schemaregistry client's configuration.
//
// The client is given an *http.Client of ours for two reasons. Its own TLS setup never
// sets InsecureSkipVerify (SslDisableEndpointVerification only logs a warning in
// v2.11.1). And it decodes every error answer as JSON, so that a 5xx page in HTML from a
// proxy would surface as a JSON syntax error, which could not be told from a bad record;
// our transport turns such answers into errors, with their status, before the client reads
// them.
func (c *Config) clientConfig() (*schemaregistry.Config, error) {
	var conf *schemaregistry.Config
	switch {
	case c.BearerToken != "":
		conf = schemaregistry.NewConfigWithBearerAuthentication(c.URL, c.BearerToken, "", "")
	case c.Username != "":
		conf = schemaregistry.NewConfigWithBasicAuthentication(c.URL, c.Username, c.Password)
	default:
		conf = schemaregistry.NewConfig(c.URL)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	conf.ConnectionTimeoutMs = int(timeout / time.Millisecond)
	conf.RequestTimeoutMs = int(timeout / time.Millisecond)
	conf.SslCaLocation = c.TLS.CAFile
	conf.SslCertificateLocation = c.TLS.CertFile
	conf.SslKeyLocation = c.TLS.KeyFile
	conf.SslDisableEndpointVerification = c.TLS.InsecureSkipVerify
	// The caller retries on a temporary error with its own backoff; the client's sleeps
	// between retries (up to 20s) would only hold the partition longer.
	conf.MaxRetries = 0
	conf.CacheCapacity = clientCacheEntries // bounded: the default keeps every schema it ever fetched

	tlsConf, err := c.TLS.tlsConfig()
	if err != nil {
		return nil, err
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = tlsConf
	base.ResponseHeaderTimeout = timeout
	conf.HTTPClient = &http.Client{Transport: statusTransport{base}, Timeout: timeout}
	return conf, nil
}

func (t TLSConfig) tlsConfig() (*tls.Config, error) {
	conf := &tls.Config{InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // off unless asked for
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("schemaformat: registry TLS client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("schemaformat: registry TLS CA file: %w", err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("schemaformat: registry TLS CA file %s: no PEM certificate", t.CAFile)
		}
	}
	return conf, nil
}

// statusError is a failed answer that is not a registry's JSON error.
type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string {
	s := "HTTP " + http.StatusText(e.status)
	if e.body != "" {
		s += ": " + e.body
	}
	return s
}

// statusTransport turns failed answers into a *statusError before the client reads them:
// 5xx, 408 and 429 always (whatever their body), other 4xx unless their body is a
// registry's JSON error (such as {"error_code":40403,...}), which the client then decodes.
type statusTransport struct{ base http.RoundTripper }

func (t statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	s := resp.StatusCode
	if s < 400 {
		return resp, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if s < 500 && s != 408 && s != 429 {
		var e struct {
			Code *int `json:"error_code"`
		}
		if json.Unmarshal(b, &e) == nil && e.Code != nil {
			resp.Body = io.NopCloser(bytes.NewReader(b))
			return resp, nil
		}
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return nil, &statusError{status: s, body: strings.TrimSpace(string(b))}
}
