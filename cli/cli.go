// Command eosink operates eosink's database-owned offsets.
//
//	eosink migrate up                apply the framework's migrations (the offsets table)
//	eosink migrate down -yes         revert them: drops every stored position
//	eosink migrate version           print the applied version
//	eosink migrate force VERSION     set the version without migrating (after a failed migration)
//	eosink offsets list              stored positions with their log range and lag
//	eosink offsets set -pipeline P -to earliest|latest|OFFSET|TIME -reason TEXT [-dry-run]
//	eosink lag [-json]               lag per partition
//	eosink status [-json]            one line per pipeline
//
// The database comes from -database-url or DATABASE_URL, the broker from -brokers or
// KAFKA_BOOTSTRAP_SERVERS; the schema from -schema (default "eosink").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/eosink/eosink/internal/migrator"
	"github.com/eosink/eosink/migrations"
)

const usage = `usage: eosink <command> [flags]

commands:
  migrate up|down|version|force VERSION   manage the offsets table's schema
  offsets list                            stored positions, owners, epochs, log range and lag
  offsets set|reset                       move positions (earliest, latest, offset, time); audited
  lag                                     lag per partition (-json for JSON)
  status                                  one line per pipeline: partitions, owners, epochs, last commit, lag

Run 'eosink <command> -h' for flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "migrate":
		err = migrateCmd(ctx, args[1:], stdout, stderr)
	case "offsets":
		err = offsetsCmd(ctx, args[1:], stdout, stderr)
	case "lag":
		err = lagCmd(ctx, args[1:], stdout, stderr)
	case "status":
		err = statusCmd(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "eosink: unknown command %q\n%s", args[0], usage)
		return 2
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "eosink: %v\n", err)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "eosink: %v\n", err)
		return 1
	}
	return 0
}

type usageError struct{ error }

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eosink migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// Defaults come from the environment after parsing, so that -h never prints a password.
	dbURL := fs.String("database-url", "", "PostgreSQL connection string (default: env DATABASE_URL)")
	schema := fs.String("schema", "eosink", "schema of the offsets table")
	yes := fs.Bool("yes", false, "confirm 'down', which drops every stored position")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: eosink migrate [flags] up|down|version|force VERSION")
		fs.PrintDefaults()
	}
	// Flags may come before or after the subcommand.
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return usageError{errors.New("migrate: missing subcommand")}
	}
	sub, rest := rest[0], rest[1:]
	if err := fs.Parse(rest); err != nil {
		return usageError{err}
	}
	rest = fs.Args()
	if *dbURL == "" {
		*dbURL = os.Getenv("DATABASE_URL")
	}
	if *dbURL == "" {
		return usageError{errors.New("migrate: no database: set DATABASE_URL or -database-url")}
	}
	var forceVersion int
	switch sub {
	case "up", "version":
	case "down":
		if !*yes {
			return usageError{errors.New("migrate down drops the offsets table and every stored position; add -yes to confirm")}
		}
	case "force":
		if len(rest) != 1 {
			return usageError{errors.New("migrate force: want exactly one VERSION")}
		}
		v, err := strconv.Atoi(rest[0])
		if err != nil || v < -1 {
			return usageError{fmt.Errorf("migrate force: bad VERSION %q", rest[0])}
		}
		forceVersion = v
		rest = nil
	default:
		return usageError{fmt.Errorf("migrate: unknown subcommand %q (want up, down, version or force)", sub)}
	}
	if len(rest) > 0 {
		return usageError{fmt.Errorf("migrate %s: unexpected arguments %v", sub, rest)}
	}

	m, err := migrator.Open(ctx, *dbURL, migrator.Set{FS: migrations.FS, Schema: *schema, Table: migrations.Table})
	if err != nil {
		return err
	}
	defer m.Close()
	switch sub {
	case "up":
		err = m.Up()
	case "down":
		err = m.Down()
	case "force":
		err = m.Force(forceVersion)
	}
	if err != nil {
		return fmt.Errorf("migrate %s: %w", sub, err)
	}
	v, dirty, ok, err := m.Version()
	if err != nil {
		return err
	}
	latest, _ := migrator.Latest(migrations.FS)
	switch {
	case !ok:
		fmt.Fprintf(stdout, "schema %q: no migrations applied (latest available: %d)\n", *schema, latest)
	case dirty:
		fmt.Fprintf(stdout, "schema %q: version %d (dirty: a migration failed; fix it, then 'eosink migrate force %d')\n", *schema, v, v-1)
	default:
		fmt.Fprintf(stdout, "schema %q: version %d (latest available: %d)\n", *schema, v, latest)
	}
	return nil
}
