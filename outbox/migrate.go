package outbox

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/eosink/eosink/internal/migrator"
	"github.com/eosink/eosink/sink"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationsTable is the golang-migrate version table of the outbox's migrations.
const MigrationsTable = "eosink_outbox_schema_migrations"

// Migrations returns the outbox's migration set for schema (DefaultSchema when empty), in the
// form plugins return it (sink.Migrator).
func Migrations(schema string) sink.Migrations {
	if schema == "" {
		schema = DefaultSchema
	}
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err)
	}
	return sink.Migrations{Name: "outbox", FS: sub, Schema: schema, Table: MigrationsTable}
}

// Migrate creates or upgrades the outbox tables in schema (DefaultSchema when empty). It is
// safe to call from several processes at once (golang-migrate holds an advisory lock).
func Migrate(ctx context.Context, databaseURL, schema string) error {
	set := Migrations(schema)
	m, err := migrator.Open(ctx, databaseURL, migrator.Set{FS: set.FS, Schema: set.Schema, Table: set.Table, Name: set.Name})
	if err != nil {
		return fmt.Errorf("outbox: migrate: %w", err)
	}
	defer m.Close()
	if err := m.Up(); err != nil {
		return fmt.Errorf("outbox: migrate up (schema %q): %w", set.Schema, err)
	}
	return nil
}
