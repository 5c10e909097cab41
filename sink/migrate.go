package sink

import (
	"context"
	"fmt"

	"github.com/eosink/eosink/internal/migrator"
	"github.com/eosink/eosink/migrations"
)

// Migrate applies the framework's migrations (the offsets table) to schema, creating the
// schema if needed. It is safe to call from several processes at once: golang-migrate holds
// an advisory lock while it runs.
func Migrate(ctx context.Context, databaseURL, schema string) error {
	if schema == "" {
		schema = "eosink"
	}
	m, err := migrator.Open(ctx, databaseURL, migrator.Set{FS: migrations.FS, Schema: schema, Table: migrations.Table})
	if err != nil {
		return fmt.Errorf("eosink: migrate: %w", err)
	}
	defer m.Close()
	if err := m.Up(); err != nil {
		return fmt.Errorf("eosink: migrate up (schema %q): %w", schema, err)
	}
	return nil
}

// MigratePlugin applies the migrations a plugin ships (see Migrator); it does nothing for a
// plugin without any. Like Migrate, it is safe to call from several processes at once.
func MigratePlugin(ctx context.Context, databaseURL string, p Plugin) error {
	m, ok := p.(Migrator)
	if !ok {
		return nil
	}
	for _, set := range m.Migrations() {
		g, err := migrator.Open(ctx, databaseURL, migrator.Set{FS: set.FS, Schema: set.Schema, Table: set.Table})
		if err != nil {
			return fmt.Errorf("eosink: migrate %s: %w", set.Name, err)
		}
		err = g.Up()
		_ = g.Close()
		if err != nil {
			return fmt.Errorf("eosink: migrate %s up (schema %q): %w", set.Name, set.Schema, err)
		}
	}
	return nil
}
