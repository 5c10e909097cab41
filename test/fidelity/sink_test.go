package fidelity

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// replica is one pipeline of `eosink run` with the cdc plugin and the replica schema it writes.
type replica struct {
	kind     string // "ddl" (the source's own DDL, compared as row::text) or "create" (create: true, by value)
	label    string // the converter column of the cell lines
	schema   string // replica tables
	offsets  string // eosink's schema: offsets, dead letters, cdc_positions
	pipeline string
	config   string
	sink     *testbed.Process
	runs     int
}

// pgDumpDDL returns the source's own DDL of schema fid (the enum and the tables), from the
// Debian PostgreSQL binaries that test/services/services.sh uses (EOSINK_PG_BINDIR), with
// fid renamed to schema. pg_dump -t alone would leave out the enum type the tables use, so
// the dump is of the schema (-n), which holds the suite's tables and that type only.
func pgDumpDDL(t *testing.T, srcURL, schema string) string {
	t.Helper()
	bin := "pg_dump"
	if d := os.Getenv("EOSINK_PG_BINDIR"); d != "" {
		bin = filepath.Join(d, "pg_dump")
	}
	out, err := exec.Command(bin, "--schema-only", "--no-owner", "--no-privileges", "-n", "fid", "-d", srcURL).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s: %v\n%s", bin, err, stderr)
	}
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, `\`), strings.HasPrefix(line, "CREATE SCHEMA"), strings.Contains(line, "set_config('search_path'"):
			continue // psql meta-commands (\restrict), the source's schema, the dump's search_path
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return regexp.MustCompile(`\bfid\.`).ReplaceAllLiteralString(b.String(), pgx.Identifier{schema}.Sanitize()+".")
}

func (rp *replica) writeConfig(t *testing.T, e testbed.Env, v variant, topics []string, registryURL string) {
	t.Helper()
	format, registry := "json", ""
	if v.conv == testbed.Avro {
		format, registry = "avro", "schema_registry:\n  url: "+registryURL+"\n"
	}
	more := v.sink
	if rp.kind == "create" {
		more += "  create: true\n  evolve: add-columns\n"
	}
	yaml := fmt.Sprintf(`pipeline: %s
kafka:
  brokers: %s
  group: %s
  topics: [%s]
  properties:
    session.timeout.ms: 6000
    heartbeat.interval.ms: 1000
database:
  url: %s
  schema: %s
on_poison: dead-letter
%ssink:
  type: cdc
  format: %s
  truncate: true
  table: "%s.$${source.table}"
%s`, rp.pipeline, e.Brokers, rp.pipeline, strings.Join(topics, ", "), e.DatabaseURL, rp.offsets, registry, format, rp.schema, more)
	rp.config = filepath.Join(t.TempDir(), rp.pipeline+".yaml")
	if err := os.WriteFile(rp.config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "migrate", "up", "-config", rp.config)
}

func (rp *replica) start(t *testing.T) {
	t.Helper()
	rp.runs++
	rp.sink = testbed.StartProcess(t, eosinkBin, fmt.Sprintf("eosink run %s (%d)", rp.label, rp.runs), []string{"run", "-config", rp.config})
}

// kill SIGKILLs the sink and starts it again.
func (rp *replica) kill(t *testing.T) {
	t.Helper()
	rp.sink.Signal(syscall.SIGKILL)
	if err := rp.sink.Wait(10 * time.Second); !testbed.KilledBySIGKILL(err) {
		t.Fatalf("%s: %v, want killed by SIGKILL", rp.label, err)
	}
	rp.start(t)
}

// replay stops the sink, moves every partition to the earliest offset as an operator would,
// and starts the sink again.
func (rp *replica) replay(t *testing.T, e testbed.Env) {
	t.Helper()
	rp.sink.StopClean(60 * time.Second)
	cli(t, "offsets", "set", "-database-url", e.DatabaseURL, "-brokers", e.Brokers, "-schema", rp.offsets, "-pipeline", rp.pipeline,
		"-to", "earliest", "-reason", "fidelity replay", "-operator", "fidelity")
	rp.start(t)
}

// lagStatus is one partition of `eosink lag -json`.
type lagStatus struct {
	Topic   string `json:"topic"`
	Lag     int64  `json:"lag"`
	Error   string `json:"error"`
	Stopped *struct {
		Reason string `json:"reason"`
		Error  string `json:"error"`
	} `json:"stopped"`
}

// settled waits until the replica's marker row holds n (every change before the marker was
// read by Debezium and published) and each partition has no lag or is stopped. It returns
// the stop error per topic.
func (rp *replica) settled(t *testing.T, ctx context.Context, db querier, n int, timeout time.Duration) map[string]string {
	t.Helper()
	stopped := map[string]string{}
	testbed.Eventually(t, timeout, rp.label+": marker "+fmt.Sprint(n)+" and lag 0 or stopped", func() (bool, string) {
		var got int
		if err := db.QueryRow(ctx, fmt.Sprintf("SELECT n FROM %s.marker WHERE id = 1", pgx.Identifier{rp.schema}.Sanitize())).Scan(&got); err != nil || got < n {
			return false, fmt.Sprintf("marker %d (%v)", got, err)
		}
		out := cli(t, "lag", "-database-url", testbed.Require(t).DatabaseURL, "-brokers", testbed.Require(t).Brokers,
			"-schema", rp.offsets, "-pipeline", rp.pipeline, "-json")
		var ps []lagStatus
		if err := json.Unmarshal([]byte(out), &ps); err != nil || len(ps) == 0 {
			return false, fmt.Sprint(err, out)
		}
		clear(stopped)
		for _, p := range ps {
			switch {
			case p.Stopped != nil:
				stopped[p.Topic] = p.Stopped.Reason + ": " + p.Stopped.Error
			case p.Lag != 0 || p.Error != "":
				return false, fmt.Sprintf("%s lag %d %s", p.Topic, p.Lag, p.Error)
			}
		}
		return true, ""
	})
	return stopped
}

type querier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

func cli(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(eosinkBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("eosink %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// createTopics creates the topics (one partition each) and deletes them when the test ends.
func createTopics(t *testing.T, brokers string, topics []string) {
	t.Helper()
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var specs []kafka.TopicSpecification
	for _, tp := range topics {
		specs = append(specs, kafka.TopicSpecification{Topic: tp, NumPartitions: 1, ReplicationFactor: 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := a.CreateTopics(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError && r.Error.Code() != kafka.ErrTopicAlreadyExists {
			t.Fatalf("create topic %s: %v", r.Topic, r.Error)
		}
	}
}

func waitTopics(t *testing.T, brokers string, topics []string) {
	t.Helper()
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	testbed.Eventually(t, 10*time.Minute, "Debezium's topics", func() (bool, string) {
		md, err := a.GetMetadata(nil, true, 5000)
		if err != nil {
			return false, err.Error()
		}
		for _, tp := range topics {
			if m, ok := md.Topics[tp]; !ok || m.Error.Code() != kafka.ErrNoError {
				return false, "no topic " + tp
			}
		}
		return true, ""
	})
	t.Cleanup(func() {
		a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
		if err != nil {
			return
		}
		defer a.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = a.DeleteTopics(ctx, topics)
	})
}
