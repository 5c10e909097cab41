package test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/inbox"
	"github.com/eosink/eosink/sink/table"
)

// TestSchemaNamesAreIdentifiers: a schema name is one identifier, whatever it holds:
// capitals (`migrate up -schema Sales` used to leave a dirty migration, search_path folding
// Sales to sales), or a comma and a space (`-schema 'nosuch, public'` used to put the tables
// in public). Migrations put every table in exactly the named schema; the inbox plugin's
// schema is treated alike.
func TestSchemaNamesAreIdentifiers(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	db := testbed.Pool(t, e)
	ctx := context.Background()
	for _, prefix := range []string{"Sales", "nosuch, public", `we"ird`} {
		t.Run(prefix, func(t *testing.T) {
			name := prefix + "_" + testbed.Name(t, "s")
			t.Cleanup(func() { _, _ = db.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE") })
			if err := sink.Migrate(ctx, e.DatabaseURL, name); err != nil {
				t.Fatalf("migrate -schema %q: %v", name, err)
			}
			for _, tbl := range []string{"offsets", "offsets_audit", "dead_letters", "instances", "eosink_schema_migrations"} {
				var found string
				err := db.QueryRow(ctx, "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = $1 AND n.nspname = $2",
					tbl, name).Scan(&found)
				if err != nil {
					t.Errorf("table %s not in schema %q: %v", tbl, name, err)
				}
			}
			var version int64
			var dirty bool
			if err := db.QueryRow(ctx, "SELECT version, dirty FROM "+pgx.Identifier{name, "eosink_schema_migrations"}.Sanitize()).Scan(&version, &dirty); err != nil || dirty {
				t.Fatalf("schema %q: version %d dirty %v (%v)", name, version, dirty, err)
			}
			if _, err := db.Exec(ctx, "CREATE TABLE "+pgx.Identifier{name, "orders"}.Sanitize()+" (order_id text PRIMARY KEY)"); err != nil {
				t.Fatal(err)
			}
			inner, err := table.New(table.Config{Table: pgx.Identifier{name, "orders"}.Sanitize(),
				Columns: map[string]table.Column{"order_id": {From: "value.order_id", Required: true}}})
			if err != nil {
				t.Fatal(err)
			}
			ib, err := inbox.New(inbox.Config{EventID: "value.event_id", Subscriber: "test", Schema: name}, inner)
			if err != nil {
				t.Fatal(err)
			}
			if err := sink.MigratePlugin(ctx, e.DatabaseURL, ib, nil); err != nil {
				t.Fatalf("inbox migrations in schema %q: %v", name, err)
			}
			var n int
			if err := db.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{name, "inbox"}.Sanitize()).Scan(&n); err != nil {
				t.Fatalf("inbox table not in schema %q: %v", name, err)
			}
		})
	}
	// Nothing landed in public under another schema's name.
	var stray int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname IN ('nosuch', 'sales')`).Scan(&stray); err != nil || stray != 0 {
		t.Fatalf("schemas named by a mangled search_path exist: %d (%v)", stray, err)
	}
}

// TestInboxSchemaValidated: the inbox refuses a schema name PostgreSQL cannot hold.
func TestInboxSchemaValidated(t *testing.T) {
	inner, err := table.New(table.Config{Table: "public.x", Columns: map[string]table.Column{"a": {From: "value.a"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a\x00b", strings.Repeat("x", 64)} {
		if _, err := inbox.New(inbox.Config{EventID: "value.event_id", Subscriber: "test", Schema: s}, inner); err == nil ||
			!strings.Contains(err.Error(), "schema") {
			t.Errorf("inbox schema %q: got %v, want an error naming schema", s, err)
		}
	}
}
