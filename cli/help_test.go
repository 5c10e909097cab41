package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/sink"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestHelp: -h and --help print the command's help on standard output and exit 0, with no
// error line; each subcommand shows its synopsis, one line of description and its own flags
// only.
func TestHelp(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://u:pw-in-env@127.0.0.1:1/x")
	for _, c := range []struct {
		args          []string
		usage         string   // the synopsis starts with it
		flags, absent []string // flags shown, flags not shown
	}{
		{[]string{"-h"}, "eosink <command>", nil, nil},
		{[]string{"--help"}, "eosink <command>", nil, nil},
		{[]string{"help"}, "eosink <command>", nil, nil},
		{[]string{"run", "-h"}, "eosink run -config FILE", []string{"-config", "-validate", "-progress"}, []string{"-database-url"}},
		{[]string{"run", "--help"}, "eosink run -config FILE", []string{"-validate"}, nil},
		{[]string{"run", "-config", "x.yaml", "-h"}, "eosink run -config FILE", []string{"-validate"}, nil},
		{[]string{"help", "run"}, "eosink run -config FILE", []string{"-validate"}, nil},
		{[]string{"version", "-h"}, "eosink version", []string{"-json"}, nil},
		{[]string{"offsets", "-h"}, "eosink offsets list|set|reset", []string{"-to", "-pipeline"}, nil},
		{[]string{"offsets", "list", "-h"}, "eosink offsets list", []string{"-pipeline", "-json", "-config", "-database-url", "-brokers", "-kafka", "-schema"},
			[]string{"-to", "-reason", "-operator", "-dry-run", "-accept-new-topic", "-topic"}},
		{[]string{"offsets", "list", "--help"}, "eosink offsets list", []string{"-pipeline"}, []string{"-to"}},
		{[]string{"offsets", "set", "-h"}, "eosink offsets set", []string{"-to", "-reason", "-operator", "-dry-run", "-accept-new-topic", "-topic", "-partition", "-config"}, nil},
		{[]string{"offsets", "reset", "--help"}, "eosink offsets set", []string{"-to"}, nil},
		{[]string{"lag", "-h"}, "eosink lag", []string{"-pipeline", "-config"}, []string{"-to"}},
		{[]string{"status", "-h"}, "eosink status", []string{"-pipeline", "-config"}, []string{"-to"}},
		{[]string{"migrate", "-h"}, "eosink migrate up|down", []string{"-yes", "-config"}, nil},
		{[]string{"migrate", "up", "-h"}, "eosink migrate up", []string{"-config", "-database-url", "-schema"}, []string{"-yes"}},
		{[]string{"migrate", "down", "--help"}, "eosink migrate down", []string{"-yes"}, nil},
		{[]string{"migrate", "version", "-h"}, "eosink migrate version", []string{"-config"}, []string{"-yes"}},
		{[]string{"migrate", "force", "-h"}, "eosink migrate force VERSION", []string{"-config"}, []string{"-yes"}},
		{[]string{"dlq", "-h"}, "eosink dlq <command>", nil, nil},
		{[]string{"dlq", "--help"}, "eosink dlq <command>", nil, nil},
		{[]string{"dlq", "list", "-h"}, "eosink dlq list", []string{"-pipeline", "-limit", "-topic", "-partition", "-config", "-all"}, []string{"-yes", "-dry-run", "-id ", "-operator"}},
		{[]string{"dlq", "edit", "-h"}, "eosink dlq edit", []string{"-id", "-value-file", "-value", "-key", "-operator", "-reason"}, []string{"-yes", "-all", "-limit"}},
		{[]string{"dlq", "show", "-h"}, "eosink dlq show", []string{"-id"}, []string{"-limit", "-yes", "-pipeline"}},
		{[]string{"dlq", "replay", "-h"}, "eosink dlq replay", []string{"-config", "-dry-run", "-id"}, []string{"-database-url", "-pipeline", "-yes", "-limit"}},
		{[]string{"dlq", "discard", "--help"}, "eosink dlq discard", []string{"-yes", "-all", "-pipeline"}, []string{"-limit"}},
		{[]string{"produce", "-h"}, "eosink produce -topic T", []string{"-topic", "-file", "-key-field", "-tab-key", "-create-topic", "-partitions", "-brokers", "-kafka", "-config"},
			[]string{"-database-url", "-schema", "-json"}},
		{[]string{"cdc", "-h"}, "eosink cdc verify", nil, nil},
		{[]string{"cdc", "verify", "-h"}, "eosink cdc verify -config FILE -source URL", []string{"-config", "-source", "-table", "-chunk", "-wait", "-topic-prefix", "-progress"}, []string{"-database-url"}},
	} {
		code, out, errOut := runCLI(c.args...)
		if code != 0 || errOut != "" || strings.Contains(out, "eosink: ") {
			t.Errorf("eosink %v: exit %d, stderr %q, stdout:\n%s\nwant exit 0, help on stdout only, no error line", c.args, code, errOut, out)
			continue
		}
		if !strings.HasPrefix(out, "usage: "+c.usage) {
			t.Errorf("eosink %v: help starts %.80q, want %q", c.args, out, "usage: "+c.usage)
		}
		if strings.Contains(out, "pw-in-env") {
			t.Errorf("eosink %v: help shows the password of DATABASE_URL", c.args)
		}
		if c.flags != nil || c.absent != nil {
			// A subcommand's help: synopsis, blank, one line of description, blank, flags.
			lines := strings.Split(out, "\n")
			if len(lines) < 5 || lines[1] != "" || lines[2] == "" || lines[3] != "" || lines[4] != "flags:" {
				t.Errorf("eosink %v: want synopsis, one description line, then flags:\n%s", c.args, out)
			}
		}
		for _, f := range c.flags {
			if !strings.Contains(out, "\n  "+f) {
				t.Errorf("eosink %v: help lacks %s:\n%s", c.args, f, out)
			}
		}
		for _, f := range c.absent {
			if strings.Contains(out, "\n  "+f) {
				t.Errorf("eosink %v: help shows %s, which is not its flag:\n%s", c.args, f, out)
			}
		}
	}
	// Help after a parsed flag never prints that flag's value as a default.
	if _, out, _ := runCLI("offsets", "list", "-database-url", "postgres://u:pw-on-line@h/db", "-h"); strings.Contains(out, "pw-on-line") {
		t.Errorf("help printed a value given before -h:\n%s", out)
	}
}

