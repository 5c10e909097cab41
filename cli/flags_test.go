package cli

import (
	"strings"
	"testing"
)

// TestNumericFlagsAreRangeChecked: a number out of its flag's range is a usage error (exit
// 2) naming the flag, before anything connects: -partition 4294967296 once wrapped to
// partition 0 and discarded its dead letters.
func TestNumericFlagsAreRangeChecked(t *testing.T) {
	db := "postgres://u@127.0.0.1:1/x?connect_timeout=1"
	cases := []struct {
		args []string
		flag string
	}{
		{[]string{"dlq", "discard", "-pipeline", "p", "-partition", "4294967296", "-all", "-yes"}, "-partition"},
		{[]string{"dlq", "discard", "-pipeline", "p", "-partition", "2147483648", "-all", "-yes"}, "-partition"},
		{[]string{"dlq", "list", "-partition", "-2"}, "-partition"},
		{[]string{"dlq", "list", "-partition", "99999999999999999999"}, "-partition"},
		{[]string{"dlq", "list", "-limit", "-1"}, "-limit"},
		{[]string{"dlq", "list", "-limit", "4294967296"}, "-limit"},
		{[]string{"dlq", "show", "-id", "0"}, "-id"},
		{[]string{"dlq", "show", "-id", "-5"}, "-id"},
		{[]string{"dlq", "discard", "-pipeline", "p", "-id", "1,-2", "-yes"}, "-id"},
		{[]string{"dlq", "show", "-id", "9223372036854775808"}, "-id"},
		{[]string{"offsets", "set", "-pipeline", "p", "-topic", "t", "-partition", "4294967296", "-to", "earliest", "-reason", "r", "-operator", "o", "-brokers", "127.0.0.1:1"}, "-partition"},
		{[]string{"offsets", "set", "-pipeline", "p", "-topic", "t", "-partition", "-2", "-to", "earliest", "-reason", "r", "-operator", "o", "-brokers", "127.0.0.1:1"}, "-partition"},
		{[]string{"offsets", "set", "-pipeline", "p", "-to", "-3", "-reason", "r", "-operator", "o", "-brokers", "127.0.0.1:1"}, "-to"},
		{[]string{"migrate", "-database-url", db, "force", "-2"}, "VERSION"},
		{[]string{"migrate", "-database-url", db, "force", "99999999999"}, "VERSION"},
		{[]string{"run", "-config", "x.yaml", "-progress", "-1s"}, "-progress"},
	}
	for _, c := range cases {
		args := c.args
		if args[0] == "dlq" || args[0] == "offsets" {
			args = append(args, "-database-url", db)
		}
		code, out, errs := runCLI(args...)
		if code != 2 || !strings.Contains(errs, c.flag) || strings.Contains(errs, "cannot connect") {
			t.Errorf("eosink %v: exit %d, stdout %q, stderr %q; want exit 2 naming %s", c.args, code, out, firstLine(errs, 300), c.flag)
		}
	}
}
