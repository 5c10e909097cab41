// Package cli is the eosink command: running a pipeline from a config file and operating
// eosink's database-owned offsets.
//
//	eosink run -config FILE [-validate] [-progress D]   run a pipeline until SIGTERM or SIGINT, then drain
//	eosink migrate up [-config FILE]      apply the framework's migrations (the offsets table),
//	                                      and with -config the sink plugin's own
//	eosink migrate down -yes              revert them: drops every stored position
//	eosink migrate version                print the applied version
//	eosink migrate force VERSION          set the version without migrating (after a failed migration)
//	eosink offsets list                   stored positions with their log range and lag
//	eosink offsets set -pipeline P -to earliest|latest|OFFSET|TIME -reason TEXT -operator NAME [-dry-run]
//	eosink lag [-json]                    lag per partition
//	eosink status [-json]                 one line per pipeline
//	eosink dlq list|show|edit|replay|discard   dead letters (see eosink dlq -h)
//	eosink console -config FILE           the management API and the web console (docs/console.md)
//	eosink relay -config FILE [-migrate|-validate]  the transactional outbox to Kafka, exactly once
//	eosink cdc verify -config FILE -source URL [-table T]  compare cdc replicas with their source
//	eosink produce -topic T [-key-field F | -tab-key] [-create-topic [-partitions N]]  JSON lines to records
//	eosink version                        module version, commit, Go and librdkafka versions
//
// Every command prints its help with -h or --help (to standard output, exit 0).
//
// The operator commands take the database from -database-url or DATABASE_URL, the broker from
// -brokers or KAFKA_BOOTSTRAP_SERVERS, and the schema from -schema (default "eosink"); or all
// three, with the broker connection's properties, from a pipeline config file (-config). Kafka
// properties also come from EOSINK_KAFKA_* environment variables and -kafka key=value. The
// pipeline config file is described in docs/pipeline-config.md.
//
// # Custom binaries
//
// Plugins are compiled in: a plugin package registers itself with sink/plugin.Register from
// an init function. To run a pipeline with a plugin of your own, build an eosink binary that
// imports it for that side effect:
//
//	package main
//
//	import (
//		"os"
//
//		_ "example.com/mysink" // registers its plugin type
//		"github.com/eosink/eosink/cli"
//	)
//
//	func main() { os.Exit(cli.Main()) }
//
// The built-in plugins (table, upsert, sql, inbox, multi, cdc, outbox) are always included.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eosink/eosink/cli/internal/pipeline"
	"github.com/eosink/eosink/internal/migrator"
	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/migrations"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/multi"
)

const usage = `usage: eosink <command> [flags]

commands:
  run -config FILE [-validate]            run the pipeline a config file describes (-validate: check it and exit)
  migrate up|down|version|force VERSION   manage the offsets table's schema (-config FILE: also the plugin's)
  offsets list                            stored positions, owners, epochs, log range and lag
  offsets set|reset                       move positions (earliest, latest, offset, time); audited
  lag                                     lag per partition (-json for JSON)
  status                                  one line per pipeline: partitions, owners (alive or gone), epochs, last commit, lag, stopped partitions (reason, remedy), dead letters
  dlq list|show|edit|replay|discard       dead letters: inspect, correct, apply again through the sink, or discard
  console -config FILE                    serve the management API and the web console on the file's console section (docs/console.md)
  relay -config FILE [-migrate|-validate] publish the transactional outbox to Kafka exactly once (docs/outbox.md)
  cdc verify -config FILE -source URL     compare cdc replica tables with their source while both run; exit 1 on differences
  produce -topic T [-create-topic]        produce JSON lines from standard input (or -file) as records, to try a pipeline
  version                                 module version, commit, Go version, librdkafka version

Run 'eosink <command> -h' for flags.
`

// Main runs the command named by os.Args with os.Stdout and os.Stderr, and returns the exit
// code: 0 on success, 1 on an error, 2 on a usage error. SIGINT or SIGTERM cancels the
// command; a running pipeline then drains (its in-flight batches commit) and Main returns 0.
// A second signal ends the process at once, which is safe: the stored offsets only move with
// the rows they cover.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // restore the default action, so that a second signal ends the process
	}()
	return Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
}