// TestUsageErrorsStayErrors: a flag the command does not know, or a subcommand's foreign flag,
// is still exit 2 on standard error.
func TestUsageErrorsStayErrors(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"offsets", "list", "-to", "5"}, "eosink offsets list does not take -to"},
		{[]string{"dlq", "list", "-yes"}, "eosink dlq list does not take -yes"},
		{[]string{"dlq", "replay", "-database-url", "x"}, "the database and pipeline come from -config"},
		{[]string{"dlq", "replay"}, "admin.Client.ReplayHandler"}, // a Go handler has no config file
		{[]string{"dlq", "edit", "-id", "1", "-value", "v", "-value-file", "f", "-operator", "o", "-reason", "r", "-database-url", "x"}, "-value and -value-file exclude each other"},
		{[]string{"dlq", "edit", "-id", "1", "-value", "v", "-reason", "r", "-database-url", "x"}, "-operator NAME is required"},
		{[]string{"dlq", "edit", "-id", "1", "-operator", "o", "-reason", "r", "-database-url", "x"}, "give the corrected value"},
		{[]string{"migrate", "up", "-yes"}, "eosink migrate up does not take -yes"},
		{[]string{"dlq", "frob"}, `unknown command "frob"`},
		{[]string{"run", "-config", "x.yaml", "-progress", "soon"}, `"soon" is not a duration`},
		{[]string{"version", "extra"}, "unexpected arguments"},
		{[]string{"cdc", "frob"}, `unknown subcommand "frob"`},
		{[]string{"cdc", "verify", "-source", "postgres://x"}, "-config FILE is required"},
		{[]string{"cdc", "verify", "-config", "x.yaml"}, "no source database"},
	} {
		code, out, errOut := runCLI(c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("eosink %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
}

func TestVersion(t *testing.T) {
	code, out, errOut := runCLI("version")
	if code != 0 || errOut != "" {
		t.Fatalf("eosink version: exit %d, stderr %q", code, errOut)
	}
	_, lib := kafka.LibraryVersion()
	for _, want := range []string{"eosink ", "\ncommit:     ", "\ngo:         " + runtime.Version() + "\n", "\nlibrdkafka: " + lib + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("eosink version printed:\n%s\nwant %q in it", out, want)
		}
	}
	code, out, _ = runCLI("version", "-json")
	var v struct{ Module, Go, Librdkafka string }
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Go != runtime.Version() || v.Librdkafka != lib || v.Module == "" {
		t.Fatalf("eosink version -json: exit %d, %v: %s", code, err, out)
	}
}

// TestOffsetsSetNamesTheMissingFlag: each missing flag of offsets set is named, before
// anything connects (no database is configured here).
func TestOffsetsSetNamesTheMissingFlag(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	t.Setenv("KAFKA_BOOTSTRAP_SERVERS", "")
	t.Setenv("USER", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"offsets", "set", "-to", "earliest", "-reason", "r", "-operator", "me"}, "offsets set: -pipeline is required"},
		{[]string{"offsets", "set", "-pipeline", "p", "-reason", "r", "-operator", "me"}, "offsets set: -to is required"},
		{[]string{"offsets", "set", "-pipeline", "p", "-to", "earliest", "-operator", "me"}, "offsets set: -reason is required"},
		{[]string{"offsets", "set", "-pipeline", "p", "-to", "earliest", "-reason", "r"}, "offsets set: -operator is required"},
		{[]string{"offsets", "reset", "-pipeline", "p", "-to", "earliest", "-reason", "r", "-operator", " "}, "offsets set: -operator is required"},
		// With everything named, the next problem is the connection.
		{[]string{"offsets", "set", "-pipeline", "p", "-to", "earliest", "-reason", "r", "-operator", "me"}, "no database"},
	} {
		code, _, errOut := runCLI(c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("eosink %v: exit %d, stderr %q; want exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
	// USER is the default operator.
	t.Setenv("USER", "alice")
	if code, _, errOut := runCLI("offsets", "set", "-pipeline", "p", "-to", "earliest", "-reason", "r"); code != 2 || !strings.Contains(errOut, "no database") {
		t.Errorf("with USER set: exit %d, %q; want the connection as the next problem", code, errOut)
	}
}

func TestEnvKafkaProperties(t *testing.T) {
	got := envKafkaProperties([]string{
		"EOSINK_KAFKA_PROPERTY_SASL_PASSWORD=pw=with=equals",
		"EOSINK_KAFKA_PROPERTY_SECURITY_PROTOCOL=SASL_SSL",
		"EOSINK_KAFKA_PROPERTY_SOME__UNDERSCORED_NAME=x",
		"EOSINK_KAFKA_PORT=29592", // the test bed's, not a property
		"EOSINK_KAFKA_PROPERTY_=ignored",
		"PATH=/bin",
	})
	want := map[string]string{"sasl.password": "pw=with=equals", "security.protocol": "SASL_SSL", "some_underscored.name": "x"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// TestOperatorKafkaConfig: the operator commands' broker configuration comes from the
// environment, the -config file's connection properties and -kafka, in that order of
// precedence, with the brokers last.
func TestOperatorKafkaConfig(t *testing.T) {
	t.Setenv("EOSINK_KAFKA_PROPERTY_SASL_USERNAME", "env-user")
	t.Setenv("EOSINK_KAFKA_PROPERTY_SASL_PASSWORD", "env-pw")
	t.Setenv("EOSINK_KAFKA_PROPERTY_CLIENT_ID", "env-client")
	t.Setenv("KAFKA_BOOTSTRAP_SERVERS", "env-broker:9092")
	t.Setenv("FILE_PW", "file-pw")
	file := writeFile(t, `
pipeline: from-file
kafka:
  brokers: file-broker:9092
  group: g
  topics: [t]
  properties:
    sasl.password: ${FILE_PW}
    security.protocol: SSL
    session.timeout.ms: 6000
database: {url: "postgres://u:p@127.0.0.1:1/db", schema: file_schema}
sink: {type: clitest}
`)
	var o opsFlags
	fs := newOpsFlagSet(&o)
	pipe := ""
	if err := fs.Parse([]string{"-config", file, "-kafka", "client.id=flag-client"}); err != nil {
		t.Fatal(err)
	}
	if err := o.load(fs, &bytes.Buffer{}, &pipe); err != nil {
		t.Fatal(err)
	}
	kc := o.kafkaConfig()
	want := kafka.ConfigMap{"bootstrap.servers": "file-broker:9092", "sasl.username": "env-user", "sasl.password": "file-pw",
		"security.protocol": "SSL", "client.id": "flag-client"}
	if len(kc) != len(want) {
		t.Fatalf("config %v, want %v (session.timeout.ms is the sink's, not a connection property)", kc, want)
	}
	for k, v := range want {
		if kc[k] != v {
			t.Fatalf("config %v, want %v", kc, want)
		}
	}
	if pipe != "from-file" || o.schema != "file_schema" || o.dbURL != "postgres://u:p@127.0.0.1:1/db" {
		t.Fatalf("pipeline %q, schema %q, database %q from the file", pipe, o.schema, o.dbURL)
	}
	// -config replaces -database-url, -schema and -brokers.
	var o2 opsFlags
	fs2 := newOpsFlagSet(&o2)
	if err := fs2.Parse([]string{"-config", file, "-brokers", "b:1"}); err != nil {
		t.Fatal(err)
	}
	if err := o2.load(fs2, &bytes.Buffer{}, nil); err == nil || !strings.Contains(err.Error(), "drop -brokers") {
		t.Fatalf("-config with -brokers: %v", err)
	}
	// Without -config: the environment's brokers and properties.
	var o3 opsFlags
	fs3 := newOpsFlagSet(&o3)
	if err := fs3.Parse(nil); err != nil {
		t.Fatal(err)
	}
	o3.brokers = "env-broker:9092" // what client reads from KAFKA_BOOTSTRAP_SERVERS
	if kc := o3.kafkaConfig(); kc["sasl.password"] != "env-pw" || kc["bootstrap.servers"] != "env-broker:9092" || kc["client.id"] != "env-client" {
		t.Fatalf("from the environment: %v", kc)
	}
}

// TestProgressLine: the progress line's numbers come from the sink's counters over the
// interval and the lag gauge in the registry.
func TestProgressLine(t *testing.T) {
	reg := prometheus.NewRegistry()
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eosink_partition_lag"}, []string{"topic", "partition"})
	reg.MustRegister(lag)
	lag.WithLabelValues("t", "0").Set(40)
	lag.WithLabelValues("t", "1").Set(2)
	args := progressArgs(sink.Stats{Records: 100, DeadLetters: 1}, sink.Stats{Records: 1100, DeadLetters: 4}, 2*time.Second, reg)
	got := map[string]any{}
	for i := 0; i+1 < len(args); i += 2 {
		got[args[i].(string)] = args[i+1]
	}
	want := map[string]any{"records_per_second": 500.0, "records": int64(1100), "lag": int64(42), "partitions": 2,
		"dead_letters": int64(4), "dead_letters_in_interval": int64(3)}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("progress %v, want %v", got, want)
		}
	}
}

func newOpsFlagSet(o *opsFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.register(fs)
	return fs
}

func TestVersionOf(t *testing.T) {
	settings := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want Version
	}{
		{"built from a checkout", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}, Settings: settings},
			Version{Module: "(devel)", Commit: "abc123", Modified: true}},
		{"go install @v1.2.3", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.2.3"}},
			Version{Module: "v1.2.3"}},
		{"a custom binary: its commit is not eosink's", &debug.BuildInfo{Main: debug.Module{Path: "example.com/mine", Version: "(devel)"},
			Deps: []*debug.Module{{Path: "github.com/other/x", Version: "v9.9.9"}, {Path: modulePath, Version: "v1.4.0"}}, Settings: settings},
			Version{Module: "v1.4.0"}},
		{"a custom binary with eosink replaced", &debug.BuildInfo{Main: debug.Module{Path: "example.com/mine"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.4.0", Replace: &debug.Module{Path: "../eosink", Version: "(devel)"}}}},
			Version{Module: "(devel)"}},
	} {
		got := versionOf(c.bi, true)
		c.want.Go = runtime.Version()
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if got := versionOf(nil, false); got.Module != "unknown" || got.Commit != "" {
		t.Errorf("without build information: %+v", got)
	}
}
