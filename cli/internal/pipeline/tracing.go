package pipeline

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Tracing's defaults, for eosink run (docs/pipeline-config.md#tracing).
const (
	// DefaultTracingServiceName is the service.name of the spans' resource.
	DefaultTracingServiceName = "eosink"
	// DefaultTracingTimeout bounds one export request.
	DefaultTracingTimeout = 10 * time.Second
	// TracesPath is the OTLP/HTTP path of traces, appended to an endpoint without a path.
	TracesPath = "/v1/traces"
)

// TracingOptions are the tracing section's settings: eosink run exports the sink's spans
// (eosink.batch and its children, sink/trace.go) over OTLP/HTTP with protobuf. A file
// without the section exports nothing.
type TracingOptions struct {
	// Endpoint (tracing.endpoint) is the full URL spans are posted to: the section's value,
	// with /v1/traces appended when it has no path, or, when the section sets none,
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else OTEL_EXPORTER_OTLP_ENDPOINT with
	// /v1/traces appended. Required, in one of these forms. http:// sends in clear;
	// https:// uses TLS.
	Endpoint string
	// EndpointFrom names where Endpoint came from: "tracing.endpoint" or the variable.
	EndpointFrom string
	// Headers (tracing.headers) are sent with every export request, for example an API
	// key. Their values are secrets: never logged or shown. Defaults to none.
	Headers map[string]string
	// CAFile, CertFile and KeyFile (tracing.tls.*) are PEM files: the certificate
	// authorities to trust instead of the system's, and a client certificate and its key
	// (both or neither). Only for an https:// endpoint. Default to none.
	CAFile, CertFile, KeyFile string
	// InsecureSkipVerify (tracing.tls.insecure_skip_verify) accepts any server
	// certificate. Defaults to false.
	InsecureSkipVerify bool
	// Sampling (tracing.sampling) is the share of batches traced, 0 to 1, as a parent-based
	// ratio sampler. Defaults to 1: every batch.
	Sampling float64
	// ServiceName (tracing.service_name) is the resource's service.name. Defaults to
	// DefaultTracingServiceName. The resource also carries eosink.pipeline.
	ServiceName string
	// Timeout (tracing.timeout) bounds one export request. Defaults to
	// DefaultTracingTimeout.
	Timeout time.Duration
}

func init() {
	sectionKeys["tracing"] = []string{"endpoint", "protocol", "headers", "tls", "sampling", "service_name", "timeout"}
	sectionKeys["tracing.tls"] = []string{"ca_file", "cert_file", "key_file", "insecure_skip_verify"}
}

// tracing reads the tracing section; nil when the file has none or it is null. An empty
// mapping (tracing: {}) traces with the defaults, to the OTEL_EXPORTER_OTLP_* endpoint.
func (l *loader) tracing(n *yaml.Node) *TracingOptions {
	const path = "tracing"
	n = deref(n)
	if isNull(n) {
		return nil
	}
	keys := l.keys(path, n)
	if n.Kind != yaml.MappingNode {
		return nil
	}
	o := &TracingOptions{Sampling: 1, ServiceName: DefaultTracingServiceName, Timeout: DefaultTracingTimeout}
	if s, ok := l.value(path+".protocol", keys["protocol"]); ok && s.val != "http/protobuf" {
		l.fail(path+".protocol", s.line, "%s is not supported; eosink exports http/protobuf (OTLP/HTTP, the Collector's port 4318)", describe(s))
	}
	o.Endpoint, o.EndpointFrom = l.tracingEndpoint(path+".endpoint", keys["endpoint"], n.Line)
	o.Headers = l.tracingHeaders(path+".headers", keys["headers"])

	tlsKeys := l.keys(path+".tls", keys["tls"])
	o.CAFile = l.str(path+".tls.ca_file", tlsKeys["ca_file"])
	o.CertFile = l.str(path+".tls.cert_file", tlsKeys["cert_file"])
	o.KeyFile = l.str(path+".tls.key_file", tlsKeys["key_file"])
	o.InsecureSkipVerify = l.boolean(path+".tls.insecure_skip_verify", tlsKeys["insecure_skip_verify"])
	if (o.CertFile == "") != (o.KeyFile == "") {
		missing := path + ".tls.key_file"
		if o.CertFile == "" {
			missing = path + ".tls.cert_file"
		}
		l.fail(missing, l.lines[path+".tls"], "tls.cert_file and tls.key_file go together (a client certificate and its key)")
	}
	l.readable(path+".tls.ca_file", o.CAFile)
	l.readable(path+".tls.cert_file", o.CertFile)
	l.readable(path+".tls.key_file", o.KeyFile)
	tlsSet := o.CAFile != "" || o.CertFile != "" || o.InsecureSkipVerify
	if tlsSet && strings.HasPrefix(o.Endpoint, "http://") {
		l.fail(path+".tls", l.lines[path+".tls"], "needs an https:// endpoint (%s is plain http)", o.EndpointFrom)
	}

	if s, ok := l.value(path+".sampling", keys["sampling"]); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(s.val), 64)
		switch {
		case err != nil:
			l.bad(path+".sampling", s.line, "%s is not a number between 0 and 1 (the share of batches traced)", describe(s))
		case !(f >= 0 && f <= 1):
			what := s.val
			if s.subst {
				what = describe(s)
			}
			l.bad(path+".sampling", s.line, "%s is not between 0 and 1", what)
		default:
			o.Sampling = f
		}
	}
	if s, ok := l.value(path+".service_name", keys["service_name"]); ok {
		o.ServiceName = s.val
	}
	if d := l.duration(path+".timeout", keys["timeout"]); d > 0 {
		o.Timeout = d
	}
	return o
}

