package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eosink/eosink/admin"
)

// listPositions parses the flags shared by lag and status and lists the positions.
func listPositions(ctx context.Context, name string, args []string, stderr io.Writer) ([]admin.Position, bool, error) {
	ps, _, asJSON, err := listPositionsAndDead(ctx, name, args, stderr, false, nil)
	return ps, asJSON, err
}

// listPositionsAndDead is listPositions, with the dead letters per pipeline when withDead.
// With ob non-nil (status), the schema's outbox status is read too (nil when it has none).
func listPositionsAndDead(ctx context.Context, name string, args []string, stderr io.Writer, withDead bool, ob **admin.OutboxStatus, leases ...*[]admin.Lease) ([]admin.Position, map[string]int64, bool, error) {
	fs := flag.NewFlagSet("eosink "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o opsFlags
	o.register(fs)
	pipeline := fs.String("pipeline", "", "pipeline (default: all; with -config, the file's)")
	h := lagHelp[name]
	fs.Usage = func() { h.print(fs.Output(), fs) }
	if pos, err := parseInterleaved(fs, args, nil); err != nil {
		return nil, nil, false, err
	} else if len(pos) > 0 {
		return nil, nil, false, usageError{fmt.Errorf("%s: unexpected arguments %v (use -pipeline)", name, pos)}
	}
	if err := o.load(fs, stderr, pipeline); err != nil {
		return nil, nil, false, err
	}
	c, closeFn, err := o.client(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	defer closeFn()
	c.SetGroupSettings(o.groupSettings())
	if ob != nil {
		if *ob, err = c.Outbox(ctx); err != nil {
			return nil, nil, o.json, err
		}
	}
	for _, l := range leases {
		if *l, err = c.Leases(ctx, *pipeline); err != nil {
			return nil, nil, o.json, err
		}
	}
	ps, err := c.List(ctx, *pipeline)
	var pe *pgconn.PgError
	if err != nil && ob != nil && *ob != nil && errors.As(err, &pe) && pe.Code == "42P01" {
		return nil, nil, o.json, nil // a schema with an outbox and its relay, but no pipeline
	}
	if err != nil || !withDead {
		return ps, nil, o.json, err
	}
	dead, err := c.CountDeadLetters(ctx)
	return ps, dead, o.json, err
}

var lagHelp = map[string]help{
	"lag": {usage: "eosink lag [-pipeline P] [-json] [-config FILE | -database-url URL -brokers HOSTS -schema S]",
		desc: "Print the lag of every stored position: the log end minus the stored next offset, and in seconds the age of the oldest record not yet applied (its Kafka timestamp)."},
	"status": {usage: "eosink status [-pipeline P] [-json] [-config FILE | -database-url URL -brokers HOSTS -schema S]",
		desc: "Print one line per pipeline (partitions, owners alive or gone, unowned partitions, lag in records and seconds, dead letters), then each unowned partition with why and each stopped partition with its remedy."},
}

// lagCmd: eosink lag.
func lagCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ps, asJSON, err := listPositions(ctx, "lag", args, stderr)
	if err != nil {
		return err
	}
	return printPositions(stdout, ps, asJSON, true)
}

func printPositions(w io.Writer, ps []admin.Position, asJSON, lagOnly bool) error {
	if asJSON {
		return writeJSON(w, ps)
	}
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	if lagOnly {
		fmt.Fprintln(tw, "PIPELINE\tTOPIC\tPARTITION\tNEXT OFFSET\tLOG END\tLAG\tLAG SECONDS\tOLDEST UNAPPLIED")
	} else {
		fmt.Fprintln(tw, "PIPELINE\tTOPIC\tPARTITION\tNEXT OFFSET\tEPOCH\tOWNER\tLAST COMMIT\tLOG START\tLOG END\tLAG\tKAFKA COMMITTED")
	}
	var total int64
	var oldest float64
	for _, p := range ps {
		lag := fmt.Sprint(p.Lag)
		if p.Error != "" {
			lag = "error: " + term(p.Error)
		}
		total += p.Lag
		oldest = max(oldest, p.LagSeconds)
		if lagOnly {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", term(p.Pipeline), term(p.Topic), p.Partition, p.NextOffset, p.LogEnd, lag,
				lagSeconds(p.LagSeconds), oldestUnapplied(p))
		} else {
			kc := "-"
			if p.KafkaCommitted != nil {
				kc = fmt.Sprint(*p.KafkaCommitted)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%s\t%s\n", term(p.Pipeline), term(p.Topic), p.Partition, p.NextOffset, p.Epoch,
				term(p.Owner), p.UpdatedAt.UTC().Format(time.RFC3339), p.LogStart, p.LogEnd, lag, kc)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if lagOnly {
		fmt.Fprintf(w, "total lag: %d, oldest unapplied record: %s old\n", total, lagSeconds(oldest))
	}
	return nil
}

// warnDivergence tells when Kafka's committed offsets (advisory) differ from the stored ones.
func warnDivergence(w io.Writer, ps []admin.Position) {
	var diverged []string
	for _, p := range ps {
		if p.Diverged() {
			diverged = append(diverged, fmt.Sprintf("%s %s[%d]: stored %d, Kafka %d", term(p.Pipeline), term(p.Topic), p.Partition, p.NextOffset, *p.KafkaCommitted))
		}
	}
	if len(diverged) > 0 {
		fmt.Fprintf(w, "warning: Kafka's committed offset differs from the stored position for %d partition(s); Kafka's lag tools are off "+
			"until the sink's next advisory commit (positions come from the database only):\n  %s\n", len(diverged), strings.Join(diverged, "\n  "))
	}
}

// lagSeconds formats a LagSeconds: "?" when unknown (-1).
func lagSeconds(s float64) string {
	if s < 0 {
		return "?"
	}
	return (time.Duration(s * float64(time.Second))).Round(100 * time.Millisecond).String()
}

// oldestUnapplied formats the timestamp of p's first unapplied record with its kind, "-"
// when there is none.
func oldestUnapplied(p admin.Position) string {
	if p.OldestUnapplied.IsZero() {
		return "-"
	}
	return p.OldestUnapplied.UTC().Format(time.RFC3339Nano) + " (" + p.TimestampType + ")"
}
