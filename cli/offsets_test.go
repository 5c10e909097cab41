package cli

import (
	"strings"
	"testing"
)

// TestOffsetsSetDryRunChecksLikeTheRun: a dry run refuses every argument the real run
// refuses, with the same message, before connecting (no database is set here), so that a dry
// run that passes can be run as is.
func TestOffsetsSetDryRunChecksLikeTheRun(t *testing.T) {
	t.Setenv("USER", "")
	t.Setenv("DATABASE_URL", "")
	t.Setenv("KAFKA_BOOTSTRAP_SERVERS", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-pipeline", "p", "-to", "earliest", "-reason", "replay"}, "offsets set: -operator is required (it goes to the audit table; USER is not set)"},
		{[]string{"-pipeline", "p", "-to", "earliest", "-operator", "me"}, "offsets set: -reason is required"},
		{[]string{"-pipeline", "p", "-to", "earliest", "-operator", "me", "-reason", "x", "-partition", "1"}, "offsets set: -partition needs -topic"},
		{[]string{"-pipeline", "p", "-to", "soon", "-operator", "me", "-reason", "x"}, "offsets set: -to: "},
		{[]string{"-to", "earliest", "-operator", "me", "-reason", "x"}, "offsets set: -pipeline is required"},
	} {
		for _, dry := range []bool{false, true} {
			args := append([]string{"offsets", "set"}, tc.args...)
			if dry {
				args = append(args, "-dry-run")
			}
			code, _, errOut := runCLI(args...)
			if code != 2 || !strings.Contains(errOut, "eosink: "+tc.want) {
				t.Errorf("eosink %v: exit %d, stderr %q; want exit 2 and %q", args, code, errOut, tc.want)
			}
		}
	}
	// With every argument, the dry run gets as far as connecting.
	code, _, errOut := runCLI("offsets", "set", "-pipeline", "p", "-to", "earliest", "-operator", "me", "-reason", "x", "-dry-run")
	if code != 2 || !strings.Contains(errOut, "no database") {
		t.Errorf("complete dry run: exit %d, stderr %q; want the missing database", code, errOut)
	}
}
