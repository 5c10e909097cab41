package schemaformat

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

const tinySchema = `{"type":"record","name":"T","fields":[{"name":"id","type":"long"}]}`

// Schemas are fetched once per id: many records make one request, counted by a proxy in
// front of the real registry.
func TestSchemaFetchedOncePerID(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("avro-cache")
	id1 := register(t, c, topic+"-value", "AVRO", tinySchema)
	id2 := register(t, c, topic+"-key", "AVRO", `{"type":"record","name":"K","fields":[{"name":"k","type":"string"}]}`)
	r1 := avroSerialize(t, c, topic, id1, map[string]any{"id": int64(5)})
	r2 := wire(id2, 2, 'x')

	p := startProxy(t)
	d := newDecoder(t, p.url())
	for i := range 200 {
		if m := decode(t, d, Avro, r1); m.Value.(map[string]any)["id"] != int64(5) {
			t.Fatalf("record %d: %v", i, m.Value)
		}
		decode(t, d, Avro, r2)
	}
	if n := p.requests.Load(); n != 2 {
		t.Fatalf("%d requests to the registry for 400 records of 2 schemas, want 2", n)
	}
}

// The parsed schemas are bounded in bytes: past the bound the cache starts again, every
// record still decodes (its schema fetched again), and the cache never holds more than
// the bound. Before the bound, 40 schemas of 2 KiB each stayed cached forever.
func TestSchemaCacheBounded(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("avro-bounded")
	pad := strings.Repeat("x", 2000)
	var records [][]byte
	for i := range 40 {
		schema := fmt.Sprintf(`{"type":"record","name":"T","doc":"%s %d","fields":[{"name":"id","type":"long"}]}`, pad, i)
		id := register(t, c, topic+"-value", "AVRO", schema)
		records = append(records, avroSerialize(t, c, topic, id, map[string]any{"id": int64(i)}))
	}
	maxCachedSchemaBytes = 10_000 // about four of them
	t.Cleanup(func() { maxCachedSchemaBytes = defaultMaxCachedSchemaBytes })
	p := startProxy(t)
	d := newDecoder(t, p.url())
	for round := range 2 {
		for i, r := range records {
			if m := decode(t, d, Avro, r); m.Value.(map[string]any)["id"] != int64(i) {
				t.Fatalf("round %d, record %d: %v", round, i, m.Value)
			}
			d.mu.RLock()
			held, n := d.bytes, len(d.schemas)
			d.mu.RUnlock()
			if held > maxCachedSchemaBytes || n > 5 {
				t.Fatalf("round %d, record %d: the cache holds %d schemas, %d bytes; want at most %d bytes", round, i, n, held, maxCachedSchemaBytes)
			}
		}
	}
}

// A registry that stops answering is a temporary error, never poison, and decoding goes
// on once it answers again. The proxy stands for the registry's address: it is stopped,
// then started again on the same port.
func TestRegistryStoppedAndRestarted(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("avro-down")
	id1 := register(t, c, topic+"-value", "AVRO", tinySchema)
	id2 := register(t, c, topic+"-value", "AVRO",
		`{"type":"record","name":"T","fields":[{"name":"id","type":"long"},{"name":"x","type":["null","long"],"default":null}]}`)
	r1 := avroSerialize(t, c, topic, id1, map[string]any{"id": int64(1)})
	r2 := avroSerialize(t, c, topic, id2, map[string]any{"id": int64(2), "x": int64(9)})

	p := startProxy(t)
	d := newDecoder(t, p.url())
	decode(t, d, Avro, r1)

	addr := p.addr
	p.stop()
	_, err := d.Decode(Avro, r2)
	re := wantTransient(t, err)
	t.Logf("stopped: %v (status %d)", err, re.Status)
	// A schema already fetched still decodes while the registry is away.
	decode(t, d, Avro, r1)

	p.start(addr)
	wantTree(t, decode(t, d, Avro, r2).Value, map[string]any{"id": int64(2), "x": int64(9)})
}

