package pgerr

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// SafeText returns s as PostgreSQL's text type stores it: valid UTF-8 without NUL. Each byte
// of s that is not part of valid UTF-8, and each NUL, is written visibly as \xNN; the rest is
// unchanged. Error texts quote records (a header key, a value), which may hold any bytes, and
// an error text that text refuses (SQLSTATE 22021) must not stop a partition.
func SafeText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if r == 0 || (r == utf8.RuneError && n == 1) {
			fmt.Fprintf(&b, `\x%02x`, s[0])
		} else {
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}
