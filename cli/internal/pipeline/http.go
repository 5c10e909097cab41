package pipeline

import (
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/internal/suggest"
)

// HTTPOptions are the http section's settings beyond its listen address (Pipeline.HTTP).
type HTTPOptions struct {
	// TLSCertFile and TLSKeyFile (tls.cert_file, tls.key_file) serve HTTPS with this PEM
	// certificate (chain) and key. Both or neither. Defaults to plain HTTP.
	TLSCertFile, TLSKeyFile string
	// Username and Password (auth.username, auth.password) require basic authentication
	// on /metrics. Defaults to none.
	Username, Password string
	// BearerToken (auth.bearer_token) requires "Authorization: Bearer TOKEN" on /metrics.
	// Not with Username. Defaults to none.
	BearerToken string

	// The server's limits (limits.*); zero takes eosink run's default, given after each.
	// ReadHeaderTimeout: a request's headers arrive within it (5s).
	// ReadTimeout: the whole request arrives within it (10s).
	// WriteTimeout: the response is written within it, from the end of the headers (30s).
	// IdleTimeout: a keep-alive connection is closed after it without a request (60s).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxConcurrentRequests bounds the requests served at once, separately for the probes
	// and for the rest; one more gets 503 at once (16).
	MaxConcurrentRequests int
	// MaxHeaderBytes bounds a request's headers (16 KiB).
	MaxHeaderBytes int
	// Console (http.console) serves the console's pages and management API at / and
	// /api/v1 beside /metrics, with the console section's mutations and tokens_file (its
	// listen and tls are the console command's own: here the http section's apply).
	// eosink run only. Defaults to false.
	Console bool
}

// sectionKeys are the keys of the sections that keys reads: the http section in its mapping
// form, and the log section of the eosink command's other config files (LogSection).
var sectionKeys = map[string][]string{
	"log":         {"format", "level"},
	"http":        {"listen", "tls", "auth", "limits", "console"},
	"http.limits": {"read_header_timeout", "read_timeout", "write_timeout", "idle_timeout", "max_concurrent_requests", "max_header_bytes"},
	"http.tls":    {"cert_file", "key_file"},
	"http.auth":   {"username", "password", "bearer_token"},
	"console":     {"listen", "tls", "mutations", "tokens_file"},
	"console.tls": {"cert_file", "key_file"},
}

// http reads the http section: a listen address ("127.0.0.1:9464"), or a mapping with
// listen, tls, auth and limits.
func (l *loader) http(n *yaml.Node) (string, HTTPOptions) {
	var o HTTPOptions
	n = deref(n)
	if isNull(n) {
		return "", o
	}
	if n.Kind != yaml.MappingNode {
		return l.listen("http", n), o
	}
	keys := l.keys("http", n)
	listen := l.listen("http.listen", keys["listen"])
	if listen == "" && !l.unknown("http.listen") {
		l.fail("http.listen", n.Line, "required: the address to serve on (host:port, for example 127.0.0.1:9464)")
	}
	o.TLSCertFile, o.TLSKeyFile = l.tls("http.tls", keys["tls"])
	auth := l.keys("http.auth", keys["auth"])
	user, hasUser := l.value("http.auth.username", auth["username"])
	o.Username = user.val
	if s, ok := l.value("http.auth.password", auth["password"]); ok {
		o.Password = s.val
		l.secrets.Add(s.val)
	}
	if s, ok := l.value("http.auth.bearer_token", auth["bearer_token"]); ok {
		o.BearerToken = s.val
		l.secrets.Add(s.val)
	}
	switch {
	case hasUser && o.BearerToken != "":
		l.fail("http.auth.bearer_token", l.lines["http.auth.bearer_token"], "set username and password (basic auth) or bearer_token, not both")
	case hasUser && o.Password == "" && !l.unresolvedWithin("http.auth.password"):
		l.fail("http.auth.password", l.lines["http.auth.username"], "required with username (for example ${file:/run/secrets/metrics-password})")
	case !hasUser && o.Password != "":
		l.fail("http.auth.password", l.lines["http.auth.password"], "a password needs a username")
	}
	lim := l.keys("http.limits", keys["limits"])
	for _, d := range []struct {
		key string
		p   *time.Duration
	}{{"read_header_timeout", &o.ReadHeaderTimeout}, {"read_timeout", &o.ReadTimeout}, {"write_timeout", &o.WriteTimeout}, {"idle_timeout", &o.IdleTimeout}} {
		*d.p = l.duration("http.limits."+d.key, lim[d.key])
	}
	o.MaxConcurrentRequests = l.count("http.limits.max_concurrent_requests", lim["max_concurrent_requests"])
	o.MaxHeaderBytes = l.size("http.limits.max_header_bytes", lim["max_header_bytes"])
	o.Console = l.boolean("http.console", keys["console"])
	return listen, o
}

// tls reads a tls section (path: http.tls, console.tls): cert_file and key_file, both or
// neither, each a file that can be read.
func (l *loader) tls(path string, n *yaml.Node) (cert, key string) {
	keys := l.keys(path, n)
	cert = l.str(path+".cert_file", keys["cert_file"])
	key = l.str(path+".key_file", keys["key_file"])
	if (cert == "") != (key == "") {
		missing := path + ".key_file"
		if cert == "" {
			missing = path + ".cert_file"
		}
		l.fail(missing, l.lines[path], "tls.cert_file and tls.key_file go together (the server's certificate and its key)")
	}
	l.readable(path+".cert_file", cert)
	l.readable(path+".key_file", key)
	return cert, key
}

// readable reports a file named at path that cannot be read ("": nothing to check).
func (l *loader) readable(path, file string) {
	if file == "" {
		return
	}
	if _, err := os.Stat(file); err != nil {
		l.fail(path, l.lines[path], "cannot read %q: %v", file, strings.TrimPrefix(err.Error(), "stat "+file+": "))
	}
}

// listen checks a listen address.
func (l *loader) listen(path string, n *yaml.Node) string {
	s, ok := l.value(path, n)
	if !ok {
		return ""
	}
	host, port, err := net.SplitHostPort(s.val)
	if p, perr := strconv.Atoi(port); err != nil || perr != nil || p < 0 || p > 65535 || strings.ContainsAny(host, " /") {
		l.fail(path, s.line, "%s is not a listen address (host:port, for example 127.0.0.1:9464 or :9464)", describe(s))
	}
	return s.val
}

// keys returns the values of the mapping at n by key, reporting keys that sectionKeys[path]
// does not list, duplicates, and a node that is not a mapping.
func (l *loader) keys(path string, n *yaml.Node) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	n = deref(n)
	if isNull(n) {
		return out
	}
	l.lines[path] = n.Line
	known := sectionKeys[path]
	if n.Kind != yaml.MappingNode {
		l.fail(path, n.Line, "must be a mapping of keys (%s), not %s", strings.Join(known, ", "), kindName(n))
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := deref(n.Content[i])
		switch {
		case !contains(known, k.Value):
			l.fail(join(path, k.Value), k.Line, "%s", suggest.UnknownKey(path, k.Value, known))
		case out[k.Value] != nil:
			l.fail(join(path, k.Value), k.Line, "duplicate key")
		default:
			out[k.Value] = n.Content[i+1]
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