// 5xx answers (here with an HTML body, as from a proxy) and timeouts are temporary too.
func TestRegistry5xxAndTimeout(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("avro-5xx")
	id := register(t, c, topic+"-value", "AVRO", tinySchema)
	r := avroSerialize(t, c, topic, id, map[string]any{"id": int64(1)})

	p := startProxy(t)
	d, err := New(Config{URL: p.url(), Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	p.mode.Store("503")
	_, err = d.Decode(Avro, r)
	if re := wantTransient(t, err); re.Status != 503 {
		t.Errorf("status %d, want 503", re.Status)
	}
	t.Logf("503: %v", err)

	p.mode.Store("hang")
	start := time.Now()
	_, err = d.Decode(Avro, r)
	wantTransient(t, err)
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("timeout took %v", el)
	}
	t.Logf("hang: %v", err)

	p.mode.Store("")
	decode(t, d, Avro, r)
}

// A closed port: connection refused is temporary.
func TestRegistryClosedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d := newDecoder(t, "http://"+addr+"/apis/ccompat/v7")
	_, err = d.Decode(Avro, wire(1, 2))
	wantTransient(t, err)
	t.Logf("closed port: %v", err)
}

func TestConfigValidate(t *testing.T) {
	for name, c := range map[string]Config{
		"no url":         {},
		"basic + bearer": {URL: "http://x", Username: "u", BearerToken: "t"},
		"cert w/o key":   {URL: "http://x", TLS: TLSConfig{CertFile: "c.pem"}},
		"negative":       {URL: "http://x", Timeout: -1},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := New(Config{URL: "https://x", TLS: TLSConfig{CAFile: "/nonexistent.pem"}}); err == nil {
		t.Error("missing CA file: no error")
	}
	for _, f := range []string{"avro", "protobuf", "json_schema"} {
		if got, err := ParseFormat(f); err != nil || string(got) != f {
			t.Errorf("ParseFormat(%s) = %v, %v", f, got, err)
		}
	}
	if _, err := ParseFormat("json"); err == nil {
		t.Error("ParseFormat(json): no error")
	}
	var re *RegistryError
	if errors.As(ErrMalformed, &re) {
		t.Error("ErrMalformed is a RegistryError")
	}
}

// Basic and bearer credentials reach the registry (the bed's registry has no
// authentication, so the proxy in front of it checks the header).
func TestRegistryAuthHeaders(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("avro-auth")
	id := register(t, c, topic+"-value", "AVRO", tinySchema)
	r := avroSerialize(t, c, topic, id, map[string]any{"id": int64(1)})
	p := startProxy(t)
	for _, tc := range []struct {
		conf Config
		want string
	}{
		{Config{URL: p.url(), Username: "user", Password: "p:w"}, "Basic dXNlcjpwOnc="},
		{Config{URL: p.url(), BearerToken: "tok123"}, "Bearer tok123"},
	} {
		d, err := New(tc.conf)
		if err != nil {
			t.Fatal(err)
		}
		decode(t, d, Avro, r)
		d.Close()
		if got, _ := p.auth.Load().(string); got != tc.want {
			t.Errorf("Authorization %q, want %q", got, tc.want)
		}
	}
}

// Answers that mean a wrong configuration are neither poison nor temporary: a URL that
// is the registry's host but not its Confluent-compatible API (the real registry answers
// 404 there), and a 401 in plain text.
func TestRegistryMisconfigured(t *testing.T) {
	c := newClient(t)
	topic := uniqueTopic("avro-misconf")
	id := register(t, c, topic+"-value", "AVRO", tinySchema)
	r := avroSerialize(t, c, topic, id, map[string]any{"id": int64(1)})

	u, err := url.Parse(registryURL(t))
	if err != nil {
		t.Fatal(err)
	}
	d := newDecoder(t, "http://"+u.Host) // without /apis/ccompat/v7
	_, err = d.Decode(Avro, r)
	var re *RegistryError
	if !errors.As(err, &re) || re.Temporary() || IsPoison(err) || errors.Is(err, ErrRegistryUnavailable) {
		t.Fatalf("wrong path: err = %v, want a permanent *RegistryError", err)
	}
	t.Logf("wrong path: %v", err)

	p := startProxy(t)
	p.mode.Store("401")
	d = newDecoder(t, p.url())
	_, err = d.Decode(Avro, r)
	if !errors.As(err, &re) || re.Temporary() || re.Status != 401 || IsPoison(err) {
		t.Fatalf("401: err = %v, want a permanent *RegistryError with status 401", err)
	}
	t.Logf("401: %v", err)
}
