package testbed

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Secure names the secure parts of the test bed that `services.sh up` starts (EOSINK_SECURE=1,
// the default) and lists in its env file as EOSINK_SECURE_*: the broker's SASL_SSL, mTLS and
// wrong-host-certificate listeners, PostgreSQL over TLS with the least-privilege roles of
// docs/sql/roles.sql, and the throwaway CA's files.
type Secure struct {
	KafkaSASL         string // SASL_SSL (SCRAM-SHA-512) bootstrap address
	KafkaMTLS         string // SSL listener that requires a client certificate
	KafkaWrongHost    string // SASL_SSL listener whose certificate is for wrong-host.invalid
	KafkaUser         string // SCRAM user for the run role (its principal: User:<KafkaUser>)
	KafkaPassword     string
	KafkaPasswordFile string

	PGHost                                            string // the address PostgreSQL's certificate names
	PGWrongHost                                       string // another address of the same server, which its certificate does not name
	PGPort                                            string
	RunUser, RunPassword, RunPasswordFile             string // the sink's role
	MigrateUser, MigratePassword, MigratePasswordFile string // the role that migrates and grants

	CA          string // PEM of the CA that signed the bed's certificates
	UntrustedCA string // PEM of a CA that signed none of them
	ClientCert  string // client certificate (CN = KafkaUser) for the mTLS listener
	ClientKey   string
}

// RequireSecure returns the secure bed, failing the test (never skipping it) with how to start
// it when the env file did not name it.
func RequireSecure(t testing.TB) Secure {
	t.Helper()
	get := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("testbed: the secure test bed is missing: %s is not set. Start it with `make services` "+
				"(test/services/services.sh up, with EOSINK_SECURE=1, the default) and `. .services/env`, or run `make test`, which does both", name)
		}
		return v
	}
	read := func(name string) (string, string) {
		path := get(name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("testbed: secure test bed: %s: %v", name, err)
		}
		return strings.TrimSpace(string(b)), path
	}
	s := Secure{
		KafkaSASL: get("EOSINK_SECURE_KAFKA_SASL"), KafkaMTLS: get("EOSINK_SECURE_KAFKA_MTLS"),
		KafkaWrongHost: get("EOSINK_SECURE_KAFKA_WRONGHOST"), KafkaUser: get("EOSINK_SECURE_KAFKA_USER"),
		PGHost: get("EOSINK_SECURE_PG_HOST"), PGWrongHost: get("EOSINK_SECURE_PG_WRONGHOST"), PGPort: get("EOSINK_SECURE_PG_PORT"),
		RunUser: get("EOSINK_SECURE_PG_RUN_USER"), MigrateUser: get("EOSINK_SECURE_PG_MIGRATE_USER"),
		CA: get("EOSINK_SECURE_CA"), UntrustedCA: get("EOSINK_SECURE_UNTRUSTED_CA"),
		ClientCert: get("EOSINK_SECURE_CLIENT_CERT"), ClientKey: get("EOSINK_SECURE_CLIENT_KEY"),
	}
	s.KafkaPassword, s.KafkaPasswordFile = read("EOSINK_SECURE_KAFKA_PASSWORD_FILE")
	s.RunPassword, s.RunPasswordFile = read("EOSINK_SECURE_PG_RUN_PASSWORD_FILE")
	s.MigratePassword, s.MigratePasswordFile = read("EOSINK_SECURE_PG_MIGRATE_PASSWORD_FILE")
	for _, f := range []string{s.CA, s.UntrustedCA, s.ClientCert, s.ClientKey} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("testbed: secure test bed: %v", err)
		}
	}
	return s
}

// DatabaseURL is a URL for user with password on host (PGHost or PGWrongHost), TLS with
// sslmode=verify-full against ca.
func (s Secure) DatabaseURL(user, password, host, ca string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: host + ":" + s.PGPort, Path: "/eosink",
		RawQuery: url.Values{"sslmode": {"verify-full"}, "sslrootcert": {ca}}.Encode()}
	return u.String()
}