// Run runs the command in args (without the program name), writing to stdout and stderr, and
// returns the exit code like Main. Cancelling ctx stops the command; a running pipeline drains
// and Run returns 0.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "help" && len(args) > 1 { // eosink help offsets set: eosink offsets set -h
		args = append(slices.Clone(args[1:]), "-h")
	}
	// Asked for, help is the output: it goes to standard output, and the exit code is 0.
	flagOut := stderr
	if wantsHelp(args[1:]) {
		flagOut = stdout
	}
	var err error
	switch args[0] {
	case "run":
		err = runCmd(ctx, args[1:], stdout, flagOut)
	case "migrate":
		err = migrateCmd(ctx, args[1:], stdout, flagOut)
	case "offsets":
		err = offsetsCmd(ctx, args[1:], stdout, flagOut)
	case "lag":
		err = lagCmd(ctx, args[1:], stdout, flagOut)
	case "status":
		err = statusCmd(ctx, args[1:], stdout, flagOut)
	case "dlq":
		err = dlqCmd(ctx, args[1:], stdout, flagOut)
	case "relay":
		err = relayCmd(ctx, args[1:], stdout, flagOut)
	case "console":
		err = consoleCmd(ctx, args[1:], stdout, flagOut)
	case "cdc":
		err = cdcCmd(ctx, args[1:], stdout, flagOut)
	case "produce":
		err = produceCmd(ctx, args[1:], stdout, flagOut)
	case "version":
		err = versionCmd(args[1:], stdout, flagOut)
	case "-h", "-help", "--h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "eosink: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if isHelp(err) {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		printError(stderr, err)
		return 2
	}
	if err != nil {
		printError(stderr, err)
		if hint := notMigratedHint(err, args[1:]); hint != "" {
			fmt.Fprintf(stderr, "eosink: %s\n", hint)
		}
		return 1
	}
	return 0
}

// notMigratedHint returns the remedy when an operator command found no offsets or
// dead_letters table (SQLSTATE 42P01 naming one): the schema was never migrated. It names
// the command's own -config file when it has one.
func notMigratedHint(err error, args []string) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42P01" ||
		!(strings.HasSuffix(pe.Message, `.offsets" does not exist`) || strings.HasSuffix(pe.Message, `.dead_letters" does not exist`)) {
		return ""
	}
	cmd := "eosink migrate up -database-url URL -schema SCHEMA"
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			continue
		}
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		cmd = "eosink migrate up -config " + value
	}
	return "the schema is not migrated: run `" + cmd + "`, or run the pipeline once with database.auto_migrate: true"
}

// printError prints err with every line prefixed, so that each of a config file's errors
// stands on its own line.
func printError(w io.Writer, err error) {
	for _, line := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		fmt.Fprintf(w, "eosink: %s\n", line)
	}
}

type usageError struct{ error }

// parseError is a flag set's Parse error: a request for help as is, anything else a usage
// error.
func parseError(err error) error {
	if err == nil || isHelp(err) {
		return err
	}
	return usageError{err}
}

// migrate's subcommands, for their -h.
var migrateHelp = map[string]help{
	"": {usage: "eosink migrate up|down|version|force VERSION [-config FILE | -database-url URL -schema S] [-yes]",
		desc: "Manage the schema of eosink's tables (offsets, audit, dead letters); see eosink migrate SUBCOMMAND -h."},
	"up": {usage: "eosink migrate up [-config FILE | -database-url URL -schema S]",
		desc:  "Create or upgrade eosink's tables; with -config, then the sink plugin's own.",
		flags: []string{"database-url", "schema", "config"}},
	"down": {usage: "eosink migrate down -yes [-config FILE | -database-url URL -schema S]",
		desc:  "Revert every migration of eosink's tables: drops every stored position.",
		flags: []string{"database-url", "schema", "config", "yes"}},
	"version": {usage: "eosink migrate version [-config FILE | -database-url URL -schema S]",
		desc:  "Print the applied migration version of eosink's tables.",
		flags: []string{"database-url", "schema", "config"}},
	"force": {usage: "eosink migrate force VERSION [-config FILE | -database-url URL -schema S]",
		desc:  "Record VERSION as applied without migrating, after a failed migration was fixed by hand.",
		flags: []string{"database-url", "schema", "config"}},
}

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eosink migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// Defaults come from the environment after parsing, so that -h never prints a password.
	dbURL := fs.String("database-url", "", "PostgreSQL connection string (default: env DATABASE_URL)")
	schema := fs.String("schema", "eosink", "schema of the offsets table")
	config := fs.String("config", "", "pipeline config file: its database.url and database.schema; 'up' also applies its sink plugin's migrations")
	yes := fs.Bool("yes", false, "confirm 'down', which drops every stored position")
	h := migrateHelp[""]
	fs.Usage = func() { h.print(fs.Output(), fs) }
	// Flags may come before or after the subcommand.
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return usageError{errors.New("migrate: missing subcommand")}
	}
	sub, rest := rest[0], rest[1:]
	if sh, ok := migrateHelp[sub]; ok && sub != "" {
		h = sh
	}
	if err := fs.Parse(rest); err != nil {
		return parseError(err)
	}
	rest = fs.Args()
	if _, known := migrateHelp[sub]; known && sub != "" {
		if err := h.check(fs, "eosink migrate "+sub); err != nil {
			return err // an unknown subcommand is reported below
		}
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
		latest, _ := migrator.Latest(migrations.FS)
		v, err := strconv.Atoi(rest[0])
		if err != nil || v < -1 || v > int(latest) {
			return usageError{fmt.Errorf("migrate force: VERSION %q is not -1 (none applied) or a migration of eosink's (1 to %d)", rest[0], latest)}
		}
		forceVersion = v
		rest = nil
	default:
		return usageError{fmt.Errorf("migrate: unknown subcommand %q (want up, down, version or force)", sub)}
	}
	if len(rest) > 0 {
		return usageError{fmt.Errorf("migrate %s: unexpected arguments %v", sub, rest)}
	}
	var plugin *pipeline.Pipeline
	if *config != "" {
		var conflict []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "database-url" || f.Name == "schema" {
				conflict = append(conflict, "-"+f.Name)
			}
		})
		if len(conflict) > 0 {
			return usageError{fmt.Errorf("migrate: -config names the database and schema; drop %s", strings.Join(conflict, " and "))}
		}
		p, err := pipeline.Load(*config, pipeline.Options{LogOutput: stderr})
		if err != nil {
			return err
		}
		*dbURL, *schema, plugin = p.Config.DatabaseURL, p.Config.Schema, p
	}
	if *dbURL == "" {
		*dbURL = os.Getenv("DATABASE_URL")
	}
	if *dbURL == "" {
		return usageError{errors.New("migrate: no database: set DATABASE_URL or -database-url")}
	}

	err := migrate(ctx, sub, *dbURL, *schema, forceVersion, plugin, stdout, stderr)
	// Its errors never show a password of the connection string, in any of libpq's forms.
	return pgerr.RedactError(err, *dbURL)
}

