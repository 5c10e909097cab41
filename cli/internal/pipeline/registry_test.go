package pipeline

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eosink/eosink/sink/plugin"
	_ "github.com/eosink/eosink/sink/table" // table, with value_format: avro
)

func TestSchemaRegistrySection(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "registry-password"), []byte("reg-secret-5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := minimal + `
schema_registry:
  url: http://127.0.0.1:8081/apis/ccompat/v7/
  username: sink
  password: ${file:registry-password}
  timeout: 3s
  tls:
    ca_file: /etc/ca.pem
    cert_file: /etc/client.pem
    key_file: /etc/client.key
    insecure_skip_verify: false
`
	p, err := Parse(filepath.Join(dir, "pipeline.yaml"), []byte(text), Options{LogOutput: new(bytes.Buffer)})
	if err != nil {
		t.Fatal(err)
	}
	want := &plugin.SchemaRegistry{URL: "http://127.0.0.1:8081/apis/ccompat/v7", Username: "sink", Password: "reg-secret-5",
		Timeout: 3 * time.Second, TLS: plugin.SchemaRegistryTLS{CAFile: "/etc/ca.pem", CertFile: "/etc/client.pem", KeyFile: "/etc/client.key"}}
	got := p.Config.Plugin.(*testPlugin).cfg.SchemaRegistry
	if !reflect.DeepEqual(got, want) || p.SchemaRegistry != got {
		t.Fatalf("plugin's SchemaRegistry = %+v, want %+v", got, want)
	}
	var summary bytes.Buffer
	if err := p.Summary(&summary); err != nil {
		t.Fatal(err)
	}
	if s := summary.String(); !strings.Contains(s, "registry:  http://127.0.0.1:8081/apis/ccompat/v7, basic auth as sink") || strings.Contains(s, "reg-secret") {
		t.Errorf("summary:\n%s", s)
	}

	// Without the section the plugin gets nil.
	p, err = parse(t, minimal, nil)
	if err != nil || p.Config.Plugin.(*testPlugin).cfg.SchemaRegistry != nil {
		t.Fatalf("no section: %v", err)
	}
}

func TestSchemaRegistryErrors(t *testing.T) {
	for name, tc := range map[string]struct{ section, want string }{
		"no url":           {"  username: u\n  password: p", "schema_registry.url: required"},
		"bad url":          {"  url: 127.0.0.1:8081", `schema_registry.url: not an http or https URL`},
		"password alone":   {"  url: http://r:1\n  password: secret-pw-9", "schema_registry.password: a password needs a username"},
		"basic and bearer": {"  url: http://r:1\n  username: u\n  bearer_token: secret-tok-9", "schema_registry.bearer_token: set username and password (basic auth) or bearer_token, not both"},
		"cert without key": {"  url: http://r:1\n  tls: {cert_file: c.pem}", "schema_registry.tls.key_file: tls.cert_file and tls.key_file go together"},
		"unknown tls key":  {"  url: http://r:1\n  tls: {ca_fil: c.pem}", "schema_registry.tls.ca_fil: unknown key (schema_registry.tls has ca_file, cert_file, key_file, insecure_skip_verify); did you mean ca_file?"},
		"unknown key":      {"  url: http://r:1\n  user: u", "schema_registry.user: unknown key (schema_registry has url, username, password, bearer_token, timeout, tls)"},
		"bad timeout":      {"  url: http://r:1\n  timeout: 3", `schema_registry.timeout: "3" is not a duration`},
		"bad bool":         {"  url: http://r:1\n  tls: {insecure_skip_verify: maybe}", `schema_registry.tls.insecure_skip_verify: "maybe" is not true or false`},
	} {
		t.Run(name, func(t *testing.T) {
			out := parseErr(t, minimal+"schema_registry:\n"+tc.section+"\n", nil)
			if !strings.Contains(out, tc.want) {
				t.Errorf("error:\n%s\nwant %q", out, tc.want)
			}
			if strings.Contains(out, "secret-") {
				t.Errorf("error shows a secret:\n%s", out)
			}
		})
	}
}

// A schema'd format without a schema_registry section fails at load, naming the option.
func TestSchemadFormatNeedsTheRegistry(t *testing.T) {
	tableSink := strings.Replace(minimal, "sink:\n  type: pipelinetest\n  table: events\n",
		"sink:\n  type: table\n  table: events\n  value_format: avro\n  columns: {id: value.after.id}\n", 1)
	out := parseErr(t, tableSink, nil)
	if want := "sink.value_format: avro needs the pipeline's schema_registry section"; !strings.Contains(out, want) {
		t.Errorf("error:\n%s\nwant %q", out, want)
	}
	p, err := parse(t, tableSink+"schema_registry:\n  url: http://127.0.0.1:8081\n", nil)
	if err != nil {
		t.Fatalf("with the section: %v", err)
	}
	if p.PluginType != "table" {
		t.Fatal(p.PluginType)
	}
	out = parseErr(t, strings.Replace(tableSink, "value_format: avro", "value_format: avro2", 1), nil)
	if want := `unknown format "avro2" (want json, string, bytes, avro, protobuf or json_schema)`; !strings.Contains(out, want) {
		t.Errorf("error:\n%s\nwant %q", out, want)
	}
}

// A plugin's problems are all reported, each at its field with the sink. prefix and its
// line, like the file's own.
func TestPluginErrorsAllAtTheirFields(t *testing.T) {
	text := strings.Replace(minimal, "sink:\n  type: pipelinetest\n  table: events\n", `sink:
  type: upsert
  table: events
  key: [id]
  on_conflict: replace
  columns:
    id: value.id
    sku: {from: value.sku, required: "yes"}
    at:
      from: value.ts
      cast: epoch_sec
    region: {from: value.region, default: eu, required: true}
    seen: {from: value.seen, cast: rfc3339, default: yesterday}
    bad: {from: nope, colour: red}
  routes:
    - topic: audit
      table: audit
      columns: {who: {from: value.who, cast: int}}
`, 1)
	text = strings.Replace(text, "topics: [orders]", "topics: [orders, audit]", 1)
	out := parseErr(t, text, nil)
	for _, want := range []string{
		`pipeline.yaml: sink.columns.sku.required: want true or false (line 15)`,
		`pipeline.yaml: sink.columns.at.cast: unknown cast "epoch_sec" (want epoch_s, epoch_ms, epoch_us, rfc3339, base64 or json) (line 18)`,
		`pipeline.yaml: sink.columns.region.default: a default and required: true exclude each other`,
		`pipeline.yaml: sink.columns.seen.default: cast rfc3339: "yesterday" is not an RFC 3339 timestamp (line 20)`,
		`pipeline.yaml: sink.columns.bad.colour: unknown key (sink.columns.bad has from, expr, required, cast, default) (line 21)`,
		`pipeline.yaml: sink.columns.bad.from: mapping: bad source "nope"`,
		`pipeline.yaml: sink.routes[0].columns.who.cast: unknown cast "int"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("error:\n%s\nwant %q", out, want)
		}
	}
	// The table's problems stop the build before on_conflict is read; each line is one field.
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "pipeline.yaml: sink.") {
			t.Errorf("line %q is not at a sink field", line)
		}
	}
}