// tracingEndpoint reads tracing.endpoint, or the OTEL_EXPORTER_OTLP_* variables when it is
// absent, and returns the URL to post to and where it came from.
func (l *loader) tracingEndpoint(path string, n *yaml.Node, sectionLine int) (endpoint, from string) {
	s, ok := l.value(path, n)
	var raw string
	switch {
	case ok:
		raw, from = s.val, path
	case s.failed || s.unresolved:
		return "", path
	default:
		if v, set := l.x.lookupEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); set && v != "" {
			from = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
			if u, err := url.Parse(v); err == nil && u.Path == "" {
				v = strings.TrimRight(v, "/") + "/" // as written: a root path, not /v1/traces
			}
			raw = v
		} else if v, set := l.x.lookupEnv("OTEL_EXPORTER_OTLP_ENDPOINT"); set && v != "" {
			from = "OTEL_EXPORTER_OTLP_ENDPOINT"
			raw = strings.TrimRight(v, "/") + TracesPath
		} else {
			l.fail(path, sectionLine, "required: the OTLP/HTTP receiver, for example http://127.0.0.1:4318 (or set OTEL_EXPORTER_OTLP_ENDPOINT)")
			return "", path
		}
	}
	line := s.line
	if line == 0 {
		line = sectionLine
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		what := "the value"
		if from == path && (u == nil || u.User == nil) { // never a password
			what = describe(s)
		}
		l.bad(path, line, "%s (from %s) is not an http:// or https:// URL without credentials (for example http://127.0.0.1:4318; put credentials in tracing.headers)", what, from)
		return "", from
	}
	if u.Path == "" {
		u.Path = TracesPath
	}
	return u.String(), from
}

// tracingHeaders reads tracing.headers: a mapping of HTTP header names to single values.
// The values are secrets.
func (l *loader) tracingHeaders(path string, n *yaml.Node) map[string]string {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		l.bad(path, n.Line, "must be a mapping of HTTP header names to values, not %s", kindName(n))
		return nil
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn := deref(n.Content[i])
		name := kn.Value
		p := path + "[" + name + "]"
		if kn.Kind != yaml.ScalarNode || !headerName(name) {
			l.fail(path, kn.Line, "%s is not an HTTP header name (letters, digits and -)", strconv.Quote(name))
			continue
		}
		if _, dup := out[name]; dup {
			l.bad(p, kn.Line, "duplicate key")
			continue
		}
		s, ok := l.value(p, n.Content[i+1])
		l.lines[p] = kn.Line
		if !ok {
			if !s.failed && !s.unresolved {
				l.bad(p, kn.Line, "needs a value")
			}
			continue
		}
		if strings.ContainsAny(s.val, "\r\n") {
			l.bad(p, kn.Line, "the value holds a line break, which no header can hold")
			continue
		}
		l.secrets.Add(s.val)
		out[name] = s.val
	}
	return out
}

// headerName reports whether s is an HTTP header name (RFC 9110 token characters).
func headerName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// tracingText is the summary's tracing line: where spans go, never the header values.
func (p *Pipeline) tracingText() string {
	o := p.Tracing
	if o == nil {
		return "off"
	}
	endpoint := o.Endpoint
	if _, ok := p.unresolved["tracing.endpoint"]; ok {
		endpoint = p.unsetText("tracing.endpoint")
	}
	s := fmt.Sprintf("OTLP/HTTP to %s, sampling %g, service %s, timeout %s", endpoint, o.Sampling, o.ServiceName, o.Timeout)
	if o.EndpointFrom != "" && o.EndpointFrom != "tracing.endpoint" {
		s += " (endpoint from " + o.EndpointFrom + ")"
	}
	if len(o.Headers) > 0 {
		s += fmt.Sprintf("; headers %s (values not shown)", strings.Join(sortedKeys(o.Headers), ", "))
	}
	if o.CertFile != "" {
		s += "; client certificate"
	}
	if o.InsecureSkipVerify {
		s += "; tls.insecure_skip_verify"
	}
	return s
}
