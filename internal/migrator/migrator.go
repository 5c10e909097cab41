// Package migrator applies an embedded set of golang-migrate migrations to one PostgreSQL
// schema. The framework's offsets table, the examples and sink plugins all use it.
package migrator

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/eosink/eosink/internal/names"
)

// Set names one migration set.
type Set struct {
	FS     fs.FS  // NNNN_name.up.sql / .down.sql at its root
	Schema string // created if missing; migrations run with search_path set to it
	Table  string // golang-migrate's version table inside Schema
	// Progress, when set, receives a line per migration as it finishes, for long runs.
	Progress io.Writer
	// Name prefixes the progress lines with the schema, for example "eosink" or a plugin's
	// name: `migrate eosink (schema "sales"): ...`.
	Name string
}

// progress is golang-migrate's Logger writing to a Set's Progress.
type progress struct {
	w            io.Writer
	name, schema string
}

func (p progress) Printf(format string, v ...any) {
	fmt.Fprintf(p.w, "migrate %s (schema %q): %s", p.name, p.schema, fmt.Sprintf(format, v...))
}

func (p progress) Verbose() bool { return false }

// Migrator runs migrations of one Set. Close it when done.
type Migrator struct {
	m  *migrate.Migrate
	db *sql.DB
}

// Open connects to databaseURL, creates the schema if needed, and prepares golang-migrate.
// golang-migrate's pgx5 driver takes an advisory lock while it migrates, so concurrent
// callers (several sink processes starting at once) are serialized.
func Open(ctx context.Context, databaseURL string, set Set) (*Migrator, error) {
	if err := CheckSchemaName(set.Schema); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err) // pgx masks the password in this error
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	// search_path is a list of identifiers: the schema goes in quoted, as one name, so that
	// capitals are kept ("Sales", not sales) and a comma cannot add another schema.
	cfg.RuntimeParams["search_path"] = pgx.Identifier{set.Schema}.Sanitize()
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "eosink-migrate"
	}
	db := stdlib.OpenDB(*cfg)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("cannot connect to PostgreSQL at %s:%d/%s: %w", cfg.Host, cfg.Port, cfg.Database, err)
	}
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{set.Schema}.Sanitize()); err != nil {
		// Another process may create it concurrently; only fail if it is still missing.
		var exists bool
		if qerr := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", set.Schema).Scan(&exists); qerr != nil || !exists {
			_ = db.Close()
			return nil, fmt.Errorf("create schema %q: %w", set.Schema, err)
		}
	}
	drv, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{MigrationsTable: set.Table, SchemaName: set.Schema})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("migration driver: %w", err)
	}
	src, err := iofs.New(set.FS, ".")
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("migration source: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if set.Progress != nil {
		m.Log = progress{set.Progress, set.Name, set.Schema}
	}
	return &Migrator{m: m, db: db}, nil
}

// CheckSchemaName refuses a schema name PostgreSQL cannot hold as it is: empty, with a NUL
// byte, or longer than 63 bytes (the server would cut it). Any other text is a valid name
// once quoted, as eosink always quotes it.
func CheckSchemaName(name string) error {
	switch {
	case name == "":
		return errors.New("schema: empty name")
	case names.Check(name) != "":
		return fmt.Errorf("schema %q: %s", name, names.Check(name))
	case len(name) > 63:
		return fmt.Errorf("schema %q: longer than PostgreSQL's 63 bytes", name)
	}
	return nil
}

// Up applies all pending migrations. No change is not an error.
func (g *Migrator) Up() error { return noChange(g.m.Up()) }

// Down reverts all migrations.
func (g *Migrator) Down() error { return noChange(g.m.Down()) }

// Force sets the version without running migrations, clearing the dirty flag.
func (g *Migrator) Force(version int) error { return g.m.Force(version) }

// Version returns the applied version; ok is false when none is applied.
func (g *Migrator) Version() (version uint, dirty bool, ok bool, err error) {
	v, d, err := g.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, false, nil
	}
	if err != nil {
		return 0, false, false, err
	}
	return v, d, true, nil
}

// Latest returns the highest version in the set's files.
func Latest(fsys fs.FS) (uint, error) {
	vs, err := versions(fsys)
	if err != nil {
		return 0, err
	}
	return vs[len(vs)-1], nil
}

// Between returns how many of the set's migrations have a version above from and at most
// to: how many an Up from version from to version to ran.
func Between(fsys fs.FS, from, to uint) (int, error) {
	vs, err := versions(fsys)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range vs {
		if v > from && v <= to {
			n++
		}
	}
	return n, nil
}

// versions returns the versions of the set's files in order; there is at least one.
func versions(fsys fs.FS) ([]uint, error) {
	src, err := iofs.New(fsys, ".")
	if err != nil {
		return nil, err
	}
	defer src.Close()
	v, err := src.First()
	if err != nil {
		return nil, err
	}
	vs := []uint{v}
	for {
		next, err := src.Next(v)
		if err != nil {
			return vs, nil
		}
		vs = append(vs, next)
		v = next
	}
}

// Close releases the connection.
func (g *Migrator) Close() error {
	srcErr, dbErr := g.m.Close()
	return errors.Join(srcErr, dbErr)
}

func noChange(err error) error {
	if errors.Is(err, migrate.ErrNoChange) {
		return nil
	}
	return err
}
