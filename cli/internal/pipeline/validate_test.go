package pipeline

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNULBytesAreRefused: a NUL byte, written as "\0" or coming from a variable or a file,
// is refused in every value (names of the pipeline, group, topics, schema, tables; Kafka
// properties), in the sink section's keys and values, without printing the value.
func TestNULBytesAreRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nul"), []byte("orders\x00evil"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := strings.NewReplacer("group: orders-sink", "group: GROUP", "topics: [orders]", "topics: [TOPIC]",
		"table: events", "table: TABLE").Replace(minimal)
	cases := map[string]struct{ file, want string }{
		"pipeline": {"pipeline: \"p\\0x\"\n", "pipeline:"},
		"group":    {"", "kafka.group:"},
		"topic":    {"", "kafka.topics[0]:"},
		"schema":   {"", "database.schema:"},
		"table":    {"", "sink.table:"},
		"file":     {"", "kafka.group:"},
		"env":      {"", "kafka.topics[0]:"},
		"property": {"", "kafka.properties[client.id]:"},
		"sink key": {"", "sink:"},
	}
	for name, c := range cases {
		group, topic, table := "g", "t", "t"
		file := base
		switch name {
		case "group":
			group = `"g\0x"`
		case "topic":
			topic = `"t\0x"`
		case "schema":
			file += "database: {schema: \"s\\0x\"}\n"
			file = strings.Replace(file, "database:\n  url:", "db_:\n  url:", 1)
			file = strings.Replace(file, "database: {schema:", "database: {url: 'postgres://u@h/d', schema:", 1)
			file = strings.Replace(file, "db_:\n  url: postgres://eosink@127.0.0.1:5432/eosink\n", "", 1)
		case "table":
			table = `"t\0x"`
		case "file":
			group = "${file:nul}"
		case "env":
			topic = `"${NUL_TOPIC}"`
		case "property":
			file = strings.Replace(file, "  topics: [TOPIC]\n", "  topics: [TOPIC]\n  properties: {client.id: \"c\\0x\"}\n", 1)
		case "sink key":
			file += "" // below
		}
		file = strings.NewReplacer("GROUP", group, "TOPIC", topic, "TABLE", table).Replace(file)
		if name == "sink key" {
			file = strings.Replace(file, "  table: t\n", "  table: t\n  \"co\\0l\": 1\n", 1)
		}
		file += c.file
		_, err := Parse(filepath.Join(dir, "p.yaml"), []byte(file), Options{LogOutput: io.Discard,
			LookupEnv: func(n string) (string, bool) { return "t\x00x", n == "NUL_TOPIC" }})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "NUL") || strings.Contains(err.Error(), "\x00") {
			t.Errorf("%s: err = %q, want a NUL error at %s\n%s", name, err, c.want, file)
		}
	}
}

// TestKafkaPropertiesAreCheckedByLibrdkafka: values librdkafka refuses (an unknown SASL
// mechanism, an unknown protocol, a number out of range, an unknown property) are errors of
// the load, at the property's path, found without connecting (bootstrap.servers is left
// out of the check).
func TestKafkaPropertiesAreCheckedByLibrdkafka(t *testing.T) {
	props := map[string]string{
		"{security.protocol: SASL_SSL, sasl.mechanism: SCRAM-SHA-999, sasl.username: u, sasl.password: pw-s3cret}": "SCRAM-SHA-999",
		"{security.protocol: BOGUS}": "kafka.properties[security.protocol]",
		"{session.timeout.ms: 0}":    "kafka.properties[session.timeout.ms]",
		"{no.such.property: 1}":      "kafka.properties[no.such.property]",
		"{fetch.max.bytes: lots}":    "kafka.properties[fetch.max.bytes]",
	}
	for p, want := range props {
		file := strings.Replace(minimal, "  topics: [orders]\n", "  topics: [orders]\n  properties: "+p+"\n", 1)
		start := time.Now()
		_, err := Parse("p.yaml", []byte(file), Options{LogOutput: io.Discard})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: err = %v, want %q", p, err, want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: took %v", p, d)
		}
	}
	ok := strings.Replace(minimal, "  topics: [orders]\n",
		"  topics: [orders]\n  properties: {security.protocol: SASL_PLAINTEXT, sasl.mechanism: SCRAM-SHA-512, sasl.username: u, sasl.password: p, session.timeout.ms: 6000}\n", 1)
	if _, err := Parse("p.yaml", []byte(ok), Options{LogOutput: io.Discard}); err != nil {
		t.Fatalf("valid properties refused: %v", err)
	}
}

// TestSinkRulesAtTheFileItem: the rules on values are sink.Config.Validate's, reported once
// at the file's item, also when an earlier item is left out of the Config (an unset
// variable with AllowUnset), and in the file's words (a key for a Go field name).
func TestSinkRulesAtTheFileItem(t *testing.T) {
	file := strings.Replace(minimal, "[orders]", "[\"${UNSET_TOPIC}\", orders, \"a b\", orders]", 1)
	_, err := Parse("p.yaml", []byte(file), Options{LogOutput: io.Discard, AllowUnset: true, LookupEnv: func(string) (string, bool) { return "", false }})
	want := "p.yaml: kafka.topics[2]: \"a b\" is not a Kafka topic name (1 to 249 of a-z, A-Z, 0-9, '.', '_' and '-'; not . or ..), nor a pattern starting with ^ (line 5)\n" +
		"p.yaml: kafka.topics[3]: \"orders\" is listed twice (first at kafka.topics[1]) (line 5)"
	if err == nil || err.Error() != want {
		t.Errorf("err:\n%v\nwant:\n%s", err, want)
	}
	file = strings.Replace(minimal, "kafka:\n", "kafka:\n  properties: {go.events.channel.enable: true, bootstrap.servers: x:1}\n", 1)
	_, err = Parse("p.yaml", []byte(file), Options{LogOutput: io.Discard})
	want = "p.yaml: kafka.properties[go.events.channel.enable]: go.* properties configure the Go client, which eosink manages (line 3)\n" +
		"p.yaml: kafka.properties[bootstrap.servers]: set kafka.brokers or this property, not both (line 3)"
	if err == nil || err.Error() != want {
		t.Errorf("err:\n%v\nwant:\n%s", err, want)
	}
}