// RunURL is the run role's URL, verify-full against the bed's CA.
func (s Secure) RunURL() string { return s.DatabaseURL(s.RunUser, s.RunPassword, s.PGHost, s.CA) }

// MigrateURL is the migrate role's URL, verify-full against the bed's CA.
func (s Secure) MigrateURL() string {
	return s.DatabaseURL(s.MigrateUser, s.MigratePassword, s.PGHost, s.CA)
}

// SASL is the librdkafka configuration for the SASL_SSL listener at bootstrap with password,
// trusting ca.
func (s Secure) SASL(bootstrap, password, ca string) kafka.ConfigMap {
	return kafka.ConfigMap{"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
		"sasl.username": s.KafkaUser, "sasl.password": password, "ssl.ca.location": ca}
}

// MTLS is the librdkafka configuration for the mTLS listener with the bed's client certificate.
func (s Secure) MTLS() kafka.ConfigMap {
	return kafka.ConfigMap{"bootstrap.servers": s.KafkaMTLS, "security.protocol": "SSL", "ssl.ca.location": s.CA,
		"ssl.certificate.location": s.ClientCert, "ssl.key.location": s.ClientKey}
}

// KafkaArgs turns a configuration into the points example's -brokers and -kafka flags.
func KafkaArgs(m kafka.ConfigMap) []string {
	args := []string{"-brokers", fmt.Sprint(m["bootstrap.servers"])}
	for k, v := range m {
		if k != "bootstrap.servers" {
			args = append(args, "-kafka", fmt.Sprintf("%s=%v", k, v))
		}
	}
	return args
}

// GrantKafka gives principal (User:NAME) what a sink needs on the broker, through e's
// PLAINTEXT listener (a super user there): Read and Describe on topic, Read and Describe on
// group. The ACLs are deleted when the test ends.
func GrantKafka(t testing.TB, e Env, principal, topic, group string) {
	t.Helper()
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": e.Brokers})
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	defer a.Close()
	var acls kafka.ACLBindings
	for _, r := range []struct {
		typ  kafka.ResourceType
		name string
	}{{kafka.ResourceTopic, topic}, {kafka.ResourceGroup, group}} {
		for _, op := range []kafka.ACLOperation{kafka.ACLOperationRead, kafka.ACLOperationDescribe} {
			acls = append(acls, kafka.ACLBinding{Type: r.typ, Name: r.name, ResourcePatternType: kafka.ResourcePatternTypeLiteral,
				Principal: principal, Host: "*", Operation: op, PermissionType: kafka.ACLPermissionTypeAllow})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.CreateACLs(ctx, acls)
	if err != nil {
		t.Fatalf("create ACLs: %v", err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			t.Fatalf("create ACLs: %v", r.Error)
		}
	}
	t.Cleanup(func() {
		a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": e.Brokers})
		if err != nil {
			return
		}
		defer a.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var filters kafka.ACLBindingFilters
		for _, b := range acls {
			filters = append(filters, kafka.ACLBindingFilter(b))
		}
		_, _ = a.DeleteACLs(ctx, filters)
	})
}

// GrantDatabase runs docs/sql/grants.sql as the migrate role (which owns what it migrated),
// over TLS: the run role gets its privileges on eosink's schema and on targetSchema.
func (s Secure) GrantDatabase(t testing.TB, schema, targetSchema string) {
	t.Helper()
	psql := "psql"
	if dir := os.Getenv("EOSINK_PG_BINDIR"); dir != "" {
		psql = filepath.Join(dir, "psql")
	}
	conn := fmt.Sprintf("host=%s port=%s dbname=eosink user=%s sslmode=verify-full sslrootcert=%s", s.PGHost, s.PGPort, s.MigrateUser, s.CA)
	cmd := exec.Command(psql, conn, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "run_role="+s.RunUser,
		"-v", "schema="+schema, "-v", "target_schema="+targetSchema, "-f", filepath.Join(repoRoot(), "docs", "sql", "grants.sql"))
	cmd.Env = append(os.Environ(), "PGPASSWORD="+s.MigratePassword)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docs/sql/grants.sql as %s: %v\n%s", s.MigrateUser, err, out)
	}
}
