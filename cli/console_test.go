package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// lockedBuffer is a bytes.Buffer safe for a command writing while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const consoleToken = "console-test-token-0123"

// startConsole runs `eosink console -config file` until the test ends and returns its base
// URL, read from the line it prints on start, and a function that stops it (SIGTERM's
// cancellation) and returns its exit code and output.
func startConsole(t *testing.T, file string) (base string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb lockedBuffer
	done := make(chan int, 1)
	go func() { done <- Run(ctx, []string{"console", "-config", file}, &out, &errb) }()
	addr := regexp.MustCompile(`serving (https?://127\.0\.0\.1:\d+) \((?:mutations enabled|read-only), pipeline \w+\)`)
	deadline := time.Now().Add(30 * time.Second)
	for base == "" {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("console exited %d before serving: %s %s", code, out.String(), errb.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("console printed no address: %q %q", out.String(), errb.String())
		}
	}
	stopped := false
	stop = func() (int, string) {
		stopped = true
		cancel()
		select {
		case code := <-done:
			return code, out.String() + errb.String()
		case <-time.After(20 * time.Second):
			t.Fatal("console did not stop within 20s of its cancellation")
			return 0, ""
		}
	}
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	return base, stop
}

// apiGet returns the JSON of a GET, decoded as any.
func apiGet(t *testing.T, base, path string) any {
	t.Helper()
	rq, _ := http.NewRequest("GET", base+path, nil)
	rq.Header.Set("Authorization", "Bearer "+consoleToken)
	res, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, data)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return v
}

// cliJSON runs an eosink command and decodes its JSON output.
func cliJSON(t *testing.T, args ...string) any {
	t.Helper()
	code, out, errOut := runCLI(args...)
	if code != 0 {
		t.Fatalf("eosink %v: exit %d: %s", args, code, errOut)
	}
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("eosink %v: %v\n%s", args, err, out)
	}
	return v
}

