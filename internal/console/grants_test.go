package console_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/console"
	"github.com/eosink/eosink/internal/testbed"
)

// consoleRole creates a login role (no superuser, no BYPASSRLS), dropped when the test ends,
// and gives it docs/sql/console_grants.sql's privileges on schema.
func consoleRole(t *testing.T, b *bed, mutations bool) string {
	t.Helper()
	name := testbed.Name(t, "c")
	if len(name) > 63 {
		name = name[len(name)-63:]
	}
	b.exec(t, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN NOSUPERUSER NOBYPASSRLS")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, b.e.DatabaseURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name)
		_, _ = conn.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{name}.Sanitize())
		_, _ = conn.Exec(ctx, "DROP ROLE "+pgx.Identifier{name}.Sanitize())
	})
	psql := "psql"
	if dir := os.Getenv("EOSINK_PG_BINDIR"); dir != "" {
		psql = filepath.Join(dir, "psql")
	}
	args := []string{b.e.DatabaseURL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "console_role=" + name, "-v", "schema=" + b.schema}
	if mutations {
		args = append(args, "-v", "mutations=true")
	}
	out, err := exec.Command(psql, append(args, "-f", filepath.Join("..", "..", "docs", "sql", "console_grants.sql"))...).CombinedOutput()
	if err != nil {
		t.Fatalf("docs/sql/console_grants.sql: %v\n%s", err, out)
	}
	return name
}

// rolePool is a pool logging in as role.
func rolePool(t *testing.T, b *bed, role string) *pgxpool.Pool {
	t.Helper()
	u, err := url.Parse(b.e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	p, err := pgxpool.New(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestConsoleRoleGrants: a role with docs/sql/console_grants.sql's privileges only serves
// every read endpoint and, with mutations, an audited move and a discard; it holds no DELETE
// at all, and without mutations no write privilege at all.
func TestConsoleRoleGrants(t *testing.T) {
	var role string
	b := newBed(t, func(b *bed, c *console.Config) {
		role = consoleRole(t, b, true)
		c.Admin = admin.New(rolePool(t, b, role), b.schema, kafka.ConfigMap{"bootstrap.servers": b.e.Brokers})
	})
	for _, path := range []string{"/api/v1/pipelines", "/api/v1/pipelines/pipe", "/api/v1/pipelines/pipe/dead-letters",
		fmt.Sprintf("/api/v1/dead-letters/%d", b.dead[0]), "/api/v1/audit"} {
		b.must(t, 200, "GET", path, "")
	}
	var mr console.MoveResult
	b.must(t, 200, "POST", "/api/v1/pipelines/pipe/offsets", `{"to": "earliest", "reason": "as the console role"}`).decode(t, &mr)
	var dbUser, op string
	if err := b.db.QueryRow(context.Background(), "SELECT db_user, operator FROM "+pgx.Identifier{b.schema, "offsets_audit"}.Sanitize()+
		" WHERE reason = 'as the console role'").Scan(&dbUser, &op); err != nil || dbUser != role || op != alice {
		t.Fatalf("audit of the move: db_user %q operator %q (%v), want %q and %q", dbUser, op, err, role, alice)
	}
	b.must(t, 200, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", b.dead[3]), "")
	mutRole := role

	readOnly := newBed(t, func(b *bed, c *console.Config) { role = consoleRole(t, b, false) })
	// Without mutations only SELECT; with them writes only where a mutation needs them, and
	// no DELETE.
	for _, c := range []struct {
		b    *bed
		role string
		want map[string]string
	}{
		{readOnly, role, map[string]string{}},
		{b, mutRole, map[string]string{"offsets": "INSERT UPDATE", "dead_letters": "UPDATE", "dead_letters_audit": "INSERT"}},
	} {
		for _, tbl := range []string{"offsets", "instances", "leases", "offsets_audit", "dead_letters", "dead_letters_audit", "eosink_schema_migrations"} {
			for _, priv := range []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE"} {
				var has bool
				if err := c.b.db.QueryRow(context.Background(), "SELECT has_table_privilege($1, $2, $3)", c.role, c.b.schema+"."+tbl, priv).Scan(&has); err != nil {
					t.Fatal(err)
				}
				if want := priv == "SELECT" || slices.Contains(strings.Fields(c.want[tbl]), priv); has != want {
					t.Errorf("console role %s: %s on %s is %v, want %v", c.role, priv, tbl, has, want)
				}
			}
		}
	}
	// The read-only role cannot move a position, whatever a console running as it asked.
	tx, err := readOnly.db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(context.Background(), "SET LOCAL ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), "UPDATE "+pgx.Identifier{readOnly.schema, "offsets"}.Sanitize()+" SET epoch = epoch + 1"); err == nil ||
		!strings.Contains(err.Error(), "permission denied") {
		t.Errorf("UPDATE as the read-only console role: %v, want permission denied", err)
	}
}
