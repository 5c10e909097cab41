// Package names checks the names a configuration gives (topics, groups, schemas, tables) for
// bytes no name may hold.
package names

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Check returns why s cannot be a name: it holds a NUL byte (librdkafka's C strings and
// PostgreSQL's text and identifiers cannot hold one, and a name cut at it would name something
// else), another control character (a name with a newline or a terminal escape forges log
// lines and command output), or bytes that are not UTF-8 (PostgreSQL's text refuses them).
// "" when s is none of those. The reason never quotes s.
func Check(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for i, r := range s {
		if r == 0 {
			return fmt.Sprintf("holds a NUL byte (\\x00) at byte %d", i)
		}
		if unicode.IsControl(r) {
			return fmt.Sprintf("holds a control character (%U) at byte %d", r, i)
		}
	}
	return ""
}
