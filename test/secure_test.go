package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// securePipeline is a pipeline whose tables the migrate role made, over TLS, and whose run
// role holds only docs/sql/grants.sql's privileges and the Kafka ACLs of a sink.
type securePipeline struct {
	*testbed.Pipeline
	sec testbed.Secure
}

func newSecurePipeline(t *testing.T, partitions int) *securePipeline {
	t.Helper()
	e := testbed.Require(t)
	sec := testbed.RequireSecure(t)
	p := &testbed.Pipeline{Env: e, Topic: testbed.Topic(t, e, partitions), Group: testbed.Name(t, "g"),
		Schema: testbed.Schema(t, e), OffsetsSchema: testbed.Schema(t, e)}
	ctx := context.Background()
	// The migrate role creates both schemas (CREATE on the database) and owns their tables.
	if err := sink.Migrate(ctx, sec.MigrateURL(), p.OffsetsSchema); err != nil {
		t.Fatalf("migrate offsets as %s: %v", sec.MigrateUser, err)
	}
	if err := app.Migrate(ctx, sec.MigrateURL(), p.Schema); err != nil {
		t.Fatalf("migrate example as %s: %v", sec.MigrateUser, err)
	}
	sec.GrantDatabase(t, p.OffsetsSchema, p.Schema)
	testbed.GrantKafka(t, e, "User:"+sec.KafkaUser, p.Topic, p.Group)
	return &securePipeline{p, sec}
}

// args are the points run flags for this pipeline with Kafka config k and database URL db.
func (p *securePipeline) args(k kafka.ConfigMap, db string) []string {
	args := append([]string{"run", "-database-url", db, "-topic", p.Topic, "-group", p.Group, "-schema", p.Schema,
		"-offsets-schema", p.OffsetsSchema, "-migrate=false"}, testbed.KafkaArgs(k)...)
	return append(args, classicTimeouts...)
}

