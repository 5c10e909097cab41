package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRelayConfigFile: the relay's file expands ${VAR} and ${VAR:-default}, refuses unknown
// keys and bad values naming them, and -validate checks it without connecting.
func TestRelayConfigFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RELAY_TEST_URL", "postgres://u:secretpw@127.0.0.1:1/db")
	write := func(text string) string {
		p := filepath.Join(dir, "relay.yaml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Run(context.Background(), args, &out, &errb)
		return code, out.String() + errb.String()
	}
	good := write("database:\n  url: ${RELAY_TEST_URL}\n  schema: shop\nkafka:\n  brokers: 127.0.0.1:1\nrelay:\n  shards: ${RELAY_TEST_SHARDS:-4}\n  own: [1, 3]\n  retention: 0s\n")
	c, _, _, err := loadRelay(good, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Shards != 4 || len(c.Own) != 2 || c.Schema != "shop" || c.Retention == nil || *c.Retention != 0 || c.Kafka["bootstrap.servers"] != "127.0.0.1:1" {
		t.Errorf("loaded %+v", c)
	}
	if code, out := run("relay", "-validate", "-config", good); code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("-validate: exit %d\n%s", code, out)
	}
	for _, tc := range []struct{ text, want string }{
		{"database:\n  url: x\nrelay:\n  shard: 2\n", "field shard not found"},
		{"database:\n  url: ${RELAY_TEST_UNSET}\n", "RELAY_TEST_UNSET is not set"},
		{"database:\n  url: ${RELAY_TEST_URL}\nkafka:\n  brokers: b:1\nrelay:\n  shards: 2\n  own: [2]\n", "Own: shard 2 is not between 0 and 1"},
		{"database:\n  url: ${RELAY_TEST_URL}\nrelay:\n  shards: 2\n", "bootstrap.servers is required"},
	} {
		code, out := run("relay", "-validate", "-config", write(tc.text))
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d, want an error with %q:\n%s", tc.text, code, tc.want, out)
		}
		if strings.Contains(out, "secretpw") {
			t.Errorf("%q: the password is shown:\n%s", tc.text, out)
		}
	}
}
