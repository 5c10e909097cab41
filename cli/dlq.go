package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/cli/internal/pipeline"
)

const dlqUsage = `usage: eosink dlq <command> [flags]

commands:
  list     [-pipeline P] [-topic T] [-partition N] [-limit N] [-all] [-json]   open dead letters, oldest first
                                                                       (-all: resolved ones too, with their state)
  show     -id N [-json]                                                one dead letter with its key, value, headers,
                                                                        edited key and value, state and audit
  edit     -id N (-value-file F | -value S) [-key-file F | -key S] -operator NAME -reason TEXT
                                                                        store a corrected value beside the original
                                                                        (replay applies it), audited
  replay   -config FILE [-id N,...] [-topic T] [-partition N] [-operator NAME] [-reason TEXT]
                                                                        apply open dead letters again through the
                                                                        pipeline's sink; each one is resolved as replayed
                                                                        in the transaction of its write
  discard  -pipeline P (-id N,... | -all) [-topic T] [-partition N] [-operator NAME] [-reason TEXT] -yes
                                                                        resolve open dead letters as discarded

The database comes from -database-url or DATABASE_URL, the schema from -schema (default
"eosink"); or both from a pipeline config file (-config; required for replay), whose pipeline
is then the default -pipeline. A pipeline whose handler is Go code has no config file to
replay through: replay its dead letters with admin.Client.ReplayHandler (docs/operations.md).
Run 'eosink dlq <command> -h' for its flags.
`

// dlq's commands, for their -h.
var dlqHelp = map[string]help{
	"list": {usage: "eosink dlq list [-pipeline P] [-topic T] [-partition N] [-limit N] [-all] [-json] [-config FILE | -database-url URL -schema S]",
		desc:  "List open dead letters, oldest first; with -all, the resolved ones too, with a STATE column (open, applied, replayed, discarded).",
		flags: []string{"database-url", "schema", "config", "json", "pipeline", "topic", "partition", "limit", "all"}},
	"show": {usage: "eosink dlq show -id N [-json] [-config FILE | -database-url URL -schema S]",
		desc:  "Print one dead letter with its key, value, headers and error, its edited key and value, its state and its audit.",
		flags: []string{"database-url", "schema", "config", "json", "id"}},
	"edit": {usage: "eosink dlq edit -id N (-value-file F | -value S) [-key-file F | -key S] -operator NAME -reason TEXT [-config FILE | -database-url URL -schema S]",
		desc:  "Store a corrected value (and key) beside the open dead letter's original, which stays; replay applies the edit. The edit, who made it and why are audited.",
		flags: []string{"database-url", "schema", "config", "json", "id", "value", "value-file", "key", "key-file", "operator", "reason"}},
	"replay": {usage: "eosink dlq replay -config FILE [-id N,...] [-topic T] [-partition N] [-operator NAME] [-reason TEXT] [-dry-run] [-json]",
		desc: "Apply open dead letters again through the pipeline's sink (their edited value when edited), each resolved as replayed and audited " +
			"in the transaction of its write; exit 1 if any failed again.",
		flags: []string{"config", "json", "id", "topic", "partition", "dry-run", "operator", "reason"}},
	"discard": {usage: "eosink dlq discard -pipeline P (-id N,... | -all) [-topic T] [-partition N] [-operator NAME] [-reason TEXT] -yes [-dry-run] [-config FILE | -database-url URL -schema S]",
		desc: "Resolve open dead letters as discarded, audited (without -yes: list what would be discarded). The rows stay: " +
			"the same record failing again reopens its row.",
		flags: []string{"database-url", "schema", "config", "json", "pipeline", "id", "all", "topic", "partition", "yes", "dry-run", "operator", "reason"}},
}

// dlqFlags are the selection flags of the dlq commands.
type dlqFlags struct {
	opsFlags
	pipeline, topic, ids string
	partition            int
	limit                int
	all, yes, dryRun     bool
	operator, reason     string
	listing              bool // the list command: -all selects the resolved dead letters too
	// edit's new value and key: text, or a file to read.
	value, valueFile, key, keyFile string
}

func (d *dlqFlags) filter() (admin.DeadLetterFilter, error) {
	f := admin.DeadLetterFilter{Pipeline: d.pipeline, Topic: d.topic, Limit: d.limit, Resolved: d.all && d.listing}
	if d.partition >= 0 {
		p := int32(d.partition)
		f.Partition = &p
	}
	for _, s := range strings.Split(d.ids, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 1 {
			return f, usageError{fmt.Errorf("-id: %q is not a dead letter id (a whole number from 1 to %d)", s, int64(math.MaxInt64))}
		}
		f.IDs = append(f.IDs, id)
	}
	return f, nil
}

