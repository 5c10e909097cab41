package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/cli/internal/pipeline"
	"github.com/eosink/eosink/sink"
)

// offsets' subcommands, for their -h.
var offsetsHelp = map[string]help{
	"": {usage: "eosink offsets list|set|reset [flags]",
		desc: "Show or move the stored positions; see eosink offsets list -h and eosink offsets set -h."},
	"list": {usage: "eosink offsets list [-pipeline P] [-json] [-config FILE | -database-url URL -brokers HOSTS -schema S]",
		desc:  "Print stored positions with epochs, owners, last commit, log range, lag and Kafka's committed offset.",
		flags: append([]string{"pipeline"}, opsFlagNames...)},
	"set": {usage: "eosink offsets set -pipeline P [-topic T [-partition N]] -to earliest|latest|OFFSET|TIME -reason TEXT -operator NAME [-accept-new-topic] [-dry-run]",
		desc:  "Move stored positions in one audited transaction, fencing the current owner, which claims again at the new position (reset is the same).",
		flags: append([]string{"pipeline", "topic", "partition", "to", "operator", "reason", "dry-run", "accept-new-topic"}, opsFlagNames...)},
}

func init() { offsetsHelp["reset"] = offsetsHelp["set"] }

// offsetsCmd: eosink offsets list|set|reset.
func offsetsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eosink offsets", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o opsFlags
	o.register(fs)
	pipeline := fs.String("pipeline", "", "pipeline (list: default all; set: required; with -config, default the file's)")
	topic := fs.String("topic", "", "set: only this topic (needed when the pipeline has no rows yet)")
	var partition int
	intVar(fs, &partition, "partition", -1, -1, math.MaxInt32, "a partition number (0 to 2147483647; -1: every partition)", "set: only partition `N` (needs -topic)")
	to := fs.String("to", "", "set: earliest, latest, an offset, or an RFC 3339 time")
	operator := fs.String("operator", "", "set: who makes the change, for the audit table (default: env USER)")
	reason := fs.String("reason", "", "set: why, for the audit table")
	dryRun := fs.Bool("dry-run", false, "set: print the changes without making them")
	acceptNewTopic := fs.Bool("accept-new-topic", false, "set: store the topic's current id (after it was deleted and created again)")
	h := offsetsHelp[""]
	fs.Usage = func() { h.print(fs.Output(), fs) }
	pos, err := parseInterleaved(fs, args, func(sub string) {
		if sh, ok := offsetsHelp[sub]; ok {
			h = sh
		}
	})
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageError{errors.New("offsets: want exactly one of list, set, reset")}
	}
	if _, ok := offsetsHelp[pos[0]]; !ok || pos[0] == "" {
		return usageError{fmt.Errorf("offsets: unknown subcommand %q (want list, set or reset)", pos[0])}
	}
	if err := h.check(fs, "eosink offsets "+pos[0]); err != nil {
		return err
	}
	if err := o.load(fs, stderr, pipeline); err != nil {
		return err
	}
	if *operator == "" {
		*operator = os.Getenv("USER")
	}
	var req setRequest
	if pos[0] != "list" {
		// Checked before connecting, naming the flag that is missing; a dry run checks
		// everything the real run does, so that what it shows can then be run as is.
		r, err := checkSet(*pipeline, *topic, partition, *to, *operator, *reason, *acceptNewTopic)
		if err != nil {
			return err
		}
		req = r
	}
	c, closeFn, err := o.client(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	switch pos[0] {
	case "list":
		ps, err := c.List(ctx, *pipeline)
		if err != nil {
			return err
		}
		if err := printPositions(stdout, ps, o.json, false); err != nil {
			return err
		}
		warnDivergence(stderr, ps)
		return nil
	case "set", "reset":
		sel, target := req.sel, req.target
		if *dryRun {
			changes, err := c.Plan(ctx, sel, target)
			if err != nil {
				return err
			}
			if err := printChanges(stdout, changes, o.json); err != nil {
				return err
			}
			warnReplay(stderr, o.file, changes)
			fmt.Fprintln(stderr, "dry run: nothing changed")
			return nil
		}
		changes, err := c.Reset(ctx, sel, target, *operator, *reason, 5)
		if err != nil {
			return err
		}
		if err := printChanges(stdout, changes, o.json); err != nil {
			return err
		}
		warnReplay(stderr, o.file, changes)
		return nil
	default:
		return usageError{fmt.Errorf("offsets: unknown subcommand %q (want list, set or reset)", pos[0])}
	}
}