// tlsSessions counts the sink's sessions in pg_stat_activity that run as role over TLS.
func tlsSessions(t *testing.T, p *securePipeline, role string) int {
	t.Helper()
	var n int
	err := testbed.Pool(t, p.Env).QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
		WHERE a.usename = $1 AND s.ssl AND a.application_name LIKE 'eosink:%'`, role).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSecurePipeline runs the points pipeline as the least-privilege run role, through
// Kafka's SASL_SSL listener (SCRAM-SHA-512) and PostgreSQL with sslmode=verify-full,
// SIGKILLs the sink mid-stream and restarts it; then through the mTLS listener. Every event
// is applied once.
func TestSecurePipeline(t *testing.T) {
	t.Parallel()
	p := newSecurePipeline(t, 4)
	sec := p.sec
	const events = 6000
	p.Produce(t, events, 71)

	sasl := sec.SASL(sec.KafkaSASL, sec.KafkaPassword, sec.CA)
	first := startChild(t, "sink-sasl-1", p.args(sasl, sec.RunURL()), "GOTRACEBACK=none")
	testbed.Eventually(t, 60*time.Second, "the first sink to apply some events", func() (bool, string) {
		rep := p.Verify(t)
		return rep.Applied > 0, "nothing applied yet"
	})
	if n := tlsSessions(t, p, sec.RunUser); n == 0 {
		t.Fatalf("no session of the sink runs as %s over TLS", sec.RunUser)
	}
	first.Signal(syscall.SIGKILL)
	if err := first.Wait(20 * time.Second); !testbed.KilledBySIGKILL(err) {
		t.Fatalf("first sink: want SIGKILL, got %v\n%s", err, first.Output())
	}
	if !first.Contains("GRANT pg_signal_backend TO " + sec.RunUser) {
		t.Fatalf("no start-up warning that %s cannot end another role's stalled session:\n%s", sec.RunUser, first.Output())
	}
	if first.Contains("permission denied") {
		t.Fatalf("the run role lacked a privilege:\n%s", first.Output())
	}

	second := startChild(t, "sink-sasl-2", p.args(sasl, sec.RunURL()))
	rep := p.WaitCaughtUp(t, 120*time.Second)
	second.StopClean(30 * time.Second)
	if rep.Produced != events || rep.Applied != events || rep.Duplicates != 0 || rep.Lost != 0 {
		t.Fatalf("after SIGKILL and restart over SASL_SSL: %+v", rep)
	}
	if second.Contains("permission denied") {
		t.Fatalf("the run role lacked a privilege:\n%s", second.Output())
	}
	t.Logf("SASL_SSL + verify-full as %s: %+v", sec.RunUser, rep)

	// The same pipeline through the mTLS listener: the client certificate's CN is the principal.
	p.Produce(t, 1000, 72)
	third := startChild(t, "sink-mtls", p.args(sec.MTLS(), sec.RunURL()))
	rep = p.WaitCaughtUp(t, 120*time.Second)
	third.StopClean(30 * time.Second)
	if rep.Applied != events+1000 || rep.Duplicates != 0 || rep.Lost != 0 {
		t.Fatalf("after the mTLS run: %+v", rep)
	}
	t.Logf("mTLS + verify-full as %s: %+v", sec.RunUser, rep)
}

// TestSecureRefused: a wrong password (Kafka SASL and PostgreSQL), an untrusted CA and a
// certificate for another host (both services), and a missing client certificate each stop
// the sink at start with an error that names the cause, and nothing is written.
func TestSecureRefused(t *testing.T) {
	t.Parallel()
	p := newSecurePipeline(t, 2)
	sec := p.sec
	p.Produce(t, 200, 73)
	good := sec.SASL(sec.KafkaSASL, sec.KafkaPassword, sec.CA)
	noClientCert := sec.MTLS()
	delete(noClientCert, "ssl.certificate.location")
	delete(noClientCert, "ssl.key.location")
	cases := []struct {
		name  string
		kafka kafka.ConfigMap
		db    string
		want  []string
	}{
		{"kafka-wrong-password", sec.SASL(sec.KafkaSASL, "not-the-password", sec.CA), sec.RunURL(),
			[]string{"eosink: Kafka authentication failed", "SASL authentication error", "invalid credentials"}},
		{"kafka-untrusted-ca", sec.SASL(sec.KafkaSASL, sec.KafkaPassword, sec.UntrustedCA), sec.RunURL(),
			[]string{"eosink: TLS handshake with Kafka failed", "the broker's certificate is not trusted: x509: certificate signed by unknown authority", "certificate verify failed"}},
		{"kafka-wrong-host", sec.SASL(sec.KafkaWrongHost, sec.KafkaPassword, sec.CA), sec.RunURL(),
			[]string{"eosink: TLS handshake with Kafka failed", "the broker's certificate is for another host name: x509:"}},
		{"kafka-no-client-certificate", noClientCert, sec.RunURL(),
			[]string{"eosink: TLS handshake with Kafka failed", "the broker refused the client certificate"}},
		{"pg-wrong-password", good, sec.DatabaseURL(sec.RunUser, "not-the-password", sec.PGHost, sec.CA),
			[]string{"cannot connect to PostgreSQL", "password authentication failed for user \"" + sec.RunUser + "\""}},
		{"pg-untrusted-ca", good, sec.DatabaseURL(sec.RunUser, sec.RunPassword, sec.PGHost, sec.UntrustedCA),
			[]string{"cannot connect to PostgreSQL", "certificate signed by unknown authority"}},
		{"pg-wrong-host", good, sec.DatabaseURL(sec.RunUser, sec.RunPassword, sec.PGWrongHost, sec.CA),
			[]string{"cannot connect to PostgreSQL", "certificate is valid for", "not " + sec.PGWrongHost}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			child := startChild(t, c.name, p.args(c.kafka, c.db))
			err, exited := child.WaitFor(45 * time.Second)
			if !exited {
				t.Fatalf("the sink still runs after 45s; want a start-up error naming the cause. Output:\n%s", child.Output())
			}
			out := child.Output()
			if err == nil {
				t.Fatalf("the sink exited 0; want a start-up error. Output:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			last := lastLine(out, "points:")
			if strings.Contains(last, "transport failure") && !strings.Contains(last, "eosink: TLS") && !strings.Contains(last, "eosink: Kafka authentication") {
				t.Errorf("the error is a bare transport failure: %s", last)
			}
			took := time.Since(start)
			if took > 15*time.Second {
				t.Errorf("the sink took %s to give up; want a fast failure", took)
			}
			t.Logf("%s: exited in %s: %s", c.name, took.Round(100*time.Millisecond), last)
			assertNothingWritten(t, p)
		})
	}
}

// lastLine returns the last line of out that starts with prefix.
func lastLine(out, prefix string) string {
	last := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) && !strings.HasPrefix(l, "points: stopped") {
			last = l
		}
	}
	return last
}

// assertNothingWritten checks that no offsets row, heartbeat, dead letter or business row exists.
func assertNothingWritten(t *testing.T, p *securePipeline) {
	t.Helper()
	db := testbed.Pool(t, p.Env)
	for _, tbl := range []pgx.Identifier{{p.OffsetsSchema, "offsets"}, {p.OffsetsSchema, "instances"},
		{p.OffsetsSchema, "dead_letters"}, {p.Schema, "ledger"}, {p.Schema, "balances"}} {
		var n int
		if err := db.QueryRow(context.Background(), "SELECT count(*) FROM "+tbl.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s has %d rows after a refused start; want none", tbl.Sanitize(), n)
		}
	}
}

// TestSecureRunErrors: Run returns the named sentinels for refused credentials and a failed
// TLS handshake, so that a library user can tell them apart with errors.Is.
func TestSecureRunErrors(t *testing.T) {
	t.Parallel()
	p := newSecurePipeline(t, 1)
	sec := p.sec
	for _, c := range []struct {
		name  string
		kafka kafka.ConfigMap
		want  error
	}{
		{"wrong-password", sec.SASL(sec.KafkaSASL, "not-the-password", sec.CA), sink.ErrKafkaAuthentication},
		{"untrusted-ca", sec.SASL(sec.KafkaSASL, sec.KafkaPassword, sec.UntrustedCA), sink.ErrKafkaTLS},
		{"wrong-host", sec.SASL(sec.KafkaWrongHost, sec.KafkaPassword, sec.CA), sink.ErrKafkaTLS},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := sink.New(sink.Config{GroupID: p.Group, Topics: []string{p.Topic}, DatabaseURL: sec.RunURL(),
				Schema: p.OffsetsSchema, Handler: nopHandler, Kafka: c.kafka})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = s.Run(ctx)
			if !errors.Is(err, c.want) {
				t.Fatalf("Run: got %v, want errors.Is %v", err, c.want)
			}
			t.Logf("%v", err)
		})
	}
	assertNothingWritten(t, p)
}

// TestSecureAudit: an operator's move records, beside the operator's self-declared name, the
// session's database role and client address (migration 6), written by the server. The
// operator here is the migrate role over TLS and the run user over SASL_SSL on the broker.
func TestSecureAudit(t *testing.T) {
	t.Parallel()
	p := newSecurePipeline(t, 1)
	sec := p.sec
	p.Produce(t, 20, 74)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, sec.MigrateURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := admin.New(pool, p.OffsetsSchema, sec.SASL(sec.KafkaSASL, sec.KafkaPassword, sec.CA))
	plan, err := c.Plan(ctx, admin.Selector{Pipeline: p.Group, Topic: p.Topic}, admin.Offset(5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, plan, "alice (says she is)", "test the audit"); err != nil {
		t.Fatal(err)
	}
	var operator, dbUser, addr string
	err = testbed.Pool(t, p.Env).QueryRow(ctx, "SELECT operator, db_user, host(client_addr) FROM "+
		pgx.Identifier{p.OffsetsSchema, "offsets_audit"}.Sanitize()+" WHERE pipeline = $1", p.Group).Scan(&operator, &dbUser, &addr)
	if err != nil {
		t.Fatal(err)
	}
	if operator != "alice (says she is)" || dbUser != sec.MigrateUser || addr != sec.PGHost {
		t.Fatalf("audit row: operator %q db_user %q client_addr %q; want db_user %q from %s", operator, dbUser, addr, sec.MigrateUser, sec.PGHost)
	}
	t.Logf("audit: operator %q, db_user %q, client_addr %s", operator, dbUser, addr)

	// Listing with lag reads the log ends, the group's committed offsets and, past the stored
	// position, one record: the ACLs of docs/security.md are enough for it.
	ps, err := c.List(ctx, p.Group)
	if err != nil {
		t.Fatalf("list as the run user over SASL_SSL: %v", err)
	}
	if len(ps) != 1 || ps[0].Lag != 15 || ps[0].Error != "" {
		t.Fatalf("positions: %+v; want one at 5 with lag 15", ps)
	}
}

// TestSecureConfigFile runs examples/secure/pipeline.yaml with `eosink run`: SASL_SSL and
// verify-full as the run role, the passwords read with ${file:...}. Every record is
// inserted once, and SIGTERM drains.
func TestSecureConfigFile(t *testing.T) {
	t.Parallel()
	p := newSecurePipeline(t, 2)
	sec := p.sec
	ctx := context.Background()
	mig, err := pgx.Connect(ctx, sec.MigrateURL())
	if err != nil {
		t.Fatal(err)
	}
	defer mig.Close(ctx)
	if _, err := mig.Exec(ctx, "CREATE TABLE "+pgx.Identifier{p.Schema, "payments"}.Sanitize()+
		" (payment_id text PRIMARY KEY, amount bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	sec.GrantDatabase(t, p.OffsetsSchema, p.Schema) // again, for the new table

	dir := t.TempDir()
	yaml, err := os.ReadFile("../examples/secure/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "pipeline.yaml")
	must(t, os.WriteFile(config, yaml, 0o644))
	must(t, os.Mkdir(filepath.Join(dir, "secrets"), 0o700))
	must(t, os.WriteFile(filepath.Join(dir, "secrets", "kafka-password"), []byte(sec.KafkaPassword+"\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "secrets", "pg-password"), []byte(sec.RunPassword+"\n"), 0o600))

	const n = 500
	msgs := make([]testbed.Msg, n)
	for i := range msgs {
		msgs[i] = testbed.Msg{Partition: int32(i % 2), Key: []byte(strconv.Itoa(i)),
			Value: []byte(fmt.Sprintf(`{"payment_id":"p-%d","amount":%d}`, i, i))}
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)

	env := []string{"KAFKA_SASL_BOOTSTRAP=" + sec.KafkaSASL, "TLS_CA=" + sec.CA, "PG_HOST=" + sec.PGHost, "PG_PORT=" + sec.PGPort,
		"PAYMENTS_PIPELINE=" + p.Group, "PAYMENTS_GROUP=" + p.Group, "PAYMENTS_TOPIC=" + p.Topic,
		"PAYMENTS_OFFSETS_SCHEMA=" + p.OffsetsSchema, "PAYMENTS_SCHEMA=" + p.Schema}
	if out, err := run(t, env, true, eosinkBin, "run", "-config", config, "-validate"); err != nil {
		t.Fatalf("-validate: %v\n%s", err, out)
	}
	s := testbed.StartProcess(t, eosinkBin, "eosink run secure", []string{"run", "-config", config}, env...)
	db := testbed.Pool(t, p.Env)
	testbed.Eventually(t, 90*time.Second, "every payment inserted", func() (bool, string) {
		var rows, sum int64
		if err := db.QueryRow(ctx, "SELECT count(*), coalesce(sum(amount), 0) FROM "+pgx.Identifier{p.Schema, "payments"}.Sanitize()).Scan(&rows, &sum); err != nil {
			return false, err.Error()
		}
		return rows == n && sum == n*(n-1)/2, fmt.Sprintf("%d rows, sum %d", rows, sum)
	})
	s.StopClean(30 * time.Second)
	var stored int64
	if err := db.QueryRow(ctx, "SELECT sum(next_offset) FROM "+pgx.Identifier{p.OffsetsSchema, "offsets"}.Sanitize()+
		" WHERE pipeline = $1", p.Group).Scan(&stored); err != nil || stored != n {
		t.Fatalf("stored next offsets sum to %d (%v), want %d", stored, err, n)
	}
	if strings.Contains(s.Output(), sec.KafkaPassword) || strings.Contains(s.Output(), sec.RunPassword) {
		t.Fatalf("the output shows a password:\n%s", s.Output())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