// migrate runs migrateCmd's subcommand sub on the database at dbURL.
func migrate(ctx context.Context, sub, dbURL, schema string, forceVersion int, plugin *pipeline.Pipeline, stdout, stderr io.Writer) error {
	m, err := migrator.Open(ctx, dbURL, migrator.Set{FS: migrations.FS, Schema: schema, Table: migrations.Table, Progress: stderr, Name: "eosink"})
	if err != nil {
		return err
	}
	defer m.Close()
	before, _, _, err := m.Version()
	if err != nil {
		return err
	}
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
		fmt.Fprintf(stdout, "schema %q: no migrations applied (latest available: %d)\n", schema, latest)
	case dirty:
		fmt.Fprintf(stdout, "schema %q: version %d (dirty: a migration failed; fix it, then 'eosink migrate force %d')\n", schema, v, v-1)
	case sub == "up":
		ran, _ := migrator.Between(migrations.FS, before, v)
		done := "already up to date"
		if ran > 0 {
			done = fmt.Sprintf("%d migration(s) applied", ran)
		}
		fmt.Fprintf(stdout, "schema %q: version %d (latest available: %d), %s\n", schema, v, latest, done)
	default:
		fmt.Fprintf(stdout, "schema %q: version %d (latest available: %d)\n", schema, v, latest)
	}
	if plugin != nil && sub == "up" {
		return migratePlugin(ctx, dbURL, plugin.Config.Plugin, fmt.Sprintf("sink plugin %q", plugin.PluginType), plugin.SinkEntryTypes(), stdout, stderr)
	}
	return nil
}

// migratePlugin applies p's migrations and prints, after label, what ran: per migration set
// its name, schema, how many migrations were applied and the versions, or that it was up to
// date; or that p has no migrations. The multi plugin's sinks are reported one by one
// ("sinks[1] (inbox): "), their types in entryTypes; a set two of them share is migrated by
// the first and up to date for the next.
func migratePlugin(ctx context.Context, dbURL string, p sink.Plugin, label string, entryTypes []string, stdout, stderr io.Writer) error {
	if m, ok := p.(*multi.Multi); ok {
		for i, inner := range m.Sinks() {
			entry := fmt.Sprintf("sinks[%d]", i)
			if i < len(entryTypes) {
				entry += " (" + entryTypes[i] + ")"
			}
			if err := migratePlugin(ctx, dbURL, inner, label+": "+entry, nil, stdout, stderr); err != nil {
				return err
			}
		}
		return nil
	}
	if m, ok := p.(sink.Migrator); !ok || len(m.Migrations()) == 0 {
		fmt.Fprintf(stdout, "%s: no migrations of its own\n", label)
		return nil
	}
	return sink.MigratePlugin(ctx, dbURL, p, &sink.MigrateOptions{Progress: stderr, Done: func(r sink.MigrateResult) {
		if r.Applied == 0 {
			fmt.Fprintf(stdout, "%s: %s migrations in schema %q: already up to date (version %d)\n", label, r.Name, r.Schema, r.To)
			return
		}
		fmt.Fprintf(stdout, "%s: %s migrations in schema %q: %d applied (version %d -> %d)\n", label, r.Name, r.Schema, r.Applied, r.From, r.To)
	}})
}

// writeJSON writes v to w as indented JSON, the -json output of the commands.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
