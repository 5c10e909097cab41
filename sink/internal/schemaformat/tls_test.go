package schemaformat

import (
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// TLS settings reach the client: an https front (httptest, its own certificate) to the
// real registry is refused without its CA, read with the CA file, and read with
// InsecureSkipVerify.
func TestRegistryTLS(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("avro-tls")
	id := register(t, c, topic+"-value", "AVRO", tinySchema)
	r := avroSerialize(t, c, topic, id, map[string]any{"id": int64(1)})

	u, err := url.Parse(registryURL(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	httpsURL := srv.URL + u.Path

	d := newDecoder(t, httpsURL)
	_, err = d.Decode(Avro, r)
	var re *RegistryError
	if !errors.As(err, &re) || IsPoison(err) {
		t.Fatalf("unknown CA: err = %v, want a *RegistryError", err)
	}
	t.Logf("unknown CA: %v", err)

	for name, tc := range map[string]TLSConfig{"ca file": {CAFile: ca}, "insecure": {InsecureSkipVerify: true}} {
		d, err := New(Config{URL: httpsURL, TLS: tc})
		if err != nil {
			t.Fatal(err)
		}
		if m, err := d.Decode(Avro, r); err != nil || m.Value.(map[string]any)["id"] != int64(1) {
			t.Errorf("%s: %v %v", name, m.Value, err)
		}
		d.Close()
	}
}
