package mapping

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// Errors about text that PostgreSQL cannot store. They are made on the error path only.
func errNUL() error     { return &detailError{ErrInvalidText, "contains a NUL byte"} }
func errBadUTF8() error { return &detailError{ErrInvalidText, "not valid UTF-8"} }

// checkText reports whether s can be PostgreSQL text: valid UTF-8 without NUL.
func checkText(s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return errNUL()
	}
	if !utf8.ValidString(s) {
		return errBadUTF8()
	}
	return nil
}

// checkTextBytes is checkText for a byte slice.
func checkTextBytes(b []byte) error {
	if bytes.IndexByte(b, 0) >= 0 {
		return errNUL()
	}
	if !utf8.Valid(b) {
		return errBadUTF8()
	}
	return nil
}

// trimJSONSpace removes JSON whitespace (space, tab, newline, carriage return) from both
// ends of s.
func trimJSONSpace(s string) string {
	i, j := 0, len(s)
	for i < j && isJSONSpace(s[i]) {
		i++
	}
	for j > i && isJSONSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
