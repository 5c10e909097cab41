package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandErrorsNeverShowThePassword: every libpq form of a connection string that holds
// a password (keyword/value with spaces around "=", quoted values with escapes, URLs with the
// password in the user info or the query, malformed ones) is redacted from every command's
// errors, and so is a -kafka argument that is not key=value.
func TestCommandErrorsNeverShowThePassword(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	urls := map[string]string{
		"kv spaces":        "host=127.0.0.1 port=1 password = s3cret-kv-spaces sslmode=bogus",
		"kv tab":           "host=127.0.0.1 port=1 password\t=\ts3cret-kv-tab sslmode=bogus",
		"kv quoted escape": `host=127.0.0.1 port=1 password='a\'s3cret-kv-quoted' sslmode=bogus`,
		"kv quoted spaces": `host=127.0.0.1 port=1 password = 'pw s3cret-kv-qspace' sslmode=bogus`,
		"kv backslash":     `host=127.0.0.1 port=1 password=a\ s3cret-kv-bs sslmode=bogus`,
		"kv sslpassword":   `host=127.0.0.1 port=1 sslpassword=s3cret-kv-sslpw sslmode=bogus`,
		"kv connect":       "host=127.0.0.1 port=1 password = s3cret-kv-connect connect_timeout=2",
		"url userinfo":     "postgres://u:s3cret-url-user@127.0.0.1:1/x?sslmode=bogus",
		"url query":        "postgresql://u@127.0.0.1:1/x?password=s3cret-url-query&sslmode=bogus",
		"url encoded":      "postgres://u:s3cret%2Durl%2Denc@127.0.0.1:1/x?sslmode=bogus",
		"url bad port":     "postgres://u:s3cret-url-port@127.0.0.1:notaport/x",
		"url upper":        "POSTGRES://u:s3cret-url-upper@127.0.0.1:1/x?sslmode=bogus",
		"url connect":      "postgres://u:s3cret-url-connect@127.0.0.1:1/x?connect_timeout=2",
	}
	for name, url := range urls {
		secret := url[strings.Index(url, "s3cret"):]
		secret = secret[:strings.IndexAny(secret+" ", " '@&")]
		if name == "url encoded" {
			secret = "s3cret-url-enc"
		}
		for _, args := range [][]string{
			{"migrate", "up", "-database-url", url},
			{"dlq", "list", "-database-url", url},
			{"lag", "-database-url", url, "-brokers", "127.0.0.1:1"},
			{"offsets", "list", "-database-url", url, "-brokers", "127.0.0.1:1"},
		} {
			code, out, errs := runCLI(args...)
			if code == 0 {
				t.Errorf("%s: eosink %s succeeded", name, args[0])
			}
			all := out + errs
			if strings.Contains(all, secret) || strings.Contains(all, strings.ReplaceAll(secret, "-", "%2D")) {
				t.Errorf("%s: eosink %s leaks the password %q:\n%s", name, args[0], secret, all)
			}
		}
	}
}

// TestKafkaFlagNeverEchoesItsValue: a -kafka argument without "=" is refused without
// printing it (sasl.password:X is a typo of sasl.password=X).
func TestKafkaFlagNeverEchoesItsValue(t *testing.T) {
	for _, arg := range []string{"sasl.password:s3cret-colon", "s3cret-bare", "=s3cret-nokey"} {
		code, out, errs := runCLI("lag", "-kafka", arg, "-database-url", "postgres://u@127.0.0.1:1/x", "-brokers", "127.0.0.1:1")
		if code != 2 || strings.Contains(out+errs, "s3cret") || !strings.Contains(errs, "-kafka") {
			t.Errorf("-kafka %s: exit %d, output %q", arg, code, out+errs)
		}
	}
}

// TestRelayNeverShowsThePassword: the relay's file gets the redaction `eosink run` uses: a
// connection string that does not parse is refused by -validate and by -migrate, in every
// libpq form, without its password in the output.
func TestRelayNeverShowsThePassword(t *testing.T) {
	dir := t.TempDir()
	for name, url := range map[string]string{
		"kv spaces":    "host=127.0.0.1 port=x user=u password = s3cret-relay-kv dbname=x",
		"kv quoted":    `host=127.0.0.1 port=x password='a s3cret-relay-q' dbname=x`,
		"url bad port": "postgres://u:s3cret-relay-url@127.0.0.1:notaport/x",
		"url query":    "postgresql://u@127.0.0.1:1/x?password=s3cret-relay-query&sslmode=bogus",
	} {
		secret := url[strings.Index(url, "s3cret"):]
		secret = secret[:strings.IndexAny(secret+" ", " '@&")]
		p := filepath.Join(dir, "relay.yaml")
		text := "database:\n  url: \"" + url + "\"\nkafka:\n  brokers: 127.0.0.1:1\nrelay:\n  shards: 1\n"
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"relay", "-validate", "-config", p}, {"relay", "-migrate", "-config", p}} {
			code, out, errs := runCLI(args...)
			if code == 0 {
				t.Errorf("%s: eosink %s succeeded on a connection string that does not parse:\n%s", name, strings.Join(args, " "), out+errs)
			}
			if strings.Contains(out+errs, secret) {
				t.Errorf("%s: eosink %s shows the password %q:\n%s", name, strings.Join(args, " "), secret, out+errs)
			}
		}
	}
}
