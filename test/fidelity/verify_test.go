package fidelity

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// verifyLine is a difference line of `eosink cdc verify`: kind, replica table, key columns
// and key values ("different fidrep.t_int4_d key (id)=(17)").
var verifyLine = regexp.MustCompile(`^(missing|extra|different)\s+(\S+) key \((.*?)\)=\((.*?)\)`)

// cdcVerify runs `eosink cdc verify` on the pipeline of rp for the source tables tables
// (fid.<name>) and returns the differing keys per replica table name, and the last line.
func cdcVerify(t *testing.T, rp *replica, srcURL string, tables []string) (map[string][]string, string) {
	t.Helper()
	var qualified []string
	for _, tb := range tables {
		qualified = append(qualified, "fid."+tb)
	}
	cmd := exec.Command(eosinkBin, "cdc", "verify", "-config", rp.config, "-table", strings.Join(qualified, ","), "-wait", "2s", "-progress", "0")
	cmd.Env = append(cmd.Environ(), "EOSINK_CDC_SOURCE_URL="+srcURL)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("%s: eosink cdc verify: %v\n%s%s", rp.label, err, out, stderrOf(err))
	}
	keys := map[string][]string{}
	last := ""
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if m := verifyLine.FindStringSubmatch(line); m != nil {
			name := strings.Trim(m[2][strings.LastIndexByte(m[2], '.')+1:], `"`) // "schema"."table"
			keys[name] = append(keys[name], m[4])
		}
		if strings.HasPrefix(line, "cdc verify:") {
			last = line
		}
	}
	if err == nil && len(keys) > 0 || err != nil && len(keys) == 0 {
		t.Fatalf("%s: eosink cdc verify exited %v with %d differing tables:\n%s%s", rp.label, err, len(keys), out, stderrOf(err))
	}
	return keys, last
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// differKeys returns the keys of a cell's differences ("438: source ..." → "438").
func differKeys(c cell) map[string]bool {
	out := map[string]bool{}
	for _, d := range c.differ {
		if k, _, ok := strings.Cut(d, ":"); ok {
			out[k] = true
		}
	}
	return out
}

// verifyAgrees checks `eosink cdc verify` against the suite's comparison of a replica made
// from the source's DDL (a create: true replica's column types differ from the source's, so
// verify's text comparison is not the suite's by-value one there): every table the suite
// found exact, and the marker, has 0 differences, and every key verify reports in another
// table is one the suite found differing. Then it changes one row of one exact table in the
// replica by hand and requires verify to report exactly that key. It returns the problems
// and prints what it saw.
func verifyAgrees(t *testing.T, ctx context.Context, db querier, rp *replica, srcURL string, cells []cell, out *strings.Builder) []string {
	t.Helper()
	var names []string
	byName := map[string]cell{}
	for _, c := range cells {
		names = append(names, c.tb.name)
		byName[c.tb.name] = c
	}
	keys, last := cdcVerify(t, rp, srcURL, append([]string{"marker"}, names...))
	var problems []string
	agreed := 0
	for name, ks := range keys {
		c, ok := byName[name]
		if !ok || len(c.differ) == 0 {
			problems = append(problems, fmt.Sprintf("verify %s: %s: %d differences (%s) where the comparison found none", rp.label, name, len(ks), strings.Join(ks[:min(3, len(ks))], ", ")))
			continue
		}
		suite := differKeys(c)
		var extra []string
		for _, k := range ks {
			if !suite[k] {
				extra = append(extra, k)
			}
		}
		if len(extra) > 0 {
			problems = append(problems, fmt.Sprintf("verify %s: %s: keys %s differ where the comparison found them equal", rp.label, name, strings.Join(extra, ", ")))
		}
		agreed++
		fmt.Fprintf(out, "verify %s: %s: %d differences, the comparison's %d (%s)\n", rp.label, name, len(ks), len(c.differ), c.status[:min(60, len(c.status))])
	}
	fmt.Fprintf(out, "verify %s: %s; 0 in every table the comparison found equal, %d tables with differences both found\n", rp.label, last, agreed)

	// One row changed by hand, in the first exact table with a row.
	sort.Strings(names)
	for _, name := range names {
		c := byName[name]
		if c.status != "exact" || c.replica == 0 {
			continue
		}
		var id int64
		if err := db.QueryRow(ctx, fmt.Sprintf("UPDATE %s SET note = 'changed by hand' WHERE id = (SELECT min(id) FROM %[1]s) RETURNING id",
			pgx.Identifier{rp.schema, name}.Sanitize())).Scan(&id); err != nil {
			t.Fatal(err)
		}
		got, last := cdcVerify(t, rp, srcURL, []string{name})
		want := fmt.Sprint(id)
		if len(got) != 1 || len(got[name]) != 1 || got[name][0] != want {
			problems = append(problems, fmt.Sprintf("verify %s: %s id %s changed by hand in the replica: verify reported %v", rp.label, name, want, got))
		}
		fmt.Fprintf(out, "verify %s: %s id %s changed by hand in the replica: verify reported %v; %s\n", rp.label, name, want, got[name], last)
		break
	}
	return problems
}
