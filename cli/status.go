package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/opsview"
)

// statusCmd: eosink status, one line per pipeline (owners marked alive or gone, unowned
// partitions, lag in records and seconds), then one line per unowned partition with why
// (printUnowned) and one per stopped partition with its reason and remedy.
// After them, for a schema with a transactional outbox, its lines (printOutbox).
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var ob *admin.OutboxStatus
	var leases []admin.Lease
	ps, dead, asJSON, err := listPositionsAndDead(ctx, "status", args, stderr, true, &ob, &leases)
	if err != nil {
		return err
	}
	if err := printStatus(stdout, ps, dead, leases, asJSON); err != nil || asJSON {
		return err
	}
	return printOutbox(stdout, ob)
}

// printLeases prints status's lease lines: who holds each set (a cdc replica in
// consistency: transaction), which the other members wait for.
func printLeases(w io.Writer, leases []admin.Lease) error {
	for _, l := range leases {
		held := "released (the next member to start takes it)"
		if l.Holder != "" {
			held = fmt.Sprintf("held by %s, renewed %s ago", term(l.Holder), l.Age.Round(time.Second))
		}
		if _, err := fmt.Fprintf(w, "lease: %s %s: %s, epoch %d\n", term(l.Pipeline), term(l.Name), held, l.Epoch); err != nil {
			return err
		}
	}
	return nil
}

// printOutbox prints status's outbox lines: the unpublished rows, then one line per relay
// shard as its outbox_relays row records it. Nothing when the schema has no outbox.
func printOutbox(w io.Writer, ob *admin.OutboxStatus) error {
	if ob == nil {
		return nil
	}
	age := "-"
	if !ob.Oldest.IsZero() {
		age = time.Since(ob.Oldest).Round(time.Second).String()
	}
	if _, err := fmt.Fprintf(w, "outbox: %d unpublished, oldest %s\n", ob.Unpublished, age); err != nil {
		return err
	}
	for _, s := range ob.Shards {
		if _, err := fmt.Fprintf(w, "outbox relay %s shard %d: last id %d, published %d, by %s, updated %s ago\n", term(s.Relay), s.Shard, s.LastID,
			s.Published, term(s.Owner), time.Since(s.UpdatedAt).Round(time.Second)); err != nil {
			return err
		}
	}
	return nil
}

// printStatus prints status's summary of ps with the dead letters per pipeline.
func printStatus(stdout io.Writer, ps []admin.Position, dead map[string]int64, leases []admin.Lease, asJSON bool) error {
	out := opsview.Summaries(ps, dead, leases)
	if asJSON {
		return writeJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PIPELINE\tPARTITIONS\tOWNERS\tUNOWNED\tMAX EPOCH\tLAST COMMIT\tLAG\tLAG SECONDS\tLAGGING\tIN ERROR\tSTOPPED\tDEAD LETTERS")
	for _, s := range out {
		owners := make([]string, len(s.Owners))
		for i, o := range s.Owners {
			owners[i] = term(o) + " (gone)"
			if slices.Contains(s.Alive, o) {
				owners[i] = term(o) + " (alive)"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%d\t%s\t%d\t%d\t%d\t%d\n", term(s.Pipeline), s.Partitions, strings.Join(owners, ","), s.Unowned, s.MaxEpoch,
			s.LastCommit.UTC().Format(time.RFC3339), s.Lag, lagSeconds(s.LagSeconds), s.Lagging, s.Errors, len(s.Stopped), s.Dead)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printLeases(stdout, leases); err != nil {
		return err
	}
	if err := printUnowned(stdout, ps); err != nil {
		return err
	}
	for _, s := range out {
		for _, st := range s.Stopped {
			fmt.Fprintf(stdout, "stopped: %s %s[%d]: %s since %s on %s: %s\n  remedy: %s\n", term(s.Pipeline), term(st.Topic), st.Partition, term(st.Reason),
				st.At.UTC().Format(time.RFC3339), term(st.By), term(st.Error), term(st.Remedy))
		}
	}
	return nil
}
