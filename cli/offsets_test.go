package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestOffsetsSetDryRunChecksLikeTheRun: a dry run refuses every argument the real run
// refuses, with the same message, before connecting (no database is set here), so that a dry
// run that passes can be run as is.
func TestOffsetsSetDryRunChecksLikeTheRun(t *testing.T) {
	t.Setenv("USER", "")
	t.Setenv("DATABASE_URL", "")
	t.Setenv("KAFKA_BOOTSTRAP_SERVERS", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-pipeline", "p", "-to", "earliest", "-reason", "replay"}, "offsets set: -operator is required (it goes to the audit table; USER is not set)"},
		{[]string{"-pipeline", "p", "-to", "earliest", "-operator", "me"}, "offsets set: -reason is required"},
		{[]string{"-pipeline", "p", "-to", "earliest", "-operator", "me", "-reason", "x", "-partition", "1"}, "offsets set: -partition needs -topic"},
		{[]string{"-pipeline", "p", "-to", "soon", "-operator", "me", "-reason", "x"}, "offsets set: -to: "},
		{[]string{"-to", "earliest", "-operator", "me", "-reason", "x"}, "offsets set: -pipeline is required"},
	} {
		for _, dry := range []bool{false, true} {
			args := append([]string{"offsets", "set"}, tc.args...)
			if dry {
				args = append(args, "-dry-run")
			}
			code, _, errOut := runCLI(args...)
			if code != 2 || !strings.Contains(errOut, "eosink: "+tc.want) {
				t.Errorf("eosink %v: exit %d, stderr %q; want exit 2 and %q", args, code, errOut, tc.want)
			}
		}
	}
	// With every argument, the dry run gets as far as connecting.
	code, _, errOut := runCLI("offsets", "set", "-pipeline", "p", "-to", "earliest", "-operator", "me", "-reason", "x", "-dry-run")
	if code != 2 || !strings.Contains(errOut, "no database") {
		t.Errorf("complete dry run: exit %d, stderr %q; want the missing database", code, errOut)
	}
}

// TestOffsetsSetSaysWhatAReplayDoes: a move back prints what the -config file's sink does
// with the records that come again (a replay that only_if_newer skips repairs nothing), and
// without -config says that it cannot tell; a move forward prints nothing of the kind.
func TestOffsetsSetSaysWhatAReplayDoes(t *testing.T) {
	e, schema, topic := positionsBed(t, "('replaypipe', $1, 0, 10, 1, 'host-r')")
	t.Setenv("KAFKA_BOOTSTRAP_SERVERS", e.Brokers)
	t.Setenv("DATABASE_URL", e.DatabaseURL)
	file := func(onEqual string) string {
		return writeFile(t, fmt.Sprintf(`
pipeline: replaypipe
kafka: {brokers: %q, group: g, topics: [%s]}
database: {url: %q, schema: %s}
sink:
  type: multi
  sinks:
    - {type: table, table: payments_history, on_conflict: nothing, columns: {id: value.id}}
    - type: upsert
      table: payments
      key: [id]
      only_if_newer: at
      on_equal: %s
      columns: {id: value.id, at: value.at}
`, e.Brokers, topic, e.DatabaseURL, schema, onEqual))
	}
	for _, tc := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"-config", file("skip"), "-to", "4", "-dry-run"},
			[]string{"replay: 6 records go through the pipeline again; what sink multi does with them:",
				"sinks[0]: table (every topic) -> payments_history: a replay keeps the rows it brings again as they are (on_conflict: nothing)",
				"sinks[1]: upsert (every topic) -> payments (key id): a replay skips the records whose at equals the row's", "set on_equal: update", "dry run: nothing changed"}, nil},
		{[]string{"-config", file("update"), "-to", "4", "-dry-run"},
			[]string{"replay: 6 records", "sinks[0]: table (every topic) -> payments_history"}, []string{"sinks[1]"}},
		{[]string{"-pipeline", "replaypipe", "-schema", schema, "-to", "earliest", "-dry-run"},
			[]string{"replay: 10 records go through the pipeline again; pass -config FILE to see what its sink does with them"}, nil},
		{[]string{"-config", file("skip"), "-to", "latest"}, nil, []string{"replay:"}}, // forward, from 10 to 10
		{[]string{"-config", file("skip"), "-to", "2"}, []string{"replay: 8 records", "sinks[1]: upsert (every topic) -> payments"}, nil},
	} {
		args := append([]string{"offsets", "set", "-reason", "bug 123 fixed", "-operator", "me"}, tc.args...)
		code, out, errOut := runCLI(args...)
		if code != 0 {
			t.Fatalf("eosink %v: exit %d, stderr %q", args, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("eosink %v: stderr %q lacks %q (stdout %q)", args, errOut, w, out)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(errOut, n) {
				t.Errorf("eosink %v: stderr %q has %q", args, errOut, n)
			}
		}
	}
}

// positionsBed makes a migrated schema and a one-partition topic with 10 records, and stores
// rows, SQL VALUES lists with $1 for the topic (pipeline, topic, partition, next_offset,
// epoch, owner), in its offsets table: the state the operator commands read.
func positionsBed(t *testing.T, rows string) (e testbed.Env, schema, topic string) {
	t.Helper()
	e = testbed.Require(t)
	schema = testbed.Schema(t, e)
	topic = testbed.Topic(t, e, 1)
	ctx := context.Background()
	if err := sink.Migrate(ctx, e.DatabaseURL, schema); err != nil {
		t.Fatal(err)
	}
	if n, err := app.Produce(ctx, app.ProduceOptions{Brokers: e.Brokers, Topic: topic, Events: 10, Seed: 9}); err != nil || n != 10 {
		t.Fatal(n, err)
	}
	if _, err := testbed.Pool(t, e).Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "offsets"}.Sanitize()+
		" (pipeline, topic, partition, next_offset, epoch, owner) VALUES "+rows, topic); err != nil {
		t.Fatal(err)
	}
	return e, schema, topic
}