// dbClient is an admin.Client for the database alone.
func dbClient(ctx context.Context, url, schema string) (*admin.Client, func(), error) {
	pool, err := connectDB(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	return admin.New(pool, schema, nil), pool.Close, nil
}

// dlqCmd: eosink dlq list|show|edit|replay|discard.
func dlqCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && wantsHelp(args[:1]) {
		fmt.Fprint(stderr, dlqUsage) // stderr is standard output when help is asked for
		return flag.ErrHelp
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, dlqUsage)
		return usageError{errors.New("dlq: a command is required")}
	}
	sub := args[0]
	h, known := dlqHelp[sub]
	if !known {
		fmt.Fprint(stderr, dlqUsage)
		return usageError{fmt.Errorf("dlq: unknown command %q", sub)}
	}
	fs := flag.NewFlagSet("eosink dlq "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var d dlqFlags
	fs.StringVar(&d.dbURL, "database-url", "", "PostgreSQL connection string (default: env DATABASE_URL)")
	fs.StringVar(&d.schema, "schema", "eosink", "eosink's schema (offsets and dead letters)")
	fs.BoolVar(&d.json, "json", false, "print JSON")
	fs.StringVar(&d.pipeline, "pipeline", "", "pipeline name")
	fs.StringVar(&d.topic, "topic", "", "only this topic")
	intVar(fs, &d.partition, "partition", -1, -1, math.MaxInt32, "a partition number (0 to 2147483647; -1: every partition)", "only partition `N`")
	fs.StringVar(&d.ids, "id", "", "dead letter ids, comma-separated")
	intVar(fs, &d.limit, "limit", 0, 0, math.MaxInt32, "a count (0 to 2147483647; 0: all)", "list: at most `N` dead letters (0: all)")
	fs.BoolVar(&d.all, "all", false, "list: the resolved dead letters too, with their state; discard: every open dead letter of the pipeline (with the other filters)")
	fs.StringVar(&d.operator, "operator", "", "edit (required), replay, discard: who acts, for the audit (default: the database role)")
	fs.StringVar(&d.reason, "reason", "", "edit (required), replay, discard: why, for the audit")
	fs.StringVar(&d.value, "value", "", "edit: the corrected value, as text")
	fs.StringVar(&d.valueFile, "value-file", "", "edit: a file holding the corrected value, as bytes")
	fs.StringVar(&d.key, "key", "", "edit: the corrected key, as text")
	fs.StringVar(&d.keyFile, "key-file", "", "edit: a file holding the corrected key, as bytes")
	fs.BoolVar(&d.yes, "yes", false, "discard: confirm")
	fs.BoolVar(&d.dryRun, "dry-run", false, "replay, discard: list what would be done, change nothing")
	fs.StringVar(&d.config, "config", "", "the pipeline's config file: its database, schema and pipeline (replay: and its sink)")
	fs.Usage = func() { h.print(fs.Output(), fs) }
	if pos, err := parseInterleaved(fs, args[1:], nil); err != nil {
		return err
	} else if len(pos) > 0 {
		return usageError{fmt.Errorf("dlq %s: unexpected arguments %v", sub, pos)}
	}
	if sub == "replay" && (d.dbURL != "" || d.pipeline != "") {
		return usageError{errors.New("dlq replay: the database and pipeline come from -config")}
	}
	if err := h.check(fs, "eosink dlq "+sub); err != nil {
		return err
	}
	d.listing = sub == "list"
	f, err := d.filter()
	if err != nil {
		return err
	}
	if sub == "replay" {
		return dlqReplay(ctx, &d, f, stdout, stderr)
	}
	var edit admin.DeadLetterEdit
	if sub == "edit" {
		if edit, err = editFlags(fs, &d, f); err != nil {
			return err
		}
	}
	url := d.dbURL
	if d.config != "" {
		if err := d.load(fs, stderr, &d.pipeline); err != nil {
			return err
		}
		url, d.schema, f.Pipeline = d.opsFlags.dbURL, d.opsFlags.schema, d.pipeline
	}
	if url == "" {
		url = os.Getenv("DATABASE_URL")
	}
	if url == "" {
		return usageError{errors.New("no database: set DATABASE_URL or -database-url")}
	}
	c, closeDB, err := dbClient(ctx, url, d.schema)
	if err != nil {
		return err
	}
	defer closeDB()
	switch sub {
	case "list":
		list, err := c.DeadLetters(ctx, f)
		if err != nil {
			return err
		}
		return printDeadLetters(stdout, list, d.json, f.Resolved)
	case "show":
		if len(f.IDs) != 1 {
			return usageError{errors.New("dlq show: -id N is required (one id)")}
		}
		dl, err := c.ShowDeadLetter(ctx, f.IDs[0])
		if err != nil {
			return err
		}
		audit, err := c.DeadLetterAudit(ctx, dl.ID)
		if err != nil {
			return err
		}
		return printDeadLetter(stdout, dl, audit, d.json)
	case "edit":
		return dlqEdit(ctx, c, f.IDs[0], edit, d.json, stdout)
	case "discard":
		if d.pipeline == "" {
			return usageError{errors.New("dlq discard: -pipeline is required")}
		}
		if d.limit > 0 {
			return usageError{errors.New("dlq discard: -limit is for list; name dead letters with -id, or -all with -topic and -partition")}
		}
		if len(f.IDs) == 0 && !d.all {
			return usageError{errors.New("dlq discard: name dead letters with -id, or pass -all for every one of the pipeline (with -topic and -partition)")}
		}
		if d.dryRun || !d.yes {
			list, err := c.DeadLetters(ctx, f)
			if err != nil {
				return err
			}
			if err := printDeadLetters(stdout, list, d.json, false); err != nil {
				return err
			}
			if !d.dryRun {
				return usageError{fmt.Errorf("dlq discard: %d dead letters would be discarded; add -yes to confirm", len(list))}
			}
			return nil
		}
		n, err := c.DiscardDeadLetters(ctx, f, admin.Action{Operator: d.operator, Reason: d.reason})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "discarded %d dead letters of pipeline %s\n", n, d.pipeline)
		return nil
	}
	return nil // not reached: sub is one of dlqHelp's
}

