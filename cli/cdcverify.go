package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eosink/eosink/cli/internal/pipeline"
	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/sink/cdc"
)

// sourceURLEnv names the environment variable cdc verify takes the source database from when
// -source is not given (a flag shows in ps).
const sourceURLEnv = "EOSINK_CDC_SOURCE_URL"

var cdcVerifyHelp = help{
	usage: "eosink cdc verify -config FILE -source URL [-table SCHEMA.TABLE]... [-chunk N] [-wait D] [-topic-prefix P] [-progress N]",
	desc: "Compare each cdc replica table with its source table, while both run, in chunks of primary keys: print each differing key " +
		"(missing in the replica, extra in the replica, different), then a summary per table; exit 1 on any difference. " +
		"A key that differs is checked again once the replica has applied the source's changes up to the source's LSN at the time of reading, " +
		"so changes in flight are not reported. The replica and the tables' routing (table template, tables overrides, include, exclude) come " +
		"from the pipeline config's cdc sink; the source tables default to the source's publications. The source URL may come from env " + sourceURLEnv + ".",
}

// cdcCmd: eosink cdc SUBCOMMAND.
func cdcCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if wantsHelp(args) {
			fmt.Fprintf(stdout, "usage: eosink cdc verify [flags]\n\n%s\n\nRun 'eosink cdc verify -h' for flags.\n", cdcVerifyHelp.desc)
			return flag.ErrHelp
		}
		return usageError{errors.New("cdc: want a subcommand: verify")}
	}
	switch args[0] {
	case "verify":
		return cdcVerifyCmd(ctx, args[1:], stdout, stderr)
	default:
		return usageError{fmt.Errorf("cdc: unknown subcommand %q (want verify)", args[0])}
	}
}

// tableList is a repeatable -table flag; each value may also be a comma-separated list.
type tableList []string

func (l *tableList) String() string { return strings.Join(*l, ",") }

func (l *tableList) Set(s string) error {
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			*l = append(*l, t)
		}
	}
	return nil
}

func cdcVerifyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eosink cdc verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "pipeline config file of the cdc sink: the replica database and the routing")
	source := fs.String("source", "", "source PostgreSQL connection string (default: env "+sourceURLEnv+"); shows in ps: prefer the env")
	var tables tableList
	fs.Var(&tables, "table", "source table schema.table to check; repeatable (default: the tables of the source's publications and the config's tables section)")
	chunk := fs.Int("chunk", cdc.DefaultVerifyChunkSize, "keys per chunk")
	wait := fs.Duration("wait", cdc.DefaultVerifyWait, "how long a differing key waits for the replica to catch up before it is reported")
	prefix := fs.String("topic-prefix", "", "Debezium's topic.prefix, when the table template uses ${topic}")
	every := fs.Int("progress", 100, "print a progress line on stderr every N chunks of a table (0: never)")
	fs.Usage = func() { cdcVerifyHelp.print(fs.Output(), fs) }
	pos, err := parseInterleaved(fs, args, nil)
	if err != nil {
		return parseError(err)
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("cdc verify: unexpected arguments %v", pos)}
	}
	if *config == "" {
		return usageError{errors.New("cdc verify: -config FILE is required (the cdc pipeline's config)")}
	}
	if *source == "" {
		*source = os.Getenv(sourceURLEnv)
	}
	if *source == "" {
		return usageError{errors.New("cdc verify: no source database: set -source or env " + sourceURLEnv)}
	}
	if *chunk <= 0 || *wait <= 0 || *every < 0 {
		return usageError{errors.New("cdc verify: -chunk and -wait must be positive, -progress at least 0")}
	}
	p, err := pipeline.Load(*config, pipeline.Options{LogOutput: stderr})
	if err != nil {
		return err
	}
	plugin, ok := p.Config.Plugin.(*cdc.CDC)
	if !ok {
		return usageError{fmt.Errorf("cdc verify: %s: the sink is %q, not cdc", *config, p.PluginType)}
	}
	replicaURL := p.Config.DatabaseURL
	if replicaURL == "" {
		replicaURL = os.Getenv("DATABASE_URL")
	}
	replica, err := connectDB(ctx, replicaURL)
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	defer replica.Close()
	src, err := connectDB(ctx, *source)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer src.Close()
	o := cdc.VerifyOptions{Tables: tables, ChunkSize: *chunk, Wait: *wait, TopicPrefix: *prefix, ProgressEvery: *every}
	if *every > 0 {
		start := time.Now()
		o.Progress = func(table string, chunks, rows int64) {
			fmt.Fprintf(stderr, "cdc verify: %s: %d chunks, %d source rows (%s)\n", term(table), chunks, rows, time.Since(start).Round(time.Millisecond))
		}
	}
	rep, err := plugin.Verify(ctx, src, replica, o)
	if rep != nil {
		printVerify(stdout, rep)
	}
	if err != nil {
		return pgerr.RedactError(pgerr.RedactError(err, *source), replicaURL)
	}
	if n := rep.Count(); n > 0 {
		return fmt.Errorf("cdc verify: %d difference(s)", n)
	}
	return nil
}

// printVerify prints each difference, then one line per table and a total.
func printVerify(w io.Writer, rep *cdc.VerifyReport) {
	cols := map[string][]string{}
	for _, t := range rep.Tables {
		cols[t.Table] = t.KeyColumns
	}
	for _, d := range rep.Differences {
		note := ""
		if d.Unsettled {
			note = " (the replica did not reach the source's position within -wait: it may be behind)"
		}
		fmt.Fprintf(w, "%-9s %s key (%s)=(%s)%s\n", d.Kind, term(d.Target), term(strings.Join(cols[d.Table], ", ")), term(strings.Join(d.Key, ", ")), note)
	}
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tREPLICA\tSOURCE ROWS\tREPLICA ROWS\tMISSING\tEXTRA\tDIFFERENT\tIN FLIGHT\tSTATUS")
	var rows int64
	for _, t := range rep.Tables {
		status := "equal"
		if t.Err != nil {
			status = "error: " + term(t.Err.Error())
		} else if t.Differences() > 0 {
			status = "differs"
		}
		rows += t.SourceRows
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", term(t.Table), term(t.Target), t.SourceRows, t.ReplicaRows, t.Missing, t.Extra, t.Different, t.Rechecked, status)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "cdc verify: %d tables, %d source rows, %d differences\n", len(rep.Tables), rows, rep.Count())
}