// TestConsoleAgreesWithTheCLI: `eosink console -config` serves what the operator commands
// print with -json for the same data: status -json is GET /api/v1/pipelines, offsets list
// -json the partitions of GET /api/v1/pipelines/{pipeline}, dlq list -json the dead-letter
// list, dlq show -json GET /api/v1/dead-letters/{id}, offsets set -dry-run -json the dry
// run's changes. It prints its address on start and stops cleanly when cancelled.
func TestConsoleAgreesWithTheCLI(t *testing.T) {
	e, schema, topic := positionsBed(t, "('agree', $1, 0, 10, 2, 'host-x')")
	db := testbed.Pool(t, e)
	dl := pgx.Identifier{schema, "dead_letters"}.Sanitize()
	var id int64
	for i, v := range []string{`{"id": 1}`, "\xff\xfe"} {
		if err := db.QueryRow(context.Background(), "INSERT INTO "+dl+` (pipeline, topic, partition, "offset", key, value, header_keys, header_values, "timestamp", error)
			VALUES ('agree', $1, 0, $2, 'k', $3, ARRAY['h'::bytea], ARRAY['v'::bytea], now(), 'bad') RETURNING id`, topic, i, []byte(v)).Scan(&id); err != nil {
			t.Fatal(err)
		}
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(consoleToken+" Carol\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`
pipeline: agree
kafka: {brokers: %q, group: agree, topics: [%s]}
database: {url: %q, schema: %s}
sink: {type: table, table: payments, columns: {id: value.id}}
console: {listen: "127.0.0.1:0", mutations: true, tokens_file: %q}
`, e.Brokers, topic, e.DatabaseURL, schema, tokens)
	file := writeFile(t, config)
	base, stop := startConsole(t, file)

	for _, c := range []struct {
		what string
		api  func() any
		cli  []string
	}{
		{"status", func() any { return apiGet(t, base, "/api/v1/pipelines") }, []string{"status", "-json", "-config", file}},
		{"offsets list", func() any { return apiGet(t, base, "/api/v1/pipelines/agree").(map[string]any)["partitions"] },
			[]string{"offsets", "list", "-json", "-config", file}},
		{"status of the pipeline", func() any { return []any{apiGet(t, base, "/api/v1/pipelines/agree").(map[string]any)["summary"]} },
			[]string{"status", "-json", "-config", file, "-pipeline", "agree"}},
		{"dlq list", func() any {
			return apiGet(t, base, "/api/v1/pipelines/agree/dead-letters").(map[string]any)["dead_letters"]
		},
			[]string{"dlq", "list", "-json", "-config", file}},
		{"dlq show", func() any { return apiGet(t, base, fmt.Sprintf("/api/v1/dead-letters/%d", id)) },
			[]string{"dlq", "show", "-json", "-config", file, "-id", fmt.Sprint(id)}},
	} {
		api, cli := c.api(), cliJSON(t, c.cli...)
		if !reflect.DeepEqual(api, cli) {
			a, _ := json.Marshal(api)
			b, _ := json.Marshal(cli)
			t.Errorf("%s: the API and the CLI differ:\napi: %s\ncli: %s", c.what, a, b)
		}
	}
	// The dry run of a move: the changes are those offsets set -dry-run -json prints.
	rq, _ := http.NewRequest("POST", base+"/api/v1/pipelines/agree/offsets", strings.NewReader(`{"to": "earliest", "reason": "check", "dry_run": true}`))
	rq.Header.Set("Authorization", "Bearer "+consoleToken)
	rq.Header.Set("Content-Type", "application/json")
	rq.Header.Set("X-Eosink-CSRF", "1")
	res, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	var mr map[string]any
	if err := json.NewDecoder(res.Body).Decode(&mr); err != nil || res.StatusCode != 200 || mr["operator"] != "Carol" {
		t.Fatalf("dry run: %d %v %v", res.StatusCode, mr, err)
	}
	res.Body.Close()
	if want := cliJSON(t, "offsets", "set", "-config", file, "-to", "earliest", "-reason", "check", "-operator", "Carol", "-dry-run", "-json"); !reflect.DeepEqual(mr["changes"], want) {
		t.Errorf("dry run: api %v, cli %v", mr["changes"], want)
	}

	code, out := stop()
	if code != 0 || !strings.Contains(out, "eosink console: stopped") {
		t.Fatalf("console after cancellation: exit %d: %s", code, out)
	}
	if strings.Contains(out, consoleToken) {
		t.Fatalf("the console's output holds a token: %s", out)
	}
}

// TestConsoleUsage: -config is required; -h prints the help; a tokens file that others can
// read is refused before serving, without its content in the message.
func TestConsoleUsage(t *testing.T) {
	if code, _, errOut := runCLI("console"); code != 2 || !strings.Contains(errOut, "console: -config is required") {
		t.Errorf("without -config: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI("console", "-config", "x.yaml", "extra"); code != 2 || !strings.Contains(errOut, "unexpected arguments") {
		t.Errorf("extra argument: exit %d: %s", code, errOut)
	}
	if code, out, _ := runCLI("console", "-h"); code != 0 || !strings.Contains(out, "usage: eosink console -config FILE") || !strings.Contains(out, "-config") {
		t.Errorf("-h: exit %d: %s", code, out)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(consoleToken+" Carol\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, fmt.Sprintf(`
pipeline: p
kafka: {brokers: 127.0.0.1:1, group: g, topics: [t]}
database: {url: "postgres://u@127.0.0.1:1/x"}
sink: {type: table, table: payments, columns: {id: value.id}}
console: {mutations: true, tokens_file: %q}
`, tokens))
	code, _, errOut := runCLI("console", "-config", file)
	if code != 1 || !strings.Contains(errOut, "console.tokens_file") || !strings.Contains(errOut, "mode 0644") || strings.Contains(errOut, consoleToken) {
		t.Errorf("tokens file of mode 0644: exit %d: %s", code, errOut)
	}
	file = writeFile(t, "pipeline: p\nkafka: {brokers: 127.0.0.1:1, group: g, topics: [t]}\ndatabase: {url: \"postgres://u@127.0.0.1:1/x\"}\n"+
		"sink: {type: table, table: payments, columns: {id: value.id}}\nconsole: {mutations: true}\n")
	if code, _, errOut := runCLI("console", "-config", file); code != 1 || !strings.Contains(errOut, "console.tokens_file: required with mutations: true") {
		t.Errorf("mutations without tokens: exit %d: %s", code, errOut)
	}
}

// TestConsoleTLS: with console.tls the API is served over HTTPS only, with HSTS, and without
// tokens it is read-only: reads need no token, a mutation is refused with 403.
func TestConsoleTLS(t *testing.T) {
	e, schema, topic := positionsBed(t, "('secure', $1, 0, 10, 1, 'host-t')")
	cert, key, pool := selfSigned(t)
	file := writeFile(t, fmt.Sprintf(`
pipeline: secure
kafka: {brokers: %q, group: secure, topics: [%s]}
database: {url: %q, schema: %s}
sink: {type: table, table: payments, columns: {id: value.id}}
console: {listen: "127.0.0.1:0", tls: {cert_file: %q, key_file: %q}}
`, e.Brokers, topic, e.DatabaseURL, schema, cert, key))
	base, stop := startConsole(t, file)
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("console serves %s, want https", base)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	res, err := client.Get(base + "/api/v1/pipelines/secure")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Partitions []struct {
			NextOffset int64 `json:"next_offset"`
		} `json:"partitions"`
	}
	if err := json.NewDecoder(res.Body).Decode(&d); err != nil || res.StatusCode != 200 || len(d.Partitions) != 1 || d.Partitions[0].NextOffset != 10 ||
		res.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("GET over TLS: %d %+v %v, HSTS %q", res.StatusCode, d, err, res.Header.Get("Strict-Transport-Security"))
	}
	res.Body.Close()
	rq, _ := http.NewRequest("POST", base+"/api/v1/pipelines/secure/offsets", strings.NewReader(`{"to": "earliest", "reason": "r"}`))
	rq.Header.Set("X-Eosink-CSRF", "1")
	rq.Header.Set("Content-Type", "application/json")
	res, err = client.Do(rq)
	if err != nil || res.StatusCode != 403 {
		t.Fatalf("POST to a read-only console: %v %v", res, err)
	}
	res.Body.Close()
	if res, err := http.Get("http" + strings.TrimPrefix(base, "https") + "/api/v1/pipelines"); err == nil && res.StatusCode == 200 {
		t.Fatal("plain HTTP served on the TLS port")
	}
	if code, out := stop(); code != 0 {
		t.Fatalf("stop: %d %s", code, out)
	}
}
