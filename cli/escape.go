package cli

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// term returns s safe to print on a terminal: every character that is not printable (C0 and
// C1 controls, ESC, DEL, bidi overrides and other format characters, invalid UTF-8) is
// written as a Go escape (\n, \t, \x1b, \u202e), so that record data can neither drive the
// terminal nor forge lines of output. Printable text, spaces and backslashes are unchanged;
// -json output gives the exact bytes.
func term(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || (r != ' ' && !unicode.IsPrint(r)) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[:n])
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		s = s[n:]
	}
	return b.String()
}
