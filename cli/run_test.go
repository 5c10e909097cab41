package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/plugin"
)

// rowsPlugin ("clitest") writes each record's (topic, partition, offset) to <schema>.cli_rows
// through the framework's transaction, and ships the migration that creates that table.
type rowsPlugin struct{ schema string }

func init() {
	// No options: unknown keys are errors.
	plugin.RegisterConfig("clitest", func(cfg plugin.Config, _ struct{}) (*rowsPlugin, error) {
		return &rowsPlugin{schema: cfg.Schema}, nil
	})
}

func (*rowsPlugin) Open(context.Context, sink.Partition) error  { return nil }
func (*rowsPlugin) Close(context.Context, sink.Partition) error { return nil }

func (p *rowsPlugin) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	offsets := make([]int64, len(b.Records))
	for i, r := range b.Records {
		offsets[i] = r.Offset
	}
	_, err := tx.Exec(ctx, "INSERT INTO "+pgx.Identifier{p.schema, "cli_rows"}.Sanitize()+
		` (topic, "partition", "offset") SELECT $1, $2, o FROM unnest($3::bigint[]) AS o`, b.Topic, b.Partition, offsets)
	return err
}

func (p *rowsPlugin) Migrations() []sink.Migrations {
	return []sink.Migrations{{Name: "clitest", Schema: p.schema, Table: "clitest_migrations", FS: fstest.MapFS{
		"0001_rows.up.sql":   {Data: []byte(`CREATE TABLE cli_rows (topic text NOT NULL, "partition" int NOT NULL, "offset" bigint NOT NULL)`)},
		"0001_rows.down.sql": {Data: []byte(`DROP TABLE cli_rows`)},
	}}}
}

// syncBuffer is a bytes.Buffer safe for the sink's goroutines and the test's.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(u string) (int, string) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestRunCommand runs a pipeline from a config file against the real services: the plugin's
// migrations by `migrate up -config`, every record applied exactly once, metrics and probes
// served, and a clean drain with exit 0 when the context is cancelled.
func TestRunCommand(t *testing.T) {
	e := testbed.Require(t)
	const events = 400
	topic := testbed.Topic(t, e, 3)
	schema := testbed.Schema(t, e)
	group := testbed.Name(t, "g")
	ctx := context.Background()
	if n, err := app.Produce(ctx, app.ProduceOptions{Brokers: e.Brokers, Topic: topic, Events: events, Seed: 3}); err != nil || n != events {
		t.Fatalf("produce: %d %v", n, err)
	}
	// The file reads the services from the environment, as in production.
	t.Setenv("KAFKA_BOOTSTRAP_SERVERS", e.Brokers)
	t.Setenv("DATABASE_URL", e.DatabaseURL)
	addr := freeAddr(t)
	file := writeFile(t, fmt.Sprintf(`
pipeline: %[1]s-pipe
kafka:
  brokers: ${KAFKA_BOOTSTRAP_SERVERS}
  group: %[1]s
  topics: [%[2]s]
  properties:
    session.timeout.ms: 6000
    heartbeat.interval.ms: 1000
database:
  url: ${DATABASE_URL}
  schema: %[3]s
batch: {max_records: 50, max_wait: 20ms}
timeouts: {shutdown: 20s}
sink:
  type: clitest
http: %[4]s
log: {format: json, level: info, progress: 200ms}
`, group, topic, schema, addr))

	var out, errb syncBuffer
	if code := Run(ctx, []string{"migrate", "up", "-config", file}, &out, &errb); code != 0 {
		t.Fatalf("migrate up -config: exit %d: %s%s", code, out.String(), errb.String())
	}
	if got := out.String(); !strings.Contains(got, "(latest available: ") || !strings.Contains(got, fmt.Sprintf(`sink plugin "clitest": clitest migrations in schema %q: 1 applied (version 0 -> 1)`, schema)) {
		t.Fatalf("migrate up -config printed %q", got)
	}

	out, errb = syncBuffer{}, syncBuffer{}
	if code := Run(ctx, []string{"run", "-config", file, "-validate"}, &out, &errb); code != 0 {
		t.Fatalf("run -validate: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"valid", "pipeline:  " + group + "-pipe", "topics " + topic, "group " + group, "sink:      clitest", "on_poison: stop", "progress:  every 200ms"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("run -validate printed %q, want %q in it", out.String(), want)
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	out, errb = syncBuffer{}, syncBuffer{}
	exit := make(chan int, 1)
	go func() { exit <- Run(runCtx, []string{"run", "-config", file}, &out, &errb) }()

	pool := testbed.Pool(t, e)
	rows := pgx.Identifier{schema, "cli_rows"}.Sanitize()
	testbed.Eventually(t, 90*time.Second, "every record in the table", func() (bool, string) {
		select {
		case code := <-exit:
			t.Fatalf("run exited early with %d: %s", code, errb.String())
		default:
		}
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+rows).Scan(&n); err != nil {
			return false, err.Error()
		}
		return n >= events, fmt.Sprintf("%d of %d rows", n, events)
	})

	// A progress line (every 200ms) counts the records applied.
	applied := regexp.MustCompile(`"msg":"progress","pipeline":"[^"]+","records_per_second":[0-9.]+,"records":` + fmt.Sprint(events) + `,`)
	testbed.Eventually(t, 10*time.Second, "a progress line with every record", func() (bool, string) {
		return applied.MatchString(errb.String()), "no such line yet"
	})

	code, body := get("http://" + addr + "/readyz")
	if code != http.StatusOK {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	code, body = get("http://" + addr + "/metrics")
	for _, want := range []string{"eosink_", "go_goroutines", "process_cpu_seconds_total"} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("/metrics: %d, no %q in:\n%.2000s", code, want, body)
		}
	}

	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("run after cancel: exit %d: %s", code, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("run did not drain within 60s: %s", errb.String())
	}

	// Each offset exactly once, and the stored positions at the end of every partition.
	var total, distinct, partitions int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT ("partition", "offset")), count(DISTINCT "partition") FROM `+rows+
		` WHERE topic = $1`, topic).Scan(&total, &distinct, &partitions); err != nil {
		t.Fatal(err)
	}
	if total != events || distinct != events {
		t.Fatalf("%d rows, %d distinct offsets; want %d of each", total, distinct, events)
	}
	var gaps int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT "partition", max("offset") - min("offset") + 1 AS span, count(*) AS n FROM `+rows+
		` GROUP BY "partition") p WHERE span <> n`).Scan(&gaps); err != nil || gaps != 0 {
		t.Fatalf("partitions with gaps: %d %v", gaps, err)
	}
	var stored int64
	if err := pool.QueryRow(ctx, "SELECT coalesce(sum(next_offset), 0) FROM "+pgx.Identifier{schema, "offsets"}.Sanitize()+
		" WHERE pipeline = $1 AND topic = $2", group+"-pipe", topic).Scan(&stored); err != nil || stored != events {
		t.Fatalf("stored positions sum to %d (%v), want %d", stored, err, events)
	}

	logs := errb.String()
	// The progress line, every 200ms: records per second, lag and dead letters; at least one
	// while records were applied.
	progress := 0
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"msg":"progress"`) {
			continue
		}
		progress++
		for _, key := range []string{`"records_per_second":`, `"records":`, `"lag":`, `"partitions":`, `"dead_letters":0`} {
			if !strings.Contains(line, key) {
				t.Fatalf("progress line without %s: %s", key, line)
			}
		}
	}
	if !regexp.MustCompile(`"msg":"progress","pipeline":"[^"]+","records_per_second":[1-9]`).MatchString(logs) {
		t.Fatalf("%d progress lines, none with records per second above 0:\n%s", progress, logs)
	}
	if !strings.Contains(logs, `"msg":"pipeline starting"`) || !strings.Contains(logs, `"msg":"pipeline stopped after draining"`) {
		t.Fatalf("logs are not JSON or miss the start and stop:\n%s", logs)
	}
	if u, err := url.Parse(e.DatabaseURL); err == nil {
		if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Contains(logs+out.String(), pw) {
			t.Fatalf("the logs show the database password")
		}
	}
	if strings.Contains(logs, e.DatabaseURL) {
		t.Fatalf("the logs show the database URL")
	}
}

