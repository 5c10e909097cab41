package cli

import (
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/opsview"
)

// printDeadLetters prints a list of dead letters; withState adds the STATE column (list
// -all), which reads open, or how the dead letter was resolved, with "edited" when an
// operator stored a corrected value.
func printDeadLetters(w io.Writer, list []admin.DeadLetter, asJSON, withState bool) error {
	if asJSON {
		if list == nil {
			list = []admin.DeadLetter{}
		}
		return writeJSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	state := ""
	if withState {
		state = "STATE\t"
	}
	fmt.Fprintln(tw, "ID\tPIPELINE\tTOPIC\tPARTITION\tOFFSET\t"+state+"FAILURES\tLAST FAILED\tVALUE BYTES\tERROR")
	for _, d := range list {
		if withState {
			state = d.State
			if d.Edited {
				state += ", edited"
			}
			state += "\t"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s%d\t%s\t%d\t%s\n", d.ID, term(d.Pipeline), term(d.Topic), d.Partition, d.Offset, state, d.Failures,
			d.LastFailedAt.UTC().Format(time.RFC3339), d.ValueBytes, term(firstLine(d.Error, 100)))
	}
	return tw.Flush()
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// printable returns b as text if it is valid UTF-8, else as base64 with a prefix. Human
// output passes it through term.
func printable(b []byte) string {
	if b == nil {
		return "(null)"
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b)
}

// printableKey shows a header key: as text if it is valid UTF-8 without NUL or "=", else as
// base64 with a prefix.
func printableKey(k string) string {
	if utf8.ValidString(k) && !strings.ContainsAny(k, "\x00=") && !strings.HasPrefix(k, "base64:") {
		return k
	}
	return "base64:" + base64.StdEncoding.EncodeToString([]byte(k))
}

// printDeadLetter prints one dead letter with its record, its edit and its audit.
func printDeadLetter(w io.Writer, d admin.DeadLetter, audit []admin.AuditEntry, asJSON bool) error {
	r := d.Record
	if asJSON {
		return writeJSON(w, opsview.DeadLetterOf(d, audit))
	}
	state := d.State
	if d.ResolvedAt != nil {
		state = fmt.Sprintf("%s (by %s, %s)", d.State, term(d.ResolvedBy), d.ResolvedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "id:            %d\npipeline:      %s\nrecord:        %s[%d]@%d\nstate:         %s\ntimestamp:     %s\nfailures:      %d (first %s, last %s)\nerror:         %s\nkey:           %s\nvalue:         %s\n",
		d.ID, term(d.Pipeline), term(d.Topic), d.Partition, d.Offset, state, r.Timestamp.UTC().Format(time.RFC3339Nano), d.Failures,
		d.FirstFailedAt.UTC().Format(time.RFC3339), d.LastFailedAt.UTC().Format(time.RFC3339), term(d.Error), term(printable(r.Key)), term(printable(r.Value)))
	for _, h := range r.Headers {
		fmt.Fprintf(w, "header:        %s=%s\n", term(printableKey(h.Key)), term(printable(h.Value)))
	}
	if e := d.Replayed; e != nil {
		at := ""
		if d.EditedAt != nil {
			at = d.EditedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "edited:        by %s, %s (replay applies the edited key and value)\nedited key:    %s\nedited value:  %s\n",
			term(d.EditedBy), at, term(printable(e.Key)), term(printable(e.Value)))
	}
	for _, a := range audit {
		reason := ""
		if a.Reason != "" {
			reason = ": " + term(a.Reason)
		}
		fmt.Fprintf(w, "audit:         %s %s by %s (role %s)%s\n", a.At.UTC().Format(time.RFC3339), a.Action, term(a.Operator), term(a.DBUser), reason)
	}
	return nil
}
