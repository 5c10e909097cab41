package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/migrator"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/migrations"
	"github.com/eosink/eosink/sink"
)

func TestMigrateCommand(t *testing.T) {
	e := testbed.Require(t)
	t.Setenv("DATABASE_URL", "") // the "no database" step below; the others pass -database-url
	schema := testbed.Schema(t, e)
	ctx := context.Background()
	latest, err := migrator.Latest(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Run(ctx, args, &out, &errb)
		return code, out.String() + errb.String()
	}
	steps := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"migrate", "-database-url", e.DatabaseURL, "-schema", schema, "version"}, 0, "no migrations applied"},
		{[]string{"migrate", "-database-url", e.DatabaseURL, "-schema", schema, "up"}, 0, fmt.Sprintf("version %d (latest available: %d), %d migration(s) applied", latest, latest, latest)},
		{[]string{"migrate", "up", "-database-url", e.DatabaseURL, "-schema", schema}, 0, fmt.Sprintf("version %d (latest available: %d), already up to date", latest, latest)},
		{[]string{"migrate", "-database-url", e.DatabaseURL, "-schema", schema, "down"}, 2, "add -yes to confirm"},
		{[]string{"migrate", "-database-url", e.DatabaseURL, "-schema", schema, "-yes", "down"}, 0, "no migrations applied"},
		{[]string{"migrate", "-database-url", e.DatabaseURL, "-schema", schema, "force", "1"}, 0, "version 1"},
		{[]string{"migrate", "-database-url", e.DatabaseURL, "-schema", schema, "sideways"}, 2, "unknown subcommand"},
		{[]string{"migrate", "-database-url", "postgres://u:pw-secret@127.0.0.1:1/x?connect_timeout=2", "up"}, 1, "cannot connect to PostgreSQL"},
		{[]string{"migrate", "-database-url", "", "up"}, 2, "no database"},
		{[]string{"frobnicate"}, 2, "unknown command"},
	}
	for _, s := range steps {
		code, out := cli(s.args...)
		if code != s.code || !strings.Contains(out, s.want) {
			t.Fatalf("eosink %v: exit %d, output %q; want exit %d and %q", s.args, code, out, s.code, s.want)
		}
		if strings.Contains(out, "pw-secret") {
			t.Fatalf("output leaks the password: %q", out)
		}
	}
}

func TestOffsetsAndLagCommands(t *testing.T) {
	e := testbed.Require(t)
	t.Setenv("USER", "tester") // the default -operator
	schema := testbed.Schema(t, e)
	topic := testbed.Topic(t, e, 2)
	ctx := context.Background()
	cli := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Run(ctx, append(args, "-database-url", e.DatabaseURL, "-brokers", e.Brokers, "-schema", schema), &out, &errb)
		return code, out.String() + errb.String()
	}
	if err := sink.Migrate(ctx, e.DatabaseURL, schema); err != nil {
		t.Fatal(err)
	}
	n, err := app.Produce(ctx, app.ProduceOptions{Brokers: e.Brokers, Topic: topic, Events: 100, Seed: 5})
	if err != nil || n != 100 {
		t.Fatal(n, err)
	}
	pool := testbed.Pool(t, e)
	if _, err := pool.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "offsets"}.Sanitize()+
		" (pipeline, topic, partition, next_offset, epoch, owner) VALUES ('pipe', $1, 0, 3, 7, 'host-1')", topic); err != nil {
		t.Fatal(err)
	}
	// The group "pipe" committed offset 1 in Kafka; the stored position is 3.
	cons, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": e.Brokers, "group.id": "pipe"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cons.CommitOffsets([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	cons.Close()
	steps := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"offsets", "list"}, 0, "host-1"},
		{[]string{"offsets", "list", "-pipeline", "pipe"}, 0, "stored 3, Kafka 1"},
		{[]string{"offsets", "list", "-json"}, 0, `"next_offset": 3`},
		{[]string{"lag", "-pipeline", "pipe"}, 0, "total lag: "},
		{[]string{"offsets", "set", "-pipeline", "pipe", "-to", "earliest", "-reason", "look", "-dry-run"}, 0, "dry run: nothing changed"},
		{[]string{"offsets", "set", "-pipeline", "pipe", "-to", "earliest", "-dry-run"}, 2, "-reason is required"},
		{[]string{"offsets", "set", "-pipeline", "pipe", "-to", "earliest"}, 2, "-reason is required"},
		{[]string{"offsets", "set", "-pipeline", "pipe", "-to", "99999", "-reason", "x"}, 1, "outside the log"},
		{[]string{"offsets", "set", "-pipeline", "pipe", "-to", "soon", "-reason", "x"}, 2, "is not earliest, latest"},
		{[]string{"offsets", "set", "-to", "0", "-reason", "x"}, 2, "-pipeline is required"},
		{[]string{"offsets", "set", "-pipeline", "pipe", "-topic", topic, "-to", "latest", "-reason", "catch up", "-operator", "bob"}, 0, "(no row)"},
		{[]string{"offsets", "frob"}, 2, "unknown subcommand"},
		{[]string{"status", "-pipeline", "pipe"}, 0, "pipe "},
		{[]string{"lag", "pipe"}, 2, "unexpected arguments"},
		{[]string{"offsets", "set", "-pipeline", "pipe", "-topic", topic, "-partition", "-2", "-to", "0", "-reason", "x"}, 2, "not a partition number"},
		{[]string{"status", "-json"}, 0, `"partitions": 2`},
	}
	for _, s := range steps {
		code, out := cli(s.args...)
		if code != s.code || !strings.Contains(out, s.want) {
			t.Fatalf("eosink %v: exit %d, output %q; want exit %d and %q", s.args, code, out, s.code, s.want)
		}
	}
	var audits int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "offsets_audit"}.Sanitize()+
		" WHERE operator = 'bob' AND reason = 'catch up'").Scan(&audits); err != nil || audits != 2 {
		t.Fatalf("audit rows: %d %v, want 2 (one per partition)", audits, err)
	}
	if code, out := cli("lag", "-pipeline", "pipe"); code != 0 || !strings.Contains(out, "total lag: 0") {
		t.Fatalf("after moving to latest: %q", out)
	}
}