// errFailedAgain: a replay left dead letters that failed again; the command exits 1.
var errFailedAgain = errors.New("dlq replay: some dead letters failed again; they stay, with the new error (eosink dlq show -id N)")

// dlqReplay builds the pipeline's plugin from its config file and replays.
func dlqReplay(ctx context.Context, d *dlqFlags, f admin.DeadLetterFilter, stdout, stderr io.Writer) error {
	if d.config == "" {
		return usageError{errors.New("dlq replay: -config is required: the records go back through the pipeline's sink, " +
			"built from its config file; a pipeline whose handler is Go code has none: replay its dead letters from Go with " +
			"admin.Client.ReplayHandler (docs/operations.md, \"Dead letters of a Go handler\")")}
	}
	p, err := pipeline.Load(d.config, pipeline.Options{LogOutput: stderr})
	if err != nil {
		return err
	}
	f.Pipeline = p.Config.Pipeline
	c, closeDB, err := dbClient(ctx, p.Config.DatabaseURL, p.Config.Schema)
	if err != nil {
		return err
	}
	defer closeDB()
	c.SetRedactErrorValues(p.Config.RedactErrorValues)
	if d.dryRun {
		list, err := c.DeadLetters(ctx, f)
		if err != nil {
			return err
		}
		return printDeadLetters(stdout, list, d.json, f.Resolved)
	}
	last := time.Now()
	res, err := c.ReplayWith(ctx, f, p.Config.Plugin, admin.ReplayOptions{Action: admin.Action{Operator: d.operator, Reason: d.reason},
		Progress: func(done, total int, r admin.ReplayResult) {
			if done == total || time.Since(last) >= 2*time.Second {
				last = time.Now()
				fmt.Fprintf(stderr, "replay: %d/%d done, %d applied, %d failed again, %d gone\n", done, total, r.Replayed, r.FailedAgain, r.Gone)
			}
		}})
	if d.json {
		if jerr := writeJSON(stdout, res); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		fmt.Fprintf(stdout, "replayed %d, failed again %d, gone %d\n", res.Replayed, res.FailedAgain, res.Gone)
		if len(res.FailedIDs) > 0 {
			fmt.Fprintf(stdout, "still dead-lettered (see eosink dlq show -id N): %v\n", res.FailedIDs)
		}
	}
	if err == nil && res.FailedAgain > 0 {
		err = errFailedAgain
	}
	return err
}