func TestRunValidateReportsEveryError(t *testing.T) {
	file := writeFile(t, `
kafka:
  brokers: 127.0.0.1:9092
  group: g
  topics: []
  propertes: {sasl.password: pw-never-shown}
database:
  url: postgres://u:pw-never-shown@127.0.0.1:5432/db
batch: {max_wait: 10x}
sink: {type: clitest, colour: red}
`)
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"run", "-validate", "-config", file}, &out, &errb)
	got := errb.String()
	for _, want := range []string{
		"eosink: " + file + ": kafka.topics: at least one topic is required (line 5)\n",
		"eosink: " + file + ": kafka.propertes: unknown key",
		"did you mean properties? (line 6)\n",
		"eosink: " + file + `: batch.max_wait: "10x" is not a duration`,
		"eosink: " + file + ": sink.colour: unknown key (sink has type)",
	} {
		if code != 1 || !strings.Contains(got, want) {
			t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and %q", code, got, want)
		}
	}
	if strings.Contains(got+out.String(), "pw-never-shown") {
		t.Fatalf("output shows a secret:\n%s", got)
	}
}

func TestRunUsageAndStartErrors(t *testing.T) {
	ctx := context.Background()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	good := `
kafka: {brokers: 127.0.0.1:1, group: g, topics: [t]}
database: {url: "postgres://u:pw-never-shown@127.0.0.1:1/db?connect_timeout=2"}
sink: {type: clitest}
`
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run"}, 2, "-config is required"},
		{[]string{"run", "-config", "a.yaml", "extra"}, 2, "unexpected arguments"},
		{[]string{"run", "-config", filepath.Join(t.TempDir(), "none.yaml")}, 1, "none.yaml: no such file or directory"},
		{[]string{"run", "-config", writeFile(t, good)}, 1, "cannot connect to PostgreSQL at 127.0.0.1:1/db"},
		{[]string{"run", "-config", writeFile(t, strings.Replace(good, "sink: {type: clitest}", "sink: {type: clitest}\nhttp: "+busy.Addr().String(), 1))}, 1, "http: listen tcp " + busy.Addr().String()},
		{[]string{"migrate", "up", "-config", writeFile(t, good), "-schema", "x"}, 2, "-config names the database and schema; drop -schema"},
		{[]string{"run", "-h"}, 0, "-validate"},
	} {
		var out, errb bytes.Buffer
		code := Run(ctx, c.args, &out, &errb)
		all := out.String() + errb.String()
		if code != c.code || !strings.Contains(all, c.want) {
			t.Fatalf("eosink %v: exit %d, output %q; want exit %d and %q", c.args, code, all, c.code, c.want)
		}
		if strings.Contains(all, "pw-never-shown") {
			t.Fatalf("eosink %v shows the password: %q", c.args, all)
		}
	}
}

func TestRunGCPercent(t *testing.T) {
	if pct, ok := runGCPercent(""); !ok || pct != 50 {
		t.Errorf("GOGC unset: %d %t, want 50 true", pct, ok)
	}
	for _, env := range []string{"100", "off", "200"} {
		if _, ok := runGCPercent(env); ok {
			t.Errorf("GOGC=%s: eosink run sets its own", env)
		}
	}
}