// setRequest is what offsets set moves and where to.
type setRequest struct {
	sel    admin.Selector
	target admin.Target
}

// checkSet checks the arguments of offsets set (and reset), with or without -dry-run, before
// anything connects: -pipeline, -to, -reason and -operator are required, -to must parse, and
// -partition needs -topic. partition is -1 for every partition.
func checkSet(pipeline, topic string, partition int, to, operator, reason string, acceptNewTopic bool) (setRequest, error) {
	switch {
	case pipeline == "":
		return setRequest{}, usageError{errors.New("offsets set: -pipeline is required")}
	case to == "":
		return setRequest{}, usageError{errors.New("offsets set: -to is required (earliest, latest, an offset, or an RFC 3339 time)")}
	}
	target, err := admin.ParseTarget(to)
	if err != nil {
		return setRequest{}, usageError{fmt.Errorf("offsets set: -to: %w", err)}
	}
	switch {
	case strings.TrimSpace(reason) == "":
		return setRequest{}, usageError{errors.New("offsets set: -reason is required (it goes to the audit table)")}
	case strings.TrimSpace(operator) == "":
		return setRequest{}, usageError{errors.New("offsets set: -operator is required (it goes to the audit table; USER is not set)")}
	case partition >= 0 && topic == "":
		return setRequest{}, usageError{errors.New("offsets set: -partition needs -topic")}
	}
	sel := admin.Selector{Pipeline: pipeline, Topic: topic, AcceptNewTopic: acceptNewTopic}
	if partition >= 0 {
		p := int32(partition)
		sel.Partition = &p
	}
	return setRequest{sel: sel, target: target}, nil
}

func printChanges(w io.Writer, cs []admin.Change, asJSON bool) error {
	if asJSON {
		return writeJSON(w, cs)
	}
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PIPELINE\tTOPIC\tPARTITION\tFROM\tTO\tLOG")
	for _, c := range cs {
		from := "(no row)"
		if c.From != nil {
			from = fmt.Sprint(*c.From)
		}
		to := fmt.Sprint(c.To)
		if c.TopicID != "" {
			to += " (accepting topic id " + term(c.TopicID) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d..%d\n", term(c.Pipeline), term(c.Topic), c.Partition, from, to, c.LogStart, c.LogEnd)
	}
	return tw.Flush()
}

// warnReplay says, when changes move a position back (a replay), what the pipeline's
// plugin does with the records that come again (sink.ReplayNotes): a replay that is meant
// to repair rows and that the plugin skips would otherwise change nothing, silently. file
// is the -config file's pipeline; without one the plugin is not known, and the warning says
// so.
func warnReplay(w io.Writer, file *pipeline.Pipeline, changes []admin.Change) {
	var records int64
	for _, c := range changes {
		if c.From != nil && c.To < *c.From {
			records += *c.From - c.To
		}
	}
	if records == 0 {
		return
	}
	if file == nil || file.Config.Plugin == nil {
		fmt.Fprintf(w, "replay: %d records go through the pipeline again; pass -config FILE to see what its sink does with them\n", records)
		return
	}
	notes := sink.ReplayNotes(file.Config.Plugin)
	if len(notes) == 0 {
		fmt.Fprintf(w, "replay: %d records go through the pipeline again (sink %s)\n", records, file.PluginType)
		return
	}
	fmt.Fprintf(w, "replay: %d records go through the pipeline again; what sink %s does with them:\n", records, file.PluginType)
	for _, n := range notes {
		fmt.Fprintf(w, "  - %s\n", term(n))
	}
}
