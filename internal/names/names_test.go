package names

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, ok := range []string{"", "orders", "Sales", "ünïcode.table-1", "^cdc\\.public\\..*"} {
		if r := Check(ok); r != "" {
			t.Errorf("Check(%q) = %q, want \"\"", ok, r)
		}
	}
	for s, want := range map[string]string{
		"a\x00b": "NUL byte (\\x00) at byte 1", "a\nb": "control character (U+000A)", "\x1b[31m": "U+001B",
		"tab\t": "U+0009", "del\x7f": "U+007F", "c1\u0085": "U+0085", "bad\xff": "not valid UTF-8",
	} {
		if r := Check(s); !strings.Contains(r, want) {
			t.Errorf("Check(%q) = %q, want %q", s, r, want)
		}
	}
}
