package sink

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

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

// MigrateOptions are the options of MigratePlugin. The zero value (or nil) means defaults.
type MigrateOptions struct {
	// Progress, when set, receives a line as each migration finishes.
	Progress io.Writer
	// Done, when set, is called for each of the plugin's migration sets once it is up to
	// date, in the order of Migrator.Migrations, with what ran. Defaults to nil: nothing is
	// reported.
	Done func(MigrateResult)
}

// MigrateResult is what MigratePlugin did to one migration set of a plugin.
type MigrateResult struct {
	Name   string // the set's name (Migrations.Name)
	Schema string // the set's schema
	From   uint   // the set's version before; 0 when none was applied
	To     uint   // the set's version after
	// Applied is how many migrations ran; 0 when the set was up to date already.
	Applied int
}

// MigratePlugin applies the migrations a plugin ships (see Migrator); it does nothing for a
// plugin without any. Like Migrate, it is safe to call from several processes at once. opts
// may be nil.
func MigratePlugin(ctx context.Context, databaseURL string, p Plugin, opts *MigrateOptions) error {
	if opts == nil {
		opts = &MigrateOptions{}
	}
	m, ok := p.(Migrator)
	if !ok {
		return nil
	}
	for _, set := range m.Migrations() {
		if err := migrateSet(ctx, databaseURL, set, opts); err != nil {
			return err
		}
	}
	return nil
}

// migrateSet brings one set up to date and reports it to opts.Done.
func migrateSet(ctx context.Context, databaseURL string, set Migrations, opts *MigrateOptions) error {
	g, err := migrator.Open(ctx, databaseURL, migrator.Set{FS: set.FS, Schema: set.Schema, Table: set.Table, Progress: opts.Progress, Name: set.Name})
	if err != nil {
		return fmt.Errorf("eosink: migrate %s: %w", set.Name, err)
	}
	defer g.Close()
	from, _, _, err := g.Version()
	if err == nil {
		err = g.Up()
	}
	if err != nil {
		return fmt.Errorf("eosink: migrate %s up (schema %q): %w", set.Name, set.Schema, err)
	}
	if opts.Done == nil {
		return nil
	}
	to, _, _, err := g.Version()
	if err != nil {
		return fmt.Errorf("eosink: migrate %s (schema %q): version: %w", set.Name, set.Schema, err)
	}
	n, err := migrator.Between(set.FS, from, to)
	if err != nil {
		return fmt.Errorf("eosink: migrate %s: %w", set.Name, err)
	}
	opts.Done(MigrateResult{Name: set.Name, Schema: set.Schema, From: from, To: to, Applied: n})
	return nil
}

// NotMigratedError is Run's refusal to start on a schema whose migrations (the framework's
// offsets table, or a plugin's tables) were not applied, or not all: apply them with
// Migrate and MigratePlugin (`eosink migrate up`) or set Config.AutoMigrate.
type NotMigratedError struct {
	Name    string // whose migrations: "eosink" (the offsets table) or the plugin's set name
	Schema  string
	Version int64 // the schema's version; 0 when it was never migrated
	Latest  int64 // the version this build needs
}

// Problem says what is wrong, without the remedy: `eosink tables in schema "s" are not
// migrated`, or `... schema "s" is at version 2, this build needs 3`.
func (e *NotMigratedError) Problem() string {
	if e.Version == 0 {
		return fmt.Sprintf("%s tables in schema %q are not migrated", e.Name, e.Schema)
	}
	return fmt.Sprintf("%s schema %q is at version %d, this build needs %d", e.Name, e.Schema, e.Version, e.Latest)
}

// Error is Problem with the remedy in Config's words (the CLI gives its own).
func (e *NotMigratedError) Error() string {
	return "eosink: " + e.Problem() + ": run `eosink migrate up`, call sink.Migrate and sink.MigratePlugin, or set Config.AutoMigrate"
}

// checkSchema refuses a schema that is not at exactly the latest version of set: behind it
// needs `eosink migrate up`; ahead of it was migrated by a newer build than this one.
func checkSchema(ctx context.Context, db DB, name string, set migrator.Set) error {
	latest, err := migrator.Latest(set.FS)
	if err != nil {
		return fmt.Errorf("eosink: %s migrations: %w", name, err)
	}
	var exists bool
	if err := db.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{set.Schema, set.Table}.Sanitize()).Scan(&exists); err != nil {
		return fmt.Errorf("eosink: check %s schema version: %w", name, err)
	}
	if !exists {
		return &NotMigratedError{Name: name, Schema: set.Schema, Latest: int64(latest)}
	}
	var version int64
	var dirty bool
	err = db.QueryRow(ctx, fmt.Sprintf("SELECT version, dirty FROM %s LIMIT 1", pgx.Identifier{set.Schema, set.Table}.Sanitize())).Scan(&version, &dirty)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return &NotMigratedError{Name: name, Schema: set.Schema, Latest: int64(latest)}
	case err != nil:
		return fmt.Errorf("eosink: read %s schema version: %w", name, err)
	case dirty:
		return fmt.Errorf("eosink: %s schema %q is dirty at version %d (a migration failed): fix it, then `eosink migrate force`", name, set.Schema, version)
	case version < int64(latest):
		return &NotMigratedError{Name: name, Schema: set.Schema, Version: version, Latest: int64(latest)}
	case version > int64(latest):
		return fmt.Errorf("eosink: %s schema %q is at version %d, newer than the %d this build knows: upgrade eosink or the plugin", name, set.Schema, version, latest)
	}
	return nil
}

// prepareDatabase migrates (with AutoMigrate), checks every schema version, and lets the
// plugin check the database.
func (s *Sink) prepareDatabase(ctx context.Context, url string) error {
	sets := []struct {
		name string
		set  migrator.Set
	}{{"eosink", migrator.Set{FS: migrations.FS, Schema: s.cfg.Schema, Table: migrations.Table}}}
	if m, ok := s.plugin.(Migrator); ok {
		for _, ms := range m.Migrations() {
			sets = append(sets, struct {
				name string
				set  migrator.Set
			}{ms.Name, migrator.Set{FS: ms.FS, Schema: ms.Schema, Table: ms.Table}})
		}
	}
	if s.cfg.AutoMigrate {
		if err := Migrate(ctx, url, s.cfg.Schema); err != nil {
			return err
		}
		if err := MigratePlugin(ctx, url, s.plugin, nil); err != nil {
			return err
		}
	}
	for _, st := range sets {
		if err := checkSchema(ctx, s.pool, st.name, st.set); err != nil {
			return err
		}
	}
	if p, ok := s.plugin.(Preparer); ok {
		if err := p.Prepare(ctx, s.pool); err != nil {
			return fmt.Errorf("eosink: plugin: %w", err)
		}
	}
	return nil
}
