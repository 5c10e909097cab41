package schemaformat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
)

// Integration tests run against the real registry of the test bed (Apicurio Registry's
// Confluent-compatible API): `make services`, then EOSINK_REGISTRY_URL. They fail, not
// skip, without it.

func registryURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("EOSINK_REGISTRY_URL")
	if u == "" {
		t.Fatal("EOSINK_REGISTRY_URL is not set: start the test bed (make services, or test/services/services.sh up) and source its env")
	}
	return u
}

// newClient returns a registry client of the test's own, for registering and serializing.
func newClient(t *testing.T) schemaregistry.Client {
	t.Helper()
	c, err := schemaregistry.NewClient(schemaregistry.NewConfig(registryURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newDecoder(t *testing.T, url string) *Decoder {
	t.Helper()
	d, err := New(Config{URL: url, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// uniqueTopic names a topic (and so subjects) that no earlier run used: the registry keeps
// its schemas while it runs.
func uniqueTopic(name string) string {
	return fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
}

func register(t *testing.T, c schemaregistry.Client, subject, schemaType, schema string) int {
	t.Helper()
	id, err := c.Register(subject, schemaregistry.SchemaInfo{Schema: schema, SchemaType: schemaType}, false)
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	return id
}

func decode(t *testing.T, d *Decoder, f Format, data []byte) Message {
	t.Helper()
	m, err := d.Decode(f, data)
	if err != nil {
		t.Fatalf("decode %x: %v", data, err)
	}
	return m
}

func wantTree(t *testing.T, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tree differs:\n got %s\nwant %s", dump(got), dump(want))
	}
}

func dump(v any) string {
	switch v := v.(type) {
	case map[string]any:
		var b strings.Builder
		b.WriteString("{")
		for k, x := range v {
			fmt.Fprintf(&b, "%s: %s, ", k, dump(x))
		}
		return b.String() + "}"
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = dump(x)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprintf("%T(%#v)", v, v)
}

// wire returns a record in the wire format with schema id and body.
func wire(id int, body ...byte) []byte {
	return append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, body...)
}

// proxy is a reverse proxy to the real registry that the test can count, stop, restart
// and make fail, standing for a registry that goes away.
type proxy struct {
	t        *testing.T
	target   *url.URL
	addr     string
	srv      *http.Server
	requests atomic.Int64
	mode     atomic.Value // "", "503", "401", "hang"
	auth     atomic.Value // the last Authorization header
}

func startProxy(t *testing.T) *proxy {
	t.Helper()
	u, err := url.Parse(registryURL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, target: &url.URL{Scheme: u.Scheme, Host: u.Host}}
	p.mode.Store("")
	p.start("127.0.0.1:0")
	t.Cleanup(p.stop)
	return p
}

// url is the registry URL through the proxy.
func (p *proxy) url() string {
	u, _ := url.Parse(registryURL(p.t))
	return "http://" + p.addr + u.Path
}

func (p *proxy) start(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	rp := httputil.NewSingleHostReverseProxy(p.target)
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		p.auth.Store(r.Header.Get("Authorization"))
		switch p.mode.Load().(string) {
		case "503":
			http.Error(w, "<html>service unavailable</html>", http.StatusServiceUnavailable)
			return
		case "401":
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		case "hang":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go p.srv.Serve(ln)
}

func (p *proxy) stop() {
	if p.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p.srv.Shutdown(ctx)
		p.srv.Close()
		p.srv = nil
	}
}

func wantTransient(t *testing.T, err error) *RegistryError {
	t.Helper()
	var re *RegistryError
	if !errors.Is(err, ErrRegistryUnavailable) || !errors.As(err, &re) || !re.Temporary() || IsPoison(err) {
		t.Fatalf("err = %v, want a temporary *RegistryError", err)
	}
	return re
}
