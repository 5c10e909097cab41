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
)

// statusCmd: eosink status, one line per pipeline (owners marked alive or gone), then one
// line per stopped partition with its reason and remedy.
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ps, dead, asJSON, err := listPositionsAndDead(ctx, "status", args, stderr, true)
	if err != nil {
		return err
	}
	return printStatus(stdout, ps, dead, asJSON)
}

// printStatus prints status's summary of ps with the dead letters per pipeline.
func printStatus(stdout io.Writer, ps []admin.Position, dead map[string]int64, asJSON bool) error {
	type stopped struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		admin.Stop
		OwnerAlive bool `json:"owner_alive"`
	}
	type summary struct {
		Pipeline   string    `json:"pipeline"`
		Partitions int       `json:"partitions"`
		Owners     []string  `json:"owners"`
		MaxEpoch   int64     `json:"max_epoch"`
		LastCommit time.Time `json:"last_commit"`
		Lag        int64     `json:"lag"`
		Lagging    int       `json:"partitions_lagging"`
		Errors     int       `json:"partitions_in_error"`
		Dead       int64     `json:"dead_letters"`
		Alive      []string  `json:"owners_alive"`
		Stopped    []stopped `json:"stopped"`
	}
	var out []*summary
	by := map[string]*summary{}
	for _, p := range ps {
		s := by[p.Pipeline]
		if s == nil {
			s = &summary{Pipeline: p.Pipeline}
			by[p.Pipeline] = s
			out = append(out, s)
		}
		s.Partitions++
		if !slices.Contains(s.Owners, p.Owner) {
			s.Owners = append(s.Owners, p.Owner)
		}
		if p.OwnerAlive && !slices.Contains(s.Alive, p.Owner) {
			s.Alive = append(s.Alive, p.Owner)
		}
		if p.Stopped != nil {
			s.Stopped = append(s.Stopped, stopped{Topic: p.Topic, Partition: p.Partition, Stop: *p.Stopped, OwnerAlive: p.OwnerAlive})
		}
		s.MaxEpoch = max(s.MaxEpoch, p.Epoch)
		if p.UpdatedAt.After(s.LastCommit) {
			s.LastCommit = p.UpdatedAt
		}
		s.Lag += p.Lag
		if p.Lag > 0 {
			s.Lagging++
		}
		if p.Error != "" {
			s.Errors++
		}
	}
	for _, s := range out {
		s.Dead = dead[s.Pipeline]
	}
	if asJSON {
		return writeJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PIPELINE\tPARTITIONS\tOWNERS\tMAX EPOCH\tLAST COMMIT\tLAG\tLAGGING\tIN ERROR\tSTOPPED\tDEAD LETTERS")
	for _, s := range out {
		owners := make([]string, len(s.Owners))
		for i, o := range s.Owners {
			owners[i] = term(o) + " (gone)"
			if slices.Contains(s.Alive, o) {
				owners[i] = term(o) + " (alive)"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\n", term(s.Pipeline), s.Partitions, strings.Join(owners, ","), s.MaxEpoch,
			s.LastCommit.UTC().Format(time.RFC3339), s.Lag, s.Lagging, s.Errors, len(s.Stopped), s.Dead)
	}
	if err := tw.Flush(); err != nil {
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