func TestHelpNeverPrintsTheDatabasePassword(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://u:pw-in-env@127.0.0.1:1/x")
	for _, args := range [][]string{{"migrate", "-h"}, {"offsets", "-h"}, {"lag", "-h"}, {"status", "-h"}} {
		var out, errb bytes.Buffer
		Run(context.Background(), args, &out, &errb)
		if all := out.String() + errb.String(); strings.Contains(all, "pw-in-env") || !strings.Contains(all, "database-url") {
			t.Fatalf("eosink %v printed %q", args, all)
		}
	}
}

// TestOperatorCommandsReadTheConfigFile: offsets, lag and status take the database, schema,
// brokers, Kafka connection properties and pipeline from -config, and Kafka properties from
// EOSINK_KAFKA_PROPERTY_* variables, without -kafka arguments (which ps shows); values are
// never printed.
func TestOperatorCommandsReadTheConfigFile(t *testing.T) {
	e, schema, topic := positionsBed(t, "('filepipe', $1, 0, 4, 1, 'host-f'), ('otherpipe', $1, 0, 2, 1, 'host-o')")
	ctx := context.Background()
	// The file's services come from variables that only the file reads.
	t.Setenv("OPS_BROKERS", e.Brokers)
	t.Setenv("OPS_DB", e.DatabaseURL)
	t.Setenv("KAFKA_BOOTSTRAP_SERVERS", "")
	t.Setenv("DATABASE_URL", "")
	t.Setenv("OPS_SECRET", "pw-file-secret")
	file := writeFile(t, fmt.Sprintf(`
pipeline: filepipe
kafka:
  brokers: ${OPS_BROKERS}
  group: g
  topics: [%s]
  properties:
    client.id: eosink-ops-test
    session.timeout.ms: 6000
database: {url: "${OPS_DB}", schema: %s}
sink: {type: clitest}
`, topic, schema))
	cli := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Run(ctx, args, &out, &errb)
		return code, out.String() + errb.String()
	}
	for _, s := range []struct {
		args      []string
		code      int
		want, not string
	}{
		{[]string{"offsets", "list", "-config", file}, 0, "host-f", "host-o"}, // the file's pipeline only
		{[]string{"offsets", "list", "-config", file, "-pipeline", "otherpipe"}, 0, "host-o", "host-f"},
		{[]string{"lag", "-config", file}, 0, "total lag: 6", "otherpipe"},
		{[]string{"status", "-config", file, "-json"}, 0, `"pipeline": "filepipe"`, "otherpipe"},
		{[]string{"offsets", "set", "-config", file, "-to", "latest", "-reason", "from the file", "-operator", "op"}, 0, "filepipe", "otherpipe"},
		{[]string{"lag", "-config", file}, 0, "total lag: 0", ""},
		{[]string{"lag", "-config", file, "-brokers", e.Brokers}, 2, "-config names the database, schema and brokers; drop -brokers", ""},
		{[]string{"lag"}, 2, "no database: set DATABASE_URL, -database-url or -config", ""},
		{[]string{"dlq", "list", "-config", file, "-json"}, 0, "[]", ""}, // the file's database, schema and pipeline
		{[]string{"dlq", "discard", "-config", file, "-all", "-yes"}, 0, "discarded 0 dead letters of pipeline filepipe", ""},
	} {
		code, out := cli(s.args...)
		if code != s.code || !strings.Contains(out, s.want) || (s.not != "" && strings.Contains(out, s.not)) {
			t.Fatalf("eosink %v: exit %d, output %q; want exit %d, %q and not %q", s.args, code, out, s.code, s.want, s.not)
		}
	}

	// The file's connection properties reach the broker client: a property librdkafka does not
	// know fails the command, named; the password next to it is never shown.
	bad := writeFile(t, fmt.Sprintf(`
pipeline: filepipe
kafka:
  brokers: ${OPS_BROKERS}
  group: g
  topics: [%s]
  properties: {ssl.no.such.setting: "1", sasl.password: "${OPS_SECRET}"}
database: {url: "${OPS_DB}", schema: %s}
sink: {type: clitest}
`, topic, schema))
	code, out := cli("lag", "-config", bad)
	if !strings.Contains(out, "ssl.no.such.setting") || strings.Contains(out, "pw-file-secret") {
		t.Fatalf("lag with an unknown connection property in the file: exit %d, %q", code, out)
	}
	// So do EOSINK_KAFKA_PROPERTY_* variables.
	t.Setenv("EOSINK_KAFKA_PROPERTY_SOCKET_NO_SUCH_SETTING", "1")
	t.Setenv("EOSINK_KAFKA_PROPERTY_SASL_PASSWORD", "pw-env-secret")
	code, out = cli("lag", "-database-url", e.DatabaseURL, "-brokers", e.Brokers, "-schema", schema)
	if !strings.Contains(out, "socket.no.such.setting") || strings.Contains(out, "pw-env-secret") {
		t.Fatalf("lag with an unknown property in the environment: exit %d, %q", code, out)
	}
}
